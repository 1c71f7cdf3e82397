#pragma once
// The generated 3-D shapes set (shapes3d.hpp) cached on disk: written once into a cache folder,
// read through on every later use (the IDX reader checks headers, sizes and the gzip checksums)
// and regenerated when damaged. The set is written into a temporary folder and renamed into
// place, so that an interrupted run leaves no half-written set.
#include <cstdint>
#include <functional>
#include <string>

namespace weft::data {

/// Which generated set: sizes and seed (the defaults of `weft data shapes3d`).
struct Shapes3dSpec {
  std::int64_t train = 4000;
  std::int64_t test = 1000;
  std::int64_t size = 32;
  std::uint64_t seed = 1;
};

/// $XDG_CACHE_HOME/weft, else $HOME/.cache/weft; "" when neither is set.
std::string default_cache_root();

/// The folder under `root` that holds the set `spec` (its name encodes the generator's version,
/// so that a newer generator does not reuse an older one's files).
std::string shapes3d_cache_folder(const std::string& root, const Shapes3dSpec& spec);

/// Makes shapes3d_cache_folder(root, spec) hold a sound copy of the set and returns it. Not
/// collective: call it on one rank. `notice` hears what happens ("generating ..." when the set
/// is missing, "... damaged (...); regenerating it" when a check fails; warning true for the
/// latter). Throws weft::BadData when the folder cannot be created or written.
std::string ensure_shapes3d_cache(
    const std::string& root, const Shapes3dSpec& spec,
    const std::function<void(const std::string& line, bool warning)>& notice = {});

}  // namespace weft::data
