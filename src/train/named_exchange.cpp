// NamedExchange (named_exchange.hpp): the reads are gathered once; every transfer serializes,
// per destination, only the tensors that rank reads.
#include "named_exchange.hpp"

#include <torch/torch.h>

#include <set>
#include <sstream>

#include "weft/util/mpi.hpp"

namespace weft::train {

namespace {
// Key lists travel as lines (names hold no line breaks).
std::string lines(const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& key : keys) out += key + '\n';
  return out;
}

std::vector<std::string> keys_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string key; std::getline(in, key);) out.push_back(key);
  return out;
}
}  // namespace

std::vector<std::vector<std::string>> gather_keys(MPI_Comm comm,
                                                  const std::vector<std::string>& keys) {
  std::vector<std::vector<std::string>> out;
  for (const std::string& text :
       mpi::all_gather_bytes(comm, lines(keys), "MPI_Allgatherv (MG/Opt names)"))
    out.push_back(keys_of(text));
  return out;
}

NamedExchange::NamedExchange(MPI_Comm comm, const std::vector<std::string>& reads,
                             const std::function<bool(const std::string&)>& holds)
    : comm_(comm) {
  const std::set<std::string> distinct(reads.begin(), reads.end());
  const auto all = gather_keys(comm, {distinct.begin(), distinct.end()});
  const int me = mpi::rank(comm);
  sends_.resize(all.size());
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (static_cast<int>(r) == me) continue;
    for (const std::string& key : all[r])
      if (holds(key)) sends_[r].push_back(key);
  }
}

NamedTensors NamedExchange::operator()(const NamedTensors& mine,
                                       std::int64_t& received_bytes) const {
  if (sends_.size() <= 1) return mine;
  std::vector<std::string> to(sends_.size());
  for (std::size_t r = 0; r < sends_.size(); ++r) {
    torch::serialize::OutputArchive archive;
    bool any = false;
    for (const std::string& key : sends_[r]) {
      const auto it = mine.find(key);
      if (it == mine.end()) continue;  // e.g. optimizer state before the first step
      archive.write(key, it->second.detach().cpu());
      any = true;
    }
    if (!any) continue;
    std::ostringstream stream;
    archive.save_to(stream);
    to[r] = stream.str();
  }
  const std::vector<std::string> from =
      mpi::all_to_all_bytes(comm_, to, "MPI_Alltoallv (MG/Opt transfer)");
  NamedTensors out = mine;
  for (const std::string& bytes : from) {
    if (bytes.empty()) continue;
    received_bytes += static_cast<std::int64_t>(bytes.size());
    torch::serialize::InputArchive in;
    in.load_from(bytes.data(), bytes.size());
    for (const std::string& key : in.keys()) {
      torch::Tensor t;
      in.read(key, t);
      out[key] = t;
    }
  }
  return out;
}

}  // namespace weft::train
