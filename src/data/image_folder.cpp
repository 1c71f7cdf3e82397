// Image-file sets in the tiny-imagenet and ImageNet-folder layouts (weft/data/image_folder.hpp).
#include "weft/data/image_folder.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>
#include <utility>

#include "generated_patterns.hpp"
#include "weft/data/image_codec.hpp"
#include "weft/util/error.hpp"

namespace weft::data {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void bad(const std::string& what, const std::string& why) {
  throw BadData(what + ": " + why);
}

bool is_image_name(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

// The image files directly in `dir`, sorted by name. Throws when `dir` is missing or has none.
std::vector<std::string> images_in(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) bad(dir.string(), "missing (expected a folder of images)");
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_regular_file(ec) && is_image_name(entry.path()))
      files.push_back(entry.path().string());
  if (ec) bad(dir.string(), "cannot list it (" + ec.message() + ")");
  if (files.empty()) bad(dir.string(), "an empty class folder (no .jpg, .jpeg or .png files)");
  std::sort(files.begin(), files.end());
  return files;
}

// The folders directly in `dir`, sorted by name.
std::vector<std::string> folders_in(const fs::path& dir) {
  std::error_code ec;
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_directory(ec)) names.push_back(entry.path().filename().string());
  if (ec) bad(dir.string(), "cannot list it (" + ec.message() + ")");
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> wnids_of(const fs::path& dir) {
  const fs::path path = dir / "wnids.txt";
  std::ifstream in(path);
  if (!in) bad(path.string(), "missing (the class ids of a tiny-imagenet folder, one per line)");
  std::vector<std::string> wnids;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string id, extra;
    if (!(words >> id)) continue;  // blank lines
    if (words >> extra) bad(path.string(), "line '" + line + "' is not a single class id");
    if (std::find(wnids.begin(), wnids.end(), id) != wnids.end())
      bad(path.string(), "class id " + id + " is listed twice");
    wnids.push_back(id);
  }
  if (wnids.size() < 2) bad(path.string(), "lists fewer than 2 classes");
  std::sort(wnids.begin(), wnids.end());  // labels as torchvision's ImageFolder gives them
  return wnids;
}

ImageFiles index_tiny_imagenet(const fs::path& dir, Split split) {
  ImageFiles files;
  files.class_names = wnids_of(dir);
  std::map<std::string, std::int32_t> label_of;
  for (std::size_t k = 0; k < files.class_names.size(); ++k)
    label_of[files.class_names[k]] = static_cast<std::int32_t>(k);
  if (split == Split::Train) {
    for (std::size_t k = 0; k < files.class_names.size(); ++k)
      for (std::string& path : images_in(dir / "train" / files.class_names[k] / "images")) {
        files.paths.push_back(std::move(path));
        files.labels.push_back(static_cast<std::int32_t>(k));
      }
    return files;
  }
  const fs::path annotations = dir / "val" / "val_annotations.txt";
  std::ifstream in(annotations);
  if (!in)
    bad(annotations.string(), "missing (the validation images' classes: file, tab, class id)");
  std::string line;
  std::int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::istringstream fields(line);
    std::string file, id;
    if (!std::getline(fields, file, '\t') || !std::getline(fields, id, '\t') || file.empty())
      bad(annotations.string(),
          "line " + std::to_string(number) + " is not 'file<TAB>class id ...'");
    if (!id.empty() && id.back() == '\r') id.pop_back();
    const auto found = label_of.find(id);
    if (found == label_of.end())
      bad(annotations.string(), "line " + std::to_string(number) + ": class " + id +
                                    " is not in wnids.txt (a class in val that train lacks)");
    const fs::path image = dir / "val" / "images" / file;
    std::error_code ec;
    if (!fs::is_regular_file(image, ec))
      bad(annotations.string(),
          "line " + std::to_string(number) + ": " + image.string() + " is missing");
    files.paths.push_back(image.string());
    files.labels.push_back(found->second);
  }
  if (files.paths.empty()) bad(annotations.string(), "lists no images");
  return files;
}

