// IDX reader. All files go through zlib's gz* interface, which reads gzip streams and plain
// files alike, so one code path serves both.
#include "weft/data/idx.hpp"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>

#include "weft/util/error.hpp"

namespace weft::data {
namespace {

constexpr std::uint8_t kUbyte = 0x08;  // IDX type code of unsigned bytes
constexpr std::uint8_t kLabelDims = 1;

// Dimensions of an image file: the count, then the spatial sizes.
std::uint8_t image_dims(const IdxOptions& o) {
  return static_cast<std::uint8_t>(1 + o.spatial_dims);
}

std::string hex32(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

std::uint32_t big_endian32(const std::uint8_t* b) {
  return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) |
         std::uint32_t{b[3]};
}

// PATH if it exists, else PATH.gz.
std::string resolve(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) return path;
  const std::string gz = path + ".gz";
  if (std::filesystem::is_regular_file(gz, ec)) return gz;
  throw BadData(path + ": missing file (no regular file at " + path + " or " + gz + ")");
}

// An open IDX file whose header has been parsed.
class IdxFile {
 public:
  IdxFile(const std::string& path, std::uint8_t ndims, const char* kind) : path_(resolve(path)) {
    errno = 0;
    file_.reset(gzopen(path_.c_str(), "rb"));
    if (!file_)
      throw BadData(path_ + ": cannot open (" + (errno ? std::strerror(errno) : "out of memory") +
                    ")");
    // A large buffer lets zlib inflate the pixel block in few, big steps.
    gzbuffer(file_.get(), 1u << 20);
    read_header(ndims, kind);
  }
  const std::string& path() const { return path_; }
  std::int64_t dim(std::size_t i) const { return dims_[i]; }

  // Reads `items` items of `item_bytes` bytes each; when that is the whole body, also reads to
  // the end of the gzip stream so that zlib verifies its CRC and length.
  std::vector<std::uint8_t> read_body(std::int64_t items, std::int64_t item_bytes) {
    const auto total = static_cast<std::uint64_t>(items) * static_cast<std::uint64_t>(item_bytes);
    std::vector<std::uint8_t> out;
    // Grow in doubling steps (1 MiB up to 256 MiB), so that a header promising absurd sizes
    // cannot make us allocate much more memory than the file backs.
    constexpr std::uint64_t kMaxStep = std::uint64_t{1} << 28;
    std::uint64_t step = std::uint64_t{1} << 20;
    while (out.size() < total) {
      const std::size_t old = out.size();
      const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(total - old, step));
      step = std::min(2 * step, kMaxStep);
      out.resize(old + want);
      const std::size_t got = read_some(out.data() + old, want);
      if (got < want) {
        throw BadData(path_ + ": truncated data: header promises " + std::to_string(total) +
                      " bytes of data (" + std::to_string(items) + " items of " +
                      std::to_string(item_bytes) + " bytes), only " + std::to_string(old + got) +
                      " follow the header" + truncation_detail());
      }
    }
    if (items == dims_[0]) {
      std::uint8_t probe = 0;
      read_some(&probe, 1);  // trailing bytes, if any, are ignored
    }
    return out;
  }

 private:
  void read_header(std::uint8_t ndims, const char* kind) {
    std::array<std::uint8_t, 4> magic{};
    if (read_some(magic.data(), 4) < 4)
      throw BadData(path_ + ": truncated header: no 4-byte magic number" + truncation_detail());
    const std::uint32_t expected = (std::uint32_t{kUbyte} << 8) | ndims;
    const std::uint32_t got = big_endian32(magic.data());
    if (magic[0] != 0 || magic[1] != 0 || magic[2] != kUbyte)
      throw BadData(path_ + ": bad magic number " + hex32(got) + " (expected " + hex32(expected) +
                    " for an IDX " + kind + " file of unsigned bytes)");
    if (magic[3] != ndims)
      throw BadData(path_ + ": wrong number of dimensions: " + std::to_string(magic[3]) +
                    " (magic " + hex32(got) + "; an IDX " + kind + " file has " +
                    std::to_string(ndims) + ", magic " + hex32(expected) + ")");
    std::array<std::uint8_t, 4 * 4> sizes{};
    if (read_some(sizes.data(), 4u * ndims) < 4u * ndims)
      throw BadData(path_ + ": truncated header: expected " + std::to_string(ndims) +
                    " dimension sizes" + truncation_detail());
    for (std::size_t i = 0; i < ndims; ++i) dims_[i] = big_endian32(sizes.data() + 4 * i);
  }

