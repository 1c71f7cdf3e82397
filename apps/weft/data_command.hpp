#pragma once
// `weft data shapes3d --out DIR`: writes the generated 3-D benchmark (weft/data/shapes3d.hpp)
// as IDX files that `weft train --data DIR --model conv3d` reads; and the cache behind
// `weft train --data shapes3d`: the default set, generated on first use into
// $XDG_CACHE_HOME/weft (else ~/.cache/weft) and reused. No LibTorch here.
#include <mpi.h>

#include <cstdint>
#include <string>

#include "cli_support.hpp"
#include "weft/data/idx.hpp"

namespace weft::cli {

Subcommand add_data_command(CLI::App& weft);

/// The name `--data` takes for the cached default set.
inline constexpr const char* kShapes3dName = "shapes3d";

/// Collective over `comm`: the folder of the cached default set (weft/data/shapes3d_cache.hpp),
/// made sound by rank 0. Throws weft::BadData when no cache folder can be found or written
/// (then write the set with `weft data shapes3d --out DIR` and pass --data DIR).
std::string shapes3d_cache(MPI_Comm comm);

/// What `--data` names: the cache folder for "shapes3d" (collective), else the folder as given.
std::string data_folder(const std::string& data, MPI_Comm comm);

/// "28x28" for images, "16x16x16" (depth x rows x cols) for volumes.
std::string size_text(const data::ImageSet& set);

}  // namespace weft::cli
