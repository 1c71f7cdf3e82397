// libFuzzer harness: loading a checkpoint whose part file (first byte even) or manifest (odd)
// is replaced by the input, into a small module with an Adam optimizer. Every problem must be a
// weft::Error (load_checkpoint's contract); nothing may crash.
//
// WEFT_FUZZ_WRITE_SEEDS=DIR writes the two seeds of a valid checkpoint to DIR and exits.
#include <mpi.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "weft/nn/checkpoint.hpp"
#include "weft/util/error.hpp"

namespace {

namespace fs = std::filesystem;

struct Fixture {
  fs::path dir = fs::temp_directory_path() / ("weft-fuzz-checkpoint-" + std::to_string(getpid()));
  torch::nn::Linear module{torch::nn::LinearOptions(3, 2)};
  std::unique_ptr<torch::optim::Adam> optimizer;
  std::string manifest, part, part_name;
};

Fixture* fixture = nullptr;

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write(const fs::path& path, const char* data, std::size_t size) {
  std::ofstream(path, std::ios::binary).write(data, static_cast<std::streamsize>(size));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  MPI_Init(argc, argv);
  fixture = new Fixture;
  Fixture& f = *fixture;
  f.optimizer = std::make_unique<torch::optim::Adam>(f.module->parameters());
  f.module->forward(torch::ones({1, 3})).sum().backward();
  f.optimizer->step();
  fs::remove_all(f.dir);
  weft::nn::save_checkpoint(f.dir.string(), MPI_COMM_SELF, *f.module, f.optimizer.get(),
                            R"({"epoch": 1})");
  f.manifest = slurp(f.dir / "manifest.json");
  f.part_name = nlohmann::json::parse(f.manifest).at("parts").at(0).at("file");
  f.part = slurp(f.dir / f.part_name);
  if (const char* seeds = std::getenv("WEFT_FUZZ_WRITE_SEEDS")) {
    fs::create_directories(seeds);
    write(fs::path(seeds) / "part", ("\x00" + f.part).data(), f.part.size() + 1);
    write(fs::path(seeds) / "manifest", ("\x01" + f.manifest).data(), f.manifest.size() + 1);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  Fixture& f = *fixture;
  const char* payload = reinterpret_cast<const char*>(data + 1);
  const bool manifest = data[0] & 1;
  write(f.dir / "manifest.json", manifest ? payload : f.manifest.data(),
        manifest ? size - 1 : f.manifest.size());
  write(f.dir / f.part_name, manifest ? f.part.data() : payload,
        manifest ? f.part.size() : size - 1);
  try {
    weft::nn::load_checkpoint(f.dir.string(), MPI_COMM_SELF, *f.module, f.optimizer.get());
  } catch (const weft::Error&) {
  }
  return 0;
}