  // Reads up to n bytes; throws on a corrupt stream or an I/O error, returns fewer at the end.
  std::size_t read_some(std::uint8_t* dst, std::size_t n) {
    const int got = gzread(file_.get(), dst, static_cast<unsigned>(n));
    int err = Z_OK;
    const char* msg = gzerror(file_.get(), &err);
    // Z_BUF_ERROR is zlib's "unexpected end of file": the caller reports it as truncation.
    if (err == Z_ERRNO) throw BadData(path_ + ": read error (" + std::strerror(errno) + ")");
    if (err != Z_OK && err != Z_BUF_ERROR)
      throw BadData(path_ + ": corrupt gzip stream (" + msg + ")");
    return got > 0 ? static_cast<std::size_t>(got) : 0;
  }

  std::string truncation_detail() {
    int err = Z_OK;
    gzerror(file_.get(), &err);
    return err == Z_BUF_ERROR ? " (gzip stream ends early)" : "";
  }

  struct Close {
    void operator()(gzFile f) const { gzclose_r(f); }
  };
  std::string path_;
  std::unique_ptr<gzFile_s, Close> file_;
  std::array<std::int64_t, 4> dims_{};
};

void check_options(const IdxOptions& o) {
  if (o.num_classes < 1 || o.num_classes > 256)
    throw InvalidOption("IdxOptions::num_classes must be in 1..256, got " +
                        std::to_string(o.num_classes));
  if (o.spatial_dims != 2 && o.spatial_dims != 3)
    throw InvalidOption("IdxOptions::spatial_dims must be 2 (images) or 3 (volumes), got " +
                        std::to_string(o.spatial_dims));
  if (o.depth < 0)
    throw InvalidOption("IdxOptions::depth must be >= 0 (0 = any), got " + std::to_string(o.depth));
  if (o.rows < 0 || o.cols < 0)
    throw InvalidOption("IdxOptions::rows/cols must be >= 0 (0 = any), got " +
                        std::to_string(o.rows) + "x" + std::to_string(o.cols));
}

std::int64_t items_to_read(std::int64_t count, std::int64_t limit) {
  return limit < 0 ? count : std::min(count, limit);
}

// Checks the image header and returns the set's shape (pixels not read yet).
ImageSet image_shape(const IdxFile& f, const IdxOptions& o) {
  ImageSet s;
  const bool volume = o.spatial_dims == 3;
  const std::size_t first = volume ? 2 : 1;  // of rows
  s.spatial_dims = o.spatial_dims;
  s.classes = o.num_classes;
  s.count = f.dim(0);
  s.depth = volume ? f.dim(1) : 1;
  s.rows = f.dim(first);
  s.cols = f.dim(first + 1);
  const std::string size = (volume ? std::to_string(s.depth) + "x" : std::string()) +
                           std::to_string(s.rows) + "x" + std::to_string(s.cols);
  auto want = [](std::int64_t v) { return v > 0 ? std::to_string(v) : std::string("any"); };
  if (s.depth == 0 || s.rows == 0 || s.cols == 0)
    throw BadData(f.path() + ": wrong image size " + size);
  if ((o.rows > 0 && s.rows != o.rows) || (o.cols > 0 && s.cols != o.cols) ||
      (volume && o.depth > 0 && s.depth != o.depth))
    throw BadData(f.path() + ": wrong image size " + size + " (expected " +
                  (volume ? want(o.depth) + "x" : std::string()) + want(o.rows) + "x" +
                  want(o.cols) + ")");
  // Each size is < 2^32, yet their product may exceed 63 bits, and so may the total.
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  if (s.rows > kMax / s.cols || s.depth > kMax / (s.rows * s.cols) ||
      (s.count > 0 && s.image_size() > kMax / s.count))
    throw BadData(f.path() + ": header sizes too large: " + std::to_string(s.count) +
                  " images of " + size);
  return s;
}

