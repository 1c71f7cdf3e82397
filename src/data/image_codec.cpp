// JPEG (libjpeg-turbo) and PNG (libpng) images as 8-bit RGB (weft/data/image_codec.hpp).
#include "weft/data/image_codec.hpp"

#include <png.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>

#include "weft/util/error.hpp"

namespace weft::data {
namespace {

[[noreturn]] void bad(const std::string& name, const std::string& why) {
  throw BadData(name + ": " + why);
}

// The largest image decoded: 2^26 pixels (8192 x 8192; ImageNet's largest are ~20 M pixels). A
// damaged header may claim 65535 x 65535, whose buffer alone would take 12 GB.
constexpr std::int64_t kMaxPixels = std::int64_t{1} << 26;

bool too_large(std::int64_t width, std::int64_t height) {
  return width < 1 || height < 1 || width * height > kMaxPixels;
}

// libjpeg reports errors by calling error_exit, which must not return: it jumps back to the
// setjmp in the function that called libjpeg. Warnings (corrupt or truncated data, which the
// decoder would pad with grey) jump back too. The functions that call setjmp hold only trivially
// destructible locals, so the jump skips no destructor.
struct JpegErrors {
  jpeg_error_mgr manager;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_fail(j_common_ptr info) {
  auto* errors = reinterpret_cast<JpegErrors*>(info->err);
  (*info->err->format_message)(info, errors->message);
  std::longjmp(errors->jump, 1);
}

void jpeg_message(j_common_ptr info, int level) {
  if (level < 0) jpeg_fail(info);  // a warning: damaged data
}

// Decodes into `pixels` (interleaved, `*channels` per pixel). False with `errors.message` set
// when libjpeg fails.
bool decode_jpeg(const std::uint8_t* data, std::size_t size, JpegErrors& errors,
                 std::vector<std::uint8_t>& pixels, std::int64_t* width, std::int64_t* height,
                 bool* cmyk) {
  jpeg_decompress_struct info;
  info.err = jpeg_std_error(&errors.manager);
  errors.manager.error_exit = jpeg_fail;
  errors.manager.emit_message = jpeg_message;
  if (setjmp(errors.jump)) {
    jpeg_destroy_decompress(&info);
    return false;
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, data, static_cast<unsigned long>(size));
  jpeg_read_header(&info, TRUE);
  *width = info.image_width;
  *height = info.image_height;
  if (too_large(*width, *height)) {
    jpeg_destroy_decompress(&info);
    return true;  // the caller refuses it by its size
  }
  *cmyk = info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK;
  info.out_color_space = *cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(&info);
  *width = info.output_width;
  *height = info.output_height;
  const std::size_t stride = static_cast<std::size_t>(info.output_width) *
                             static_cast<std::size_t>(info.out_color_components);
  pixels.resize(stride * info.output_height);
  while (info.output_scanline < info.output_height) {
    JSAMPROW row = pixels.data() + stride * info.output_scanline;
    jpeg_read_scanlines(&info, &row, 1);
  }
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  return true;
}

bool encode_jpeg(std::FILE* file, const Image& image, const std::vector<std::uint8_t>& interleaved,
                 int quality, JpegErrors& errors) {
  jpeg_compress_struct info;
  info.err = jpeg_std_error(&errors.manager);
  errors.manager.error_exit = jpeg_fail;
  if (setjmp(errors.jump)) {
    jpeg_destroy_compress(&info);
    return false;
  }
  jpeg_create_compress(&info);
  jpeg_stdio_dest(&info, file);
  info.image_width = static_cast<JDIMENSION>(image.width);
  info.image_height = static_cast<JDIMENSION>(image.height);
  info.input_components = static_cast<int>(image.channels);
  info.in_color_space = image.channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, quality, TRUE);
  jpeg_start_compress(&info, TRUE);
  const std::size_t stride = static_cast<std::size_t>(image.width * image.channels);
  while (info.next_scanline < info.image_height) {
    auto* row = const_cast<JSAMPROW>(interleaved.data() + stride * info.next_scanline);
    jpeg_write_scanlines(&info, &row, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
  return true;
}

// Interleaved (HWC) to channel-major (CHW), and back.
std::vector<std::uint8_t> planar(const std::vector<std::uint8_t>& hwc, std::int64_t pixels,
                                 std::int64_t channels) {
  std::vector<std::uint8_t> chw(hwc.size());
  for (std::int64_t i = 0; i < pixels; ++i)
    for (std::int64_t c = 0; c < channels; ++c)
      chw[static_cast<std::size_t>(c * pixels + i)] =
          hwc[static_cast<std::size_t>(i * channels + c)];
  return chw;
}

std::vector<std::uint8_t> interleaved(const Image& image) {
  const std::int64_t pixels = image.width * image.height, channels = image.channels;
  std::vector<std::uint8_t> hwc(image.pixels.size());
  for (std::int64_t i = 0; i < pixels; ++i)
    for (std::int64_t c = 0; c < channels; ++c)
      hwc[static_cast<std::size_t>(i * channels + c)] =
          image.pixels[static_cast<std::size_t>(c * pixels + i)];
  return hwc;
}

void check_writable(const Image& image) {
  if ((image.channels != 1 && image.channels != 3) || image.width < 1 || image.height < 1 ||
      image.pixels.size() != static_cast<std::size_t>(image.width * image.height * image.channels))
    throw InvalidOption("image writer", "image",
                        "must hold width x height x channels pixels with 1 or 3 channels");
}

Image jpeg_image(const std::uint8_t* data, std::size_t size, const std::string& name) {
  JpegErrors errors{};
  std::vector<std::uint8_t> hwc;
  std::int64_t width = 0, height = 0;
  bool cmyk = false;
  if (!decode_jpeg(data, size, errors, hwc, &width, &height, &cmyk))
    bad(name, std::string("not a readable JPEG image (") + errors.message + ")");
  if (too_large(width, height))
    bad(name, "a JPEG image of " + std::to_string(width) + "x" + std::to_string(height) +
                  " pixels (accepted: at most 2^26 pixels)");
  Image image;
  image.width = width;
  image.height = height;
  const std::int64_t n = width * height;
  if (cmyk) {  // Adobe's inverted CMYK, as JPEG writers store it: R = C K / 255 ...
    std::vector<std::uint8_t> rgb(static_cast<std::size_t>(3 * n));
    for (std::int64_t i = 0; i < n; ++i) {
      const unsigned k = hwc[static_cast<std::size_t>(4 * i + 3)];
      for (std::int64_t c = 0; c < 3; ++c)
        rgb[static_cast<std::size_t>(3 * i + c)] =
            static_cast<std::uint8_t>(hwc[static_cast<std::size_t>(4 * i + c)] * k / 255);
    }
    hwc.swap(rgb);
  }
  image.pixels = planar(hwc, n, 3);
  return image;
}

Image png_image_of(const std::uint8_t* data, std::size_t size, const std::string& name) {
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&png, data, size))
    bad(name, std::string("not a readable PNG image (") + png.message + ")");
  png.format = PNG_FORMAT_RGB;
  if (too_large(png.width, png.height)) {
    png_image_free(&png);
    bad(name, "a PNG image of " + std::to_string(png.width) + "x" + std::to_string(png.height) +
                  " pixels (accepted: at most 2^26 pixels)");
  }
  std::vector<std::uint8_t> hwc(PNG_IMAGE_SIZE(png));
  if (!png_image_finish_read(&png, nullptr, hwc.data(), 0, nullptr))
    bad(name, std::string("not a readable PNG image (") + png.message + ")");
  Image image;
  image.width = png.width;
  image.height = png.height;
  image.pixels = planar(hwc, image.width * image.height, 3);
  png_image_free(&png);
  return image;
}

// Resamples each channel along one axis from `from` to `to` samples with a triangle filter of
// support max(1, from / to) source pixels (antialiased when shrinking).
std::vector<float> resample(const std::vector<float>& in, std::int64_t lines, std::int64_t from,
                            std::int64_t to, std::int64_t in_step, std::int64_t line_step_in,
                            std::int64_t out_step, std::int64_t line_step_out) {
  std::vector<float> out(static_cast<std::size_t>(lines * to));
  const double scale = static_cast<double>(from) / static_cast<double>(to);
  const double support = std::max(1.0, scale);
  for (std::int64_t j = 0; j < to; ++j) {
    const double centre = (static_cast<double>(j) + 0.5) * scale - 0.5;
    const auto first = static_cast<std::int64_t>(std::floor(centre - support)) + 1;
    const auto last = static_cast<std::int64_t>(std::ceil(centre + support)) - 1;
    std::vector<std::pair<std::int64_t, double>> taps;
    double total = 0;
    for (std::int64_t i = first; i <= last; ++i) {
      const double w = 1.0 - std::abs(static_cast<double>(i) - centre) / support;
      if (w <= 0) continue;
      taps.emplace_back(std::clamp<std::int64_t>(i, 0, from - 1), w);
      total += w;
    }
    for (std::int64_t l = 0; l < lines; ++l) {
      double v = 0;
      for (const auto& [i, w] : taps)
        v += w * in[static_cast<std::size_t>(l * line_step_in + i * in_step)];
      out[static_cast<std::size_t>(l * line_step_out + j * out_step)] =
          static_cast<float>(v / total);
    }
  }
  return out;
}

}  // namespace

Image decode_image(const std::uint8_t* data, std::size_t size, const std::string& name) {
  if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF)
    return jpeg_image(data, size, name);
  if (size >= 8 && png_sig_cmp(data, 0, 8) == 0) return png_image_of(data, size, name);
  bad(name, size == 0 ? "an empty file, not an image" : "neither a JPEG nor a PNG image");
}

