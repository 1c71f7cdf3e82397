// Image files: the JPEG/PNG codec (round trips, greyscale to RGB, damaged files), fitting to a
// square, and the tiny-imagenet and ImageNet-folder layouts as published (generated sets, their
// files and labels, limits) with every bad-layout case the readers must name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "weft/data/folder.hpp"
#include "weft/data/image_codec.hpp"
#include "weft/data/image_folder.hpp"
#include "weft/util/error.hpp"

namespace {

namespace fs = std::filesystem;
using weft::BadData;
using namespace weft::data;

fs::path scratch(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("weft-image-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

Image gradient(std::int64_t w, std::int64_t h, std::int64_t channels) {
  Image im;
  im.width = w;
  im.height = h;
  im.channels = channels;
  for (std::int64_t c = 0; c < channels; ++c)
    for (std::int64_t y = 0; y < h; ++y)
      for (std::int64_t x = 0; x < w; ++x)
        im.pixels.push_back(static_cast<std::uint8_t>((40 * c + 3 * x + 2 * y) % 256));
  return im;
}

void expect_throws_naming(const std::function<void()>& f, const std::string& name,
                          const std::string& says) {
  try {
    f();
    ADD_FAILURE() << "no BadData for " << name;
  } catch (const BadData& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(name), std::string::npos) << what;
    EXPECT_NE(what.find(says), std::string::npos) << what;
  }
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ImageCodec, PngRoundTripsExactlyAndGreyBecomesRgb) {
  const fs::path dir = scratch("png");
  const Image rgb = gradient(17, 9, 3);
  write_png((dir / "rgb.png").string(), rgb);
  const Image back = read_image((dir / "rgb.png").string());
  EXPECT_EQ(back.width, 17);
  EXPECT_EQ(back.height, 9);
  EXPECT_EQ(back.channels, 3);
  EXPECT_EQ(back.pixels, rgb.pixels);

  const Image grey = gradient(5, 4, 1);
  write_png((dir / "grey.png").string(), grey);
  const Image g = read_image((dir / "grey.png").string());
  ASSERT_EQ(g.pixels.size(), 3u * 20u);
  for (std::size_t i = 0; i < 20; ++i)
    for (std::size_t c = 0; c < 3; ++c) EXPECT_EQ(g.pixels[c * 20 + i], grey.pixels[i]) << i;
}

TEST(ImageCodec, JpegRoundTripsCloselyAndGreyBecomesRgb) {
  const fs::path dir = scratch("jpeg");
  Image smooth = gradient(32, 24, 3);
  write_jpeg((dir / "a.jpg").string(), smooth, 95);
  const Image back = read_image((dir / "a.jpg").string());
  ASSERT_EQ(back.pixels.size(), smooth.pixels.size());
  double error = 0;
  for (std::size_t i = 0; i < back.pixels.size(); ++i)
    error += std::abs(static_cast<int>(back.pixels[i]) - static_cast<int>(smooth.pixels[i]));
  EXPECT_LT(error / static_cast<double>(back.pixels.size()), 4.0);  // lossy, but close

  const Image grey = gradient(16, 16, 1);
  write_jpeg((dir / "g.jpg").string(), grey, 95);
  const Image g = read_image((dir / "g.jpg").string());
  ASSERT_EQ(g.channels, 3);
  for (std::size_t i = 0; i < 256; ++i) {
    EXPECT_EQ(g.pixels[i], g.pixels[256 + i]);
    EXPECT_EQ(g.pixels[i], g.pixels[512 + i]);
  }
}

TEST(ImageCodec, DamagedFilesAreBadDataNamingTheFile) {
  const fs::path dir = scratch("damaged");
  write_jpeg((dir / "ok.jpg").string(), gradient(40, 40, 3), 90);
  write_png((dir / "ok.png").string(), gradient(40, 40, 3));
  const std::string jpeg = read_bytes(dir / "ok.jpg"), png = read_bytes(dir / "ok.png");
  write_bytes(dir / "cut.jpg", jpeg.substr(0, jpeg.size() / 2));
  write_bytes(dir / "cut.png", png.substr(0, png.size() / 2));
  std::string scrambled = jpeg;
  for (std::size_t i = 200; i < scrambled.size() - 2; i += 7) scrambled[i] = '\xff';
  write_bytes(dir / "scrambled.jpg", scrambled);
  write_bytes(dir / "text.jpg", "not an image at all");
  write_bytes(dir / "empty.png", "");
  for (const char* name : {"cut.jpg", "cut.png", "scrambled.jpg", "text.jpg", "empty.png"}) {
    const std::string path = (dir / name).string();
    expect_throws_naming([&] { read_image(path); }, path, "");
  }
  // The ends alone (checked for every file of a set before training): what is cut short, empty
  // or not an image is found; damage inside (scrambled, its ends intact) is left to decoding.
  for (const char* name : {"ok.jpg", "ok.png", "scrambled.jpg"})
    EXPECT_NO_THROW(check_image_file_ends((dir / name).string())) << name;
  for (const auto& [name, says] :
       std::vector<std::pair<const char*, const char*>>{{"cut.jpg", "a JPEG cut short"},
                                                        {"cut.png", "a PNG cut short"},
                                                        {"text.jpg", "neither a JPEG nor a PNG"},
                                                        {"empty.png", "an empty file"},
                                                        {"missing.jpg", "cannot open"}}) {
    const std::string path = (dir / name).string();
    expect_throws_naming([&] { check_image_file_ends(path); }, path, says);
  }
  expect_throws_naming([&] { read_image((dir / "missing.jpg").string()); }, "missing.jpg",
                       "cannot open");
  // A header claiming 65000 x 65000 pixels (the SOF0 segment: FF C0, length, precision, height,
  // width) is refused before any buffer is allocated.
  std::string huge = jpeg;
  const std::size_t sof = huge.find("\xff\xc0");
  ASSERT_NE(sof, std::string::npos);
  for (std::size_t at : {sof + 5, sof + 7}) {
    huge[at] = static_cast<char>(0xfd);
    huge[at + 1] = static_cast<char>(0xe8);
  }
  write_bytes(dir / "huge.jpg", huge);
  expect_throws_naming([&] { read_image((dir / "huge.jpg").string()); }, "huge.jpg",
                       "65000x65000 pixels (accepted: at most 2^26 pixels)");
}

TEST(ImageCodec, FitScalesTheShorterSideAndCropsTheCentre) {
  const Image square = gradient(12, 12, 3);
  EXPECT_EQ(fit_image(square, 12).pixels, square.pixels);  // already fitted: unchanged
  Image flat;
  flat.width = 90;
  flat.height = 30;
  flat.pixels.assign(3 * 90 * 30, 77);
  const Image small = fit_image(flat, 10);
  EXPECT_EQ(small.width, 10);
  EXPECT_EQ(small.height, 10);
  for (const std::uint8_t p : small.pixels) EXPECT_EQ(p, 77);
  // A horizontal ramp: the centre crop of the 3x shrunk image keeps the ramp's centre values.
  Image ramp;
  ramp.width = 90;
  ramp.height = 30;
  ramp.channels = 1;
  for (int y = 0; y < 30; ++y)
    for (int x = 0; x < 90; ++x) ramp.pixels.push_back(static_cast<std::uint8_t>(2 * x));
  const Image r = fit_image(ramp, 10);
  ASSERT_EQ(r.pixels.size(), 100u);
  for (int x = 0; x < 10; ++x)  // output column x of the 30 wide image is source x' = 3x + 1
    EXPECT_NEAR(r.pixels[static_cast<std::size_t>(5 * 10 + x)], 2 * (3 * (x + 10) + 1), 1.0) << x;
  // Upscaling interpolates linearly.
  const Image up = fit_image(gradient(4, 4, 1), 8);
  EXPECT_EQ(up.width, 8);
}

TEST(TinyImagenet, GeneratedSetHasThePublishedLayoutAndReadsBack) {
  const fs::path dir = scratch("tiny");
  write_generated_images(dir.string(), ImageLayout::TinyImagenet, 3, 4, 2, 64, 5);
  std::ifstream wnids(dir / "wnids.txt");
  std::vector<std::string> ids;
  for (std::string id; wnids >> id;) ids.push_back(id);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_TRUE(fs::exists(dir / "words.txt"));
  for (const std::string& id : ids)
    EXPECT_TRUE(fs::is_regular_file(dir / "train" / id / "images" / (id + "_0.JPEG"))) << id;
  std::ifstream annotations(dir / "val" / "val_annotations.txt");
  int lines = 0;
  for (std::string line; std::getline(annotations, line); ++lines) {
    std::vector<std::string> fields;
    std::stringstream s(line);
    for (std::string f; std::getline(s, f, '\t');) fields.push_back(f);
    ASSERT_EQ(fields.size(), 6u) << line;  // file, wnid, box
    EXPECT_TRUE(fs::is_regular_file(dir / "val" / "images" / fields[0])) << line;
    EXPECT_EQ(fields[1], ids[static_cast<std::size_t>(lines % 3)]) << line;
  }
  EXPECT_EQ(lines, 6);
  EXPECT_EQ(detect_format(dir.string()), FolderFormat::TinyImagenet);

  const ImageFiles train = index_images(dir.string(), ImageLayout::TinyImagenet, Split::Train);
  ASSERT_EQ(train.count(), 12);
  EXPECT_EQ(train.class_names, ids);
  for (std::int64_t i = 0; i < 12; ++i) {
    const auto k = static_cast<std::size_t>(train.labels[static_cast<std::size_t>(i)]);
    EXPECT_NE(train.paths[static_cast<std::size_t>(i)].find("/train/" + ids[k] + "/images/"),
              std::string::npos);
  }
  const ImageFiles val = index_images(dir.string(), ImageLayout::TinyImagenet, Split::Test);
  ASSERT_EQ(val.count(), 6);
  for (std::int64_t i = 0; i < 6; ++i) EXPECT_EQ(val.labels[static_cast<std::size_t>(i)], i % 3);
  // Every tenth training image was written greyscale: decoded, its channels are equal.
  const Image grey =
      read_image((dir / "train" / ids[0] / "images" / (ids[0] + "_3.JPEG")).string());
  EXPECT_EQ(grey.channels, 3);
  EXPECT_EQ(std::vector<std::uint8_t>(grey.pixels.begin(), grey.pixels.begin() + 4096),
            std::vector<std::uint8_t>(grey.pixels.begin() + 4096, grey.pixels.begin() + 8192));
  const ImageSet set = read_folder(dir.string(), Split::Train);
  EXPECT_EQ(set.count, 12);
  EXPECT_EQ(set.channels, 3);
  EXPECT_EQ(set.rows, 64);
  EXPECT_EQ(set.classes, 3);
  // A limit takes an evenly spaced subset: every class keeps its share.
  const ImageFiles some = index_images(dir.string(), ImageLayout::TinyImagenet, Split::Train, 6);
  EXPECT_EQ(std::set<std::int32_t>(some.labels.begin(), some.labels.end()).size(), 3u);
}

TEST(ImageFolder, GeneratedSetOfMixedFilesIsFittedAndSortedByClassName) {
  const fs::path dir = scratch("folder");
  write_generated_images(dir.string(), ImageLayout::Folder, 4, 3, 2, 24, 9);
  EXPECT_EQ(detect_format(dir.string()), FolderFormat::ImageFolder);
  EXPECT_TRUE(fs::is_regular_file(dir / "train" / "class_000" / "img_0.jpg"));
  EXPECT_TRUE(fs::is_regular_file(dir / "val" / "class_003" / "img_0.png") ||
              fs::is_regular_file(dir / "val" / "class_003" / "img_0.jpg"));
  FolderOptions o;
  o.image_side = 24;
  const ImageSet train = read_folder(dir.string(), Split::Train, o);
  EXPECT_EQ(train.count, 12);
  EXPECT_EQ(train.rows, 24);
  EXPECT_EQ(train.classes, 4);
  const ImageFiles files = index_images(dir.string(), ImageLayout::Folder, Split::Test);
  EXPECT_EQ(files.class_names,
            (std::vector<std::string>{"class_000", "class_001", "class_002", "class_003"}));
  EXPECT_EQ(files.count(), 8);
  // Images larger than the side in one direction were written; the reader fits them.
  const Image raw = read_image(files.paths[1]);
  EXPECT_TRUE(raw.width != 24 || raw.height != 24);
  EXPECT_EQ(read_image_file(files, 1, 24).size(), 3u * 24 * 24);
}

TEST(ImageFolder, BadLayoutsAreOneErrorNamingTheFileOrFolder) {
  const auto tiny = [](const std::string& name) {
    const fs::path dir = scratch(name);
    write_generated_images(dir.string(), ImageLayout::TinyImagenet, 2, 2, 1, 16, 1);
    return dir;
  };
  {  // no wnids.txt: read as tiny-imagenet anyway
    const fs::path d = tiny("nownids");
    fs::remove(d / "wnids.txt");
    expect_throws_naming([&] { index_images(d.string(), ImageLayout::TinyImagenet, Split::Train); },
                         "wnids.txt", "missing");
  }
  {  // a class without its training folder
    const fs::path d = tiny("noclass");
    std::ifstream in(d / "wnids.txt");
    std::string first;
    in >> first;
    fs::remove_all(d / "train" / first);
    expect_throws_naming([&] { index_images(d.string(), ImageLayout::TinyImagenet, Split::Train); },
                         first, "missing");
  }
  {  // an empty class folder
    const fs::path d = tiny("empty");
    std::ifstream in(d / "wnids.txt");
    std::string first;
    in >> first;
    for (const auto& e : fs::directory_iterator(d / "train" / first / "images"))
      fs::remove(e.path());
    expect_throws_naming([&] { index_images(d.string(), ImageLayout::TinyImagenet, Split::Train); },
                         first, "empty class folder");
  }
  {  // a validation image of a class wnids.txt lacks
    const fs::path d = tiny("valclass");
    std::ofstream(d / "val" / "val_annotations.txt", std::ios::app)
        << "val_0.JPEG\tn99999999\t0\t0\t1\t1\n";
    expect_throws_naming([&] { index_images(d.string(), ImageLayout::TinyImagenet, Split::Test); },
                         "val_annotations.txt", "n99999999 is not in wnids.txt");
  }
  {  // an annotated image that is missing
    const fs::path d = tiny("valfile");
    fs::remove(d / "val" / "images" / "val_0.JPEG");
    expect_throws_naming([&] { index_images(d.string(), ImageLayout::TinyImagenet, Split::Test); },
                         "val_0.JPEG", "missing");
  }
  {  // folder: a class in val that train lacks, no val at all
    const fs::path d = scratch("folderbad");
    write_generated_images(d.string(), ImageLayout::Folder, 2, 2, 1, 16, 1);
    fs::create_directories(d / "val" / "zebra");
    expect_throws_naming([&] { index_images(d.string(), ImageLayout::Folder, Split::Test); },
                         "zebra", "not among train's classes");
    fs::remove_all(d / "val");
    expect_throws_naming([&] { index_images(d.string(), ImageLayout::Folder, Split::Test); }, "val",
                         "missing");
  }
  {  // a truncated image is found when the set is indexed, and when decoded, naming the file
    const fs::path d = tiny("truncated");
    const ImageFiles files = index_images(d.string(), ImageLayout::TinyImagenet, Split::Train);
    const std::string bytes = read_bytes(files.paths[0]);
    write_bytes(files.paths[0], bytes.substr(0, bytes.size() / 3));
    expect_throws_naming([&] { read_image_file(files, 0, 16); }, files.paths[0], "JPEG");
    expect_throws_naming([&] { index_images(d.string(), ImageLayout::TinyImagenet, Split::Train); },
                         files.paths[0], "a JPEG cut short");
  }
}

}  // namespace