std::vector<std::uint8_t> read_labels_body(IdxFile& f, const IdxOptions& o) {
  std::vector<std::uint8_t> labels = f.read_body(items_to_read(f.dim(0), o.limit), 1);
  const auto bad = std::find_if(labels.begin(), labels.end(),
                                [&](std::uint8_t l) { return int{l} >= o.num_classes; });
  if (bad != labels.end())
    throw BadData(f.path() + ": label value " + std::to_string(int{*bad}) + " at index " +
                  std::to_string(bad - labels.begin()) + " out of range (labels must be 0.." +
                  std::to_string(o.num_classes - 1) + ")");
  return labels;
}

}  // namespace

ImageSet read_idx_images(const std::string& path, const IdxOptions& options) {
  check_options(options);
  IdxFile f(path, image_dims(options), options.spatial_dims == 3 ? "volumes" : "images");
  ImageSet s = image_shape(f, options);
  s.count = items_to_read(s.count, options.limit);
  s.pixels = f.read_body(s.count, s.image_size());
  return s;
}

std::vector<std::uint8_t> read_idx_labels(const std::string& path, const IdxOptions& options) {
  check_options(options);
  IdxFile f(path, kLabelDims, "labels");
  return read_labels_body(f, options);
}

ImageSet load_idx(const std::string& images_path, const std::string& labels_path,
                  const IdxOptions& options) {
  check_options(options);
  // Both headers first: a count mismatch is reported before any bulk reading.
  IdxFile images(images_path, image_dims(options),
                 options.spatial_dims == 3 ? "volumes" : "images");
  IdxFile labels(labels_path, kLabelDims, "labels");
  ImageSet s = image_shape(images, options);
  if (s.count != labels.dim(0))
    throw BadData("image/label count mismatch: " + images.path() + " holds " +
                  std::to_string(s.count) + " images, " + labels.path() + " holds " +
                  std::to_string(labels.dim(0)) + " labels");
  s.count = items_to_read(s.count, options.limit);
  s.pixels = images.read_body(s.count, s.image_size());
  s.labels = read_labels_body(labels, options);
  return s;
}

std::string images_file(Split split) {
  return split == Split::Train ? "train-images-idx3-ubyte" : "t10k-images-idx3-ubyte";
}

std::string images_file(Split split, int spatial_dims) {
  if (spatial_dims == 2) return images_file(split);
  if (spatial_dims != 3)
    throw InvalidOption("images_file: spatial_dims must be 2 or 3, got " +
                        std::to_string(spatial_dims));
  return split == Split::Train ? "train-images-idx4-ubyte" : "t10k-images-idx4-ubyte";
}

std::string labels_file(Split split) {
  return split == Split::Train ? "train-labels-idx1-ubyte" : "t10k-labels-idx1-ubyte";
}

ImageSet load_mnist_split(const std::string& dir, Split split, std::int64_t limit) {
  IdxOptions o;
  o.limit = limit;
  o.rows = 28;
  o.cols = 28;
  return load_mnist_split(dir, split, o);
}

ImageSet load_mnist_split(const std::string& dir, Split split, const IdxOptions& options) {
  const std::filesystem::path d(dir);
  return load_idx((d / images_file(split)).string(), (d / labels_file(split)).string(), options);
}