ImageFiles index_folder(const fs::path& dir, Split split) {
  ImageFiles files;
  std::error_code ec;
  const fs::path train = dir / "train";
  if (!fs::is_directory(train, ec))
    bad(train.string(), "missing (expected train/<class>/ folders)");
  files.class_names = folders_in(train);
  if (files.class_names.size() < 2) bad(train.string(), "holds fewer than 2 class folders");
  fs::path root = train;
  if (split == Split::Test) {
    root = dir / "val";
    if (!fs::is_directory(root, ec)) root = dir / "test";
    if (!fs::is_directory(root, ec))
      bad((dir / "val").string(), "missing (expected val/<class>/ or test/<class>/ folders)");
    for (const std::string& name : folders_in(root))
      if (!std::binary_search(files.class_names.begin(), files.class_names.end(), name))
        bad((root / name).string(), "class " + name + " is not among train's classes");
  }
  for (std::size_t k = 0; k < files.class_names.size(); ++k) {
    const fs::path folder = root / files.class_names[k];
    if (split == Split::Test && !fs::is_directory(folder, ec)) continue;  // val may lack a class
    for (std::string& path : images_in(folder)) {
      files.paths.push_back(std::move(path));
      files.labels.push_back(static_cast<std::int32_t>(k));
    }
  }
  if (files.paths.empty()) bad(root.string(), "holds no images");
  return files;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.flush();
  if (!out) bad(path.string(), std::string("cannot write it (") + std::strerror(errno) + ")");
}

}  // namespace

std::string to_string(ImageLayout layout) {
  return layout == ImageLayout::TinyImagenet ? "tiny-imagenet" : "folder";
}

bool holds_layout(const std::string& dir, ImageLayout layout) {
  std::error_code ec;
  const fs::path root(dir);
  if (layout == ImageLayout::TinyImagenet) return fs::is_regular_file(root / "wnids.txt", ec);
  if (!fs::is_directory(root / "train", ec)) return false;
  for (const auto& entry : fs::directory_iterator(root / "train", ec))
    if (entry.is_directory(ec)) return true;
  return false;
}

ImageFiles index_images(const std::string& dir, ImageLayout layout, Split split,
                        std::int64_t limit) {
  ImageFiles all = layout == ImageLayout::TinyImagenet ? index_tiny_imagenet(dir, split)
                                                       : index_folder(dir, split);
  ImageFiles some;
  if (limit < 0 || limit >= all.count()) {
    some = std::move(all);
  } else {
    some.class_names = all.class_names;
    for (std::int64_t i = 0; i < limit; ++i) {  // evenly spaced: every class keeps its share
      const auto j = static_cast<std::size_t>(i * all.count() / limit);
      some.paths.push_back(all.paths[j]);
      some.labels.push_back(all.labels[j]);
    }
  }
  for (const std::string& path : some.paths) check_image_file_ends(path);
  return some;
}

std::vector<std::uint8_t> read_image_file(const ImageFiles& files, std::int64_t i,
                                          std::int64_t side) {
  const Image image = fit_image(read_image(files.paths.at(static_cast<std::size_t>(i))), side);
  return image.pixels;
}

ImageSet read_images(const ImageFiles& files, std::int64_t side) {
  if (files.classes() > 256)
    throw BadData("an image set of " + std::to_string(files.classes()) +
                  " classes cannot be held in memory as bytes (at most 256); stream it instead");
  ImageSet set;
  set.count = files.count();
  set.channels = 3;
  set.rows = set.cols = side;
  set.classes = files.classes();
  set.pixels.reserve(static_cast<std::size_t>(set.count * set.image_size()));
  for (std::int64_t i = 0; i < set.count; ++i) {
    const std::vector<std::uint8_t> pixels = read_image_file(files, i, side);
    set.pixels.insert(set.pixels.end(), pixels.begin(), pixels.end());
    set.labels.push_back(static_cast<std::uint8_t>(files.labels[static_cast<std::size_t>(i)]));
  }
  return set;
}