void check_image_file_ends(const std::string& path) {
  constexpr std::size_t kTail = 4096;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) bad(path, std::string("cannot open it (") + std::strerror(errno) + ")");
  const std::streamoff size = in.tellg();
  if (size <= 0) bad(path, "an empty file, not an image");
  std::uint8_t head[8] = {};
  in.seekg(0);
  in.read(reinterpret_cast<char*>(head), std::min<std::streamoff>(size, 8));
  const std::size_t tail_size = static_cast<std::size_t>(std::min<std::streamoff>(size, kTail));
  std::string tail(tail_size, '\0');
  in.seekg(size - static_cast<std::streamoff>(tail_size));
  in.read(tail.data(), static_cast<std::streamsize>(tail_size));
  if (!in) bad(path, "cannot read it");
  const bool jpeg = size >= 3 && head[0] == 0xFF && head[1] == 0xD8 && head[2] == 0xFF;
  const bool png = size >= 8 && png_sig_cmp(head, 0, 8) == 0;
  if (!jpeg && !png) bad(path, "neither a JPEG nor a PNG image");
  // FF D9 appears in JPEG data only as a marker (entropy-coded FF bytes are followed by 00).
  if (jpeg && tail.rfind("\xFF\xD9") == std::string::npos)
    bad(path, "a JPEG cut short (no end-of-image marker in its last " + std::to_string(tail_size) +
                  " bytes)");
  if (png && tail.rfind("IEND") == std::string::npos)
    bad(path,
        "a PNG cut short (no IEND chunk in its last " + std::to_string(tail_size) + " bytes)");
}

