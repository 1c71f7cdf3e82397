// libFuzzer harness: any bytes as an image file (decoded by libjpeg-turbo or libpng, then fitted
// to a square) and as the validation annotations of a tiny-imagenet folder
// (val/val_annotations.txt). Every problem must be a weft::BadData naming the file; nothing may
// crash, hang or read out of bounds.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "fuzz_files.hpp"
#include "weft/data/image_codec.hpp"
#include "weft/data/image_folder.hpp"
#include "weft/util/error.hpp"

namespace {

namespace fs = std::filesystem;

// A generated tiny-imagenet folder whose annotations each input replaces.
std::string scratch_dir() {
  static const std::string dir = [] {
    const std::string d = "/tmp/weft-fuzz-image-" + std::to_string(getpid());
    weft::data::write_generated_images(d, weft::data::ImageLayout::TinyImagenet, 2, 1, 1, 8, 1);
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const weft::data::Image image = weft::data::decode_image(data, size, "fuzz input");
    if (image.width * image.height <= (1 << 20))  // fitting a huge image is slow, not wrong
      weft::data::fit_image(image, 1 + (size % 13));
  } catch (const weft::BadData&) {
  }
  const std::string dir = scratch_dir();
  weft::fuzz::write_bytes(dir + "/val/val_annotations.txt", data, size);
  try {
    weft::data::index_images(dir, weft::data::ImageLayout::TinyImagenet, weft::data::Split::Test);
  } catch (const weft::BadData&) {
  }
  return 0;
}