namespace {

bool ends_with_gz(const std::string& path) {
  return path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
}

std::uint32_t header_size(std::int64_t v, const char* what) {
  if (v < 0 || v > std::numeric_limits<std::uint32_t>::max())
    throw InvalidOption("write_idx: " + std::string(what) + " " + std::to_string(v) +
                        " does not fit the 32-bit IDX header");
  return static_cast<std::uint32_t>(v);
}

// Header then body, plain or gzip (fast level: the data are regenerated, not archived).
void write_idx_file(const std::string& path, std::uint8_t ndims,
                    const std::vector<std::int64_t>& dims, const std::vector<std::uint8_t>& body) {
  std::vector<std::uint8_t> header = {0, 0, kUbyte, ndims};
  for (std::int64_t d : dims) {
    const std::uint32_t v = header_size(d, "size");
    for (int shift = 24; shift >= 0; shift -= 8)
      header.push_back(static_cast<std::uint8_t>(v >> shift));
  }
  errno = 0;
  gzFile f = gzopen(path.c_str(), ends_with_gz(path) ? "wb1" : "wbT");
  if (!f)
    throw BadData(path + ": cannot write (" + (errno ? std::strerror(errno) : "out of memory") +
                  ")");
  bool ok = gzwrite(f, header.data(), static_cast<unsigned>(header.size())) ==
            static_cast<int>(header.size());
  constexpr std::size_t kChunk = std::size_t{1} << 24;
  for (std::size_t at = 0; ok && at < body.size(); at += kChunk) {
    const auto n = static_cast<unsigned>(std::min(kChunk, body.size() - at));
    ok = gzwrite(f, body.data() + at, n) == static_cast<int>(n);
  }
  const int err = errno;
  if (gzclose_w(f) != Z_OK || !ok)
    throw BadData(path + ": cannot write (" + (err ? std::strerror(err) : "write error") + ")");
}

}  // namespace

void write_idx(const ImageSet& set, const std::string& images_path,
               const std::string& labels_path) {
  if (set.spatial_dims != 2 && set.spatial_dims != 3)
    throw InvalidOption("write_idx: spatial_dims must be 2 or 3, got " +
                        std::to_string(set.spatial_dims));
  if (set.count < 0 || set.depth < 1 || set.rows < 1 || set.cols < 1 ||
      (set.spatial_dims == 2 && set.depth != 1) ||
      set.pixels.size() != static_cast<std::size_t>(set.count * set.image_size()) ||
      set.labels.size() != static_cast<std::size_t>(set.count))
    throw InvalidOption("write_idx: " + std::to_string(set.pixels.size()) + " pixels and " +
                        std::to_string(set.labels.size()) + " labels do not match " +
                        std::to_string(set.count) + " images of " + std::to_string(set.depth) +
                        "x" + std::to_string(set.rows) + "x" + std::to_string(set.cols));
  std::vector<std::int64_t> dims = {set.count};
  if (set.spatial_dims == 3) dims.push_back(set.depth);
  dims.push_back(set.rows);
  dims.push_back(set.cols);
  write_idx_file(images_path, static_cast<std::uint8_t>(dims.size()), dims, set.pixels);
  write_idx_file(labels_path, kLabelDims, {set.count}, set.labels);
}

std::vector<float> to_float(const ImageSet& set, float mean, float std) {
  if (!(std > 0.0f)) throw InvalidOption("to_float: std must be > 0, got " + std::to_string(std));
  // A table of the 256 possible values keeps the exact formula at the cost of a lookup.
  std::array<float, 256> table{};
  for (std::size_t v = 0; v < table.size(); ++v)
    table[v] = (static_cast<float>(v) / 255.0f - mean) / std;
  std::vector<float> out(set.pixels.size());
  std::transform(set.pixels.begin(), set.pixels.end(), out.begin(),
                 [&](std::uint8_t p) { return table[p]; });
  return out;
}

std::vector<std::int64_t> labels_as_int64(const ImageSet& set) {
  return {set.labels.begin(), set.labels.end()};
}

}  // namespace weft::data
