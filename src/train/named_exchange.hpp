#pragma once
// Named tensors between the ranks of a chain whose levels lay out their layers differently
// (MG/Opt's restriction and prolongation): each rank receives the tensors it reads from the
// ranks that hold them, and nothing else. Who reads what is set up once (the layouts do not
// change during training), so a transfer is one all-to-all of the tensors' bytes. Private to
// weft_train.
#include <mpi.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace weft::train {

using NamedTensors = std::map<std::string, torch::Tensor>;

/// Every rank's `keys`, in rank order (collective over `comm`).
std::vector<std::vector<std::string>> gather_keys(MPI_Comm comm,
                                                  const std::vector<std::string>& keys);

class NamedExchange {
 public:
  NamedExchange() = default;
  /// `reads`: the keys this rank reads; `holds(key)`: whether this rank holds that key.
  /// Collective over `comm`.
  NamedExchange(MPI_Comm comm, const std::vector<std::string>& reads,
                const std::function<bool(const std::string&)>& holds);

  /// This rank's tensors `mine` and, from the other ranks, those of their tensors this rank
  /// reads (a key its holder lacks is absent). Collective; adds the bytes received from other
  /// ranks to `received_bytes`.
  NamedTensors operator()(const NamedTensors& mine, std::int64_t& received_bytes) const;

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<std::vector<std::string>> sends_;  ///< sends_[r]: the keys of mine rank r reads
};

}  // namespace weft::train