Image read_image(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, std::string("cannot open it (") + std::strerror(errno) + ")");
  const std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(in),
                                        std::istreambuf_iterator<char>()};
  if (in.bad()) bad(path, "cannot read it");
  return decode_image(bytes.data(), bytes.size(), path);
}

void write_jpeg(const std::string& path, const Image& image, int quality) {
  check_writable(image);
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) bad(path, std::string("cannot write it (") + std::strerror(errno) + ")");
  JpegErrors errors{};
  const bool ok = encode_jpeg(file, image, interleaved(image), std::clamp(quality, 1, 100), errors);
  const bool closed = std::fclose(file) == 0;
  if (!ok) bad(path, std::string("cannot write it as JPEG (") + errors.message + ")");
  if (!closed) bad(path, std::string("cannot write it (") + std::strerror(errno) + ")");
}

void write_png(const std::string& path, const Image& image) {
  check_writable(image);
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(image.width);
  png.height = static_cast<png_uint_32>(image.height);
  png.format = image.channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  const std::vector<std::uint8_t> hwc = interleaved(image);
  if (!png_image_write_to_file(&png, path.c_str(), 0, hwc.data(), 0, nullptr))
    bad(path, std::string("cannot write it as PNG (") + png.message + ")");
}

Image fit_image(const Image& image, std::int64_t side) {
  if (side < 1) throw InvalidOption("fit_image", "side", "must be at least 1");
  if (image.width == side && image.height == side) return image;
  const std::int64_t w = image.width, h = image.height, channels = image.channels;
  // The shorter side becomes `side`; the other keeps the aspect ratio (at least `side`).
  const double scale = static_cast<double>(side) / static_cast<double>(std::min(w, h));
  const std::int64_t to_w =
      std::max(side, static_cast<std::int64_t>(std::lround(static_cast<double>(w) * scale)));
  const std::int64_t to_h =
      std::max(side, static_cast<std::int64_t>(std::lround(static_cast<double>(h) * scale)));
  std::vector<float> in(image.pixels.begin(), image.pixels.end());
  // Rows first (each of channels * h lines), then columns (each of channels * to_w lines).
  std::vector<float> wide = resample(in, channels * h, w, to_w, 1, w, 1, to_w);
  Image out;
  out.width = out.height = side;
  out.channels = channels;
  out.pixels.resize(static_cast<std::size_t>(channels * side * side));
  const std::int64_t x0 = (to_w - side) / 2, y0 = (to_h - side) / 2;
  for (std::int64_t c = 0; c < channels; ++c) {
    const std::vector<float> plane(wide.begin() + c * h * to_w, wide.begin() + (c + 1) * h * to_w);
    const std::vector<float> tall = resample(plane, to_w, h, to_h, to_w, 1, to_w, 1);
    for (std::int64_t y = 0; y < side; ++y)
      for (std::int64_t x = 0; x < side; ++x)
        out.pixels[static_cast<std::size_t>((c * side + y) * side + x)] =
            static_cast<std::uint8_t>(std::clamp(
                std::lround(tall[static_cast<std::size_t>((y + y0) * to_w + x + x0)]), 0L, 255L));
  }
  return out;
}

}  // namespace weft::data
