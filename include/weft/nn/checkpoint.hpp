#pragma once
// Distributed checkpoints: every rank writes its own part (its parameters, buffers and optimizer
// state, keyed by the sequential network's names "open.*", "step_<n>.*", "close.*") and rank 0
// writes manifest.json, which records the layout and the caller's metadata. Because the keys do
// not depend on the layout, a checkpoint loads at any rank count, and also into a
// SequentialNetwork.
//
//   DIR/manifest.json        {"format": "weft-checkpoint-1", "generation": G, "ranks": P,
//                             "parts": [{"file", "keys"}], "metadata": {...}}
//   DIR/part-g<G>-r<r>.pt    LibTorch archive: "model/<name>", "optim/<name>/<field>"
//
// Saving is atomic: save G+1 writes (and syncs) new part files beside save G's, then
// manifest.json.tmp, renamed over manifest.json (the switch-over); only then are the old parts
// removed. A save that fails anywhere throws and leaves the previous checkpoint loadable.
//
// Optimizer state is saved for torch::optim::SGD (momentum buffers) and torch::optim::Adam
// (step, first and second moments); other optimizers are rejected with InvalidOption.
#include <mpi.h>

#include <string>

#include "weft/nn/depth.hpp"

namespace torch {
namespace nn {
class Module;
}
namespace optim {
class Optimizer;
}
}  // namespace torch

namespace weft::nn {

/// Collective over `comm`. `module` holds this rank's share of the network (a LayerParallel, or
/// a whole SequentialNetwork on one rank); `optimizer` may be null. `metadata_json` is a JSON
/// object stored verbatim under "metadata". Creates `dir` if needed. Every rank throws the same
/// weft::CollectiveError<BadData> when a write fails on any rank (the previous checkpoint in
/// `dir` is then unchanged).
void save_checkpoint(const std::string& dir, MPI_Comm comm, torch::nn::Module& module,
                     const torch::optim::Optimizer* optimizer, const std::string& metadata_json);

/// Collective. Fills every parameter and buffer of `module` from the checkpoint (each must be
/// found, with the same shape) and, when `optimizer` is given, its per-parameter state.
/// Returns the metadata JSON text. Throws weft::CollectiveError<BadData> on every rank (missing,
/// corrupt or inconsistent checkpoint; the message names the file).
std::string load_checkpoint(const std::string& dir, MPI_Comm comm, torch::nn::Module& module,
                            torch::optim::Optimizer* optimizer);

/// The same, each tensor of `module` (and its optimizer state) being the weighted sum of the
/// stored tensors `sources` names for its key: a network of another depth (depth.hpp).
/// Integer tensors and Adam's step count take the source of the largest weight.
std::string load_checkpoint(const std::string& dir, MPI_Comm comm, torch::nn::Module& module,
                            torch::optim::Optimizer* optimizer, const KeySources& sources);

/// Reads only the metadata JSON text of a checkpoint (no MPI, no tensors).
std::string read_checkpoint_metadata(const std::string& dir);

}  // namespace weft::nn
