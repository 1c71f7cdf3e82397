#pragma once
// Readers and writers of the binary distributions of CIFAR-10 and CIFAR-100
// (https://www.cs.toronto.edu/~kriz/cifar.html), as published:
//   cifar10   data_batch_1.bin .. data_batch_5.bin (training), test_batch.bin (test); each
//             record is 1 label byte (0..9) and 3072 pixel bytes
//   cifar100  train.bin, test.bin; each record is 1 coarse label byte (0..19), 1 fine label
//             byte (0..99) and 3072 pixel bytes
// The pixels of a record are 32x32 RGB, channel-major (1024 red, then green, then blue), each
// channel row-major: exactly ImageSet's [channels, rows, cols] layout. Files holding fewer
// records than the published 10000 / 50000 are read as they are. Every problem with a file
// throws weft::BadData naming the file and the problem. No LibTorch.
#include <cstdint>
#include <string>
#include <vector>

#include "weft/data/idx.hpp"

namespace weft::data {

enum class CifarVersion { Cifar10, Cifar100 };
/// CIFAR-100's two labels: the 100 fine classes or the 20 superclasses.
enum class CifarLabel { Fine, Coarse };

inline constexpr std::int64_t kCifarSide = 32;
inline constexpr std::int64_t kCifarChannels = 3;

/// "cifar10" / "cifar100".
std::string to_string(CifarVersion version);
/// The classes of a label: 10 (CIFAR-10), 100 fine or 20 coarse (CIFAR-100).
int cifar_classes(CifarVersion version, CifarLabel label);
/// Bytes per record: 3073 (CIFAR-10), 3074 (CIFAR-100).
std::int64_t cifar_record_bytes(CifarVersion version);

/// The file names of a split, in reading order.
std::vector<std::string> cifar_files(CifarVersion version, Split split);

/// Whether `dir` holds the first file of both splits of `version`.
bool holds_cifar(const std::string& dir, CifarVersion version);

struct CifarOptions {
  std::int64_t limit = -1;  ///< read only the first `limit` records (all when negative)
  CifarLabel label = CifarLabel::Fine;
};

/// Reads a split from `dir`: 3x32x32 images (channels 3) with labels. Throws weft::BadData
/// naming the file for a missing or unreadable file, a size that is not a whole number of
/// records, or a label out of range.
ImageSet read_cifar(const std::string& dir, CifarVersion version, Split split,
                    const CifarOptions& options = {});

/// Writes a split in the published layout: `set` holds 3x32x32 images with their labels (fine
/// labels for CIFAR-100, whose `coarse` labels come separately, one per image). CIFAR-10's
/// training records are spread over the five batch files in order (the first ones take the
/// remainder). Throws weft::InvalidOption for a set of another shape or mismatched counts,
/// weft::BadData naming the file when it cannot be written.
void write_cifar(const std::string& dir, CifarVersion version, Split split, const ImageSet& set,
                 const std::vector<std::uint8_t>& coarse = {});

/// A generated set in `version`'s published layout, written into `dir` (created if missing), so
/// that tests and new users can run the CIFAR paths offline. Class k is a coloured pattern
/// (orientation, frequency and colour of a stripe texture fixed per class) under random phase,
/// brightness and noise: learnable, not trivial. CIFAR-100's coarse label is fine / 5.
/// `classes` <= 10 (CIFAR-10) or <= 100 (CIFAR-100); labels cycle through them.
void write_generated_cifar(const std::string& dir, CifarVersion version,
                           std::int64_t train_per_class, std::int64_t test_per_class, int classes,
                           std::uint64_t seed);

}  // namespace weft::data