void write_generated_images(const std::string& dir, ImageLayout layout, int classes,
                            std::int64_t train_per_class, std::int64_t test_per_class,
                            std::int64_t side, std::uint64_t seed) {
  if (classes < 2 || classes > 1000)
    throw InvalidOption("write_generated_images", "classes",
                        std::to_string(classes) + " is invalid; accepted: 2..1000");
  if (train_per_class < 1 || test_per_class < 1)
    throw InvalidOption("write_generated_images", "per_class",
                        "must be at least 1 for both splits");
  if (side < 8 || side > 1024)
    throw InvalidOption("write_generated_images", "side",
                        std::to_string(side) + " is invalid; accepted: 8..1024");
  const fs::path root(dir);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) bad(dir, "cannot create it (" + ec.message() + ")");
  const bool tiny = layout == ImageLayout::TinyImagenet;
  std::vector<std::string> names;
  for (int k = 0; k < classes; ++k) {
    char name[32];
    if (tiny)
      std::snprintf(name, sizeof name, "n%08d", 1440764 + 7919 * k);  // wnid-like ids
    else
      std::snprintf(name, sizeof name, "class_%03d", k);
    names.emplace_back(name);
  }
  std::string wnids, words, annotations;
  for (int k = 0; k < classes; ++k) {
    wnids += names[static_cast<std::size_t>(k)] + "\n";
    words += names[static_cast<std::size_t>(k)] + "\tstripes " + std::to_string(k) + "\n";
  }
  for (const Split split : {Split::Train, Split::Test}) {
    Random random{seed * 0x2545f4914f6cdd1dULL + (split == Split::Train ? 11 : 12)};
    const std::int64_t per_class = split == Split::Train ? train_per_class : test_per_class;
    std::vector<std::uint8_t> square(static_cast<std::size_t>(3 * side * side));
    for (std::int64_t n = 0; n < per_class * classes; ++n) {
      const int k = static_cast<int>(n % classes);
      const std::string& name = names[static_cast<std::size_t>(k)];
      draw_stripes(k, side, random, square.data());
      Image image;
      image.width = image.height = side;
      image.pixels = square;
      if (!tiny) {  // a little larger in one direction: the reader fits it
        const std::int64_t extra =
            static_cast<std::int64_t>(random.uniform() * static_cast<double>(side) / 2);
        (n % 2 ? image.width : image.height) += extra;
        image.pixels.assign(static_cast<std::size_t>(3 * image.width * image.height), 0);
        for (std::int64_t c = 0; c < 3; ++c)
          for (std::int64_t y = 0; y < image.height; ++y)
            for (std::int64_t x = 0; x < image.width; ++x)
              image.pixels[static_cast<std::size_t>((c * image.height + y) * image.width + x)] =
                  square[static_cast<std::size_t>((c * side + y * side / image.height) * side +
                                                  x * side / image.width)];
      } else if (n % 10 == 9) {  // greyscale, as a few published images are
        Image grey;
        grey.width = grey.height = side;
        grey.channels = 1;
        grey.pixels.resize(static_cast<std::size_t>(side * side));
        for (std::int64_t i = 0; i < side * side; ++i)
          grey.pixels[static_cast<std::size_t>(i)] =
              static_cast<std::uint8_t>((square[static_cast<std::size_t>(i)] +
                                         square[static_cast<std::size_t>(side * side + i)] +
                                         square[static_cast<std::size_t>(2 * side * side + i)]) /
                                        3);
        image = grey;
      }
      const std::int64_t index = n / classes;
      fs::path folder, file;
      if (tiny && split == Split::Train) {
        folder = root / "train" / name / "images";
        file = name + "_" + std::to_string(index) + ".JPEG";
      } else if (tiny) {
        folder = root / "val" / "images";
        file = "val_" + std::to_string(n) + ".JPEG";
        annotations += file.string() + "\t" + name + "\t0\t0\t" + std::to_string(side - 1) + "\t" +
                       std::to_string(side - 1) + "\n";
      } else {
        folder = root / (split == Split::Train ? "train" : "val") / name;
        file = "img_" + std::to_string(index) + (n % 2 ? ".png" : ".jpg");
      }
      fs::create_directories(folder, ec);
      if (ec) bad(folder.string(), "cannot create it (" + ec.message() + ")");
      if (file.extension() == ".png")
        write_png((folder / file).string(), image);
      else
        write_jpeg((folder / file).string(), image, 90);
    }
  }
  if (tiny) {
    write_text(root / "wnids.txt", wnids);
    write_text(root / "words.txt", words);
    write_text(root / "val" / "val_annotations.txt", annotations);
  }
}

}  // namespace weft::data
