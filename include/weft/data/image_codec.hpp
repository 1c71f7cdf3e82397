#pragma once
// JPEG and PNG images as 8-bit RGB, for the image-folder readers (image_folder.hpp). JPEG goes
// through libjpeg-turbo (Debian's libjpeg62-turbo: SIMD decoding, several times faster than
// the reference libjpeg, and what PIL and torchvision use), PNG through libpng 1.6's simplified
// API. Greyscale, palette, 16-bit and alpha images are converted to RGB (alpha is dropped by
// composing onto black); CMYK JPEGs are converted to RGB. A decoder's warning (a truncated or
// damaged stream, which the libraries would pad with grey) is an error: every problem throws
// weft::BadData naming the file, as does an image of more than 2^26 pixels (8192 x 8192).
// No LibTorch.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace weft::data {

/// An 8-bit image, channel-major: pixels[(c * height + y) * width + x], channels 1 or 3.
struct Image {
  std::int64_t width = 0, height = 0, channels = 3;
  std::vector<std::uint8_t> pixels;
};

/// Decodes a JPEG or PNG file (told by its first bytes, not its name) to RGB.
Image read_image(const std::string& path);
/// The same from memory; `name` names the image in errors.
Image decode_image(const std::uint8_t* data, std::size_t size, const std::string& name);
/// Reads only a file's first bytes and its last 4 KiB, so that a whole set can be checked before
/// training: throws BadData naming the file when it cannot be read, is empty, is neither a JPEG
/// nor a PNG, or is cut short (no JPEG end-of-image marker FF D9, no PNG IEND chunk near its
/// end). Damage inside an image is found only when read_image decodes it.
void check_image_file_ends(const std::string& path);

/// Writes `image` (1 or 3 channels) as a baseline JPEG of `quality` (1..100).
void write_jpeg(const std::string& path, const Image& image, int quality = 90);
/// Writes `image` (1 or 3 channels) as an 8-bit PNG.
void write_png(const std::string& path, const Image& image);

/// `image` as `side` x `side`: scaled so that its shorter side is `side` (a separable triangle
/// filter whose support widens when shrinking, so downscaling averages instead of aliasing),
/// then the centre square cropped. An image already `side` x `side` is returned unchanged.
Image fit_image(const Image& image, std::int64_t side);

}  // namespace weft::data
