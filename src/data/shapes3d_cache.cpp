#include "weft/data/shapes3d_cache.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "weft/data/idx.hpp"
#include "weft/data/shapes3d.hpp"
#include "weft/util/error.hpp"

namespace weft::data {

namespace fs = std::filesystem;

namespace {

// The bump in the folder name retires caches written by an older generator.
constexpr int kGeneratorVersion = 1;

// Reads both splits through; throws BadData naming the file when anything is off.
void verify(const std::string& dir, const Shapes3dSpec& spec) {
  for (const Split split : {Split::Train, Split::Test}) {
    IdxOptions o;
    o.spatial_dims = 3;
    o.depth = o.rows = o.cols = spec.size;
    const auto d = fs::path(dir);
    const std::string images = (d / images_file(split, 3)).string();
    const ImageSet s = load_idx(images, (d / labels_file(split)).string(), o);
    const std::int64_t want = split == Split::Train ? spec.train : spec.test;
    if (s.count != want)
      throw BadData(images + ": holds " + std::to_string(s.count) + " samples, expected " +
                    std::to_string(want));
  }
}

// Writes the set into DIR.tmp-PID, then renames it to DIR (replacing a damaged DIR).
void generate_into(const std::string& dir, const Shapes3dSpec& spec) {
  const std::string tmp = dir + ".tmp-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  write_shapes3d(tmp, spec.train, spec.test, spec.size, spec.seed);
  fs::remove_all(dir, ec);
  fs::rename(tmp, dir, ec);
  if (ec && !fs::is_directory(dir)) {  // another job may have put it in place meanwhile
    fs::remove_all(tmp, ec);
    throw BadData("cannot move the generated shapes3d set into " + dir + " (" + ec.message() + ")");
  }
  fs::remove_all(tmp, ec);
}

}  // namespace

std::string default_cache_root() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return (fs::path(xdg) / "weft").string();
  if (const char* home = std::getenv("HOME"); home && *home)
    return (fs::path(home) / ".cache" / "weft").string();
  return "";
}

std::string shapes3d_cache_folder(const std::string& root, const Shapes3dSpec& spec) {
  return (fs::path(root) / ("shapes3d-v" + std::to_string(kGeneratorVersion) + "-" +
                            std::to_string(spec.size) + "-" + std::to_string(spec.train) + "-" +
                            std::to_string(spec.test) + "-seed" + std::to_string(spec.seed)))
      .string();
}

std::string ensure_shapes3d_cache(const std::string& root, const Shapes3dSpec& spec,
                                  const std::function<void(const std::string&, bool)>& notice) {
  const std::string dir = shapes3d_cache_folder(root, spec);
  std::error_code ec;
  if (fs::is_directory(dir, ec)) {
    try {
      verify(dir, spec);
      return dir;
    } catch (const BadData& e) {
      if (notice)
        notice(
            std::string("the cached shapes3d set is damaged (") + e.what() + "); regenerating it",
            true);
    }
  } else if (notice) {
    notice("generating the shapes3d set into " + dir + " (once)", false);
  }
  fs::create_directories(fs::path(dir).parent_path(), ec);
  if (ec)
    throw BadData("cannot create the cache folder " + fs::path(dir).parent_path().string() + " (" +
                  ec.message() + ")");
  generate_into(dir, spec);
  verify(dir, spec);
  return dir;
}

}  // namespace weft::data
