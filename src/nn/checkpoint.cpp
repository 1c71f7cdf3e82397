#include "weft/nn/checkpoint.hpp"

#include <torch/torch.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "weft/nn/optimizer_state.hpp"
#include "weft/util/error.hpp"
#include "weft/util/mpi.hpp"

namespace weft::nn {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
constexpr const char* kFormat = "weft-checkpoint-1";

// Parts carry the save number, so a save never overwrites a file the current manifest names.
std::string part_file(long long generation, int rank) {
  return "part-g" + std::to_string(generation) + "-r" + std::to_string(rank) + ".pt";
}

std::string state_key(const torch::Tensor& p) {
  return c10::guts::to_string(p.unsafeGetTensorImpl());
}

// Every named tensor of the module: parameters and buffers.
std::map<std::string, torch::Tensor> named_tensors(torch::nn::Module& module) {
  std::map<std::string, torch::Tensor> out;
  for (auto& item : module.named_parameters()) out[item.key()] = item.value();
  for (auto& item : module.named_buffers()) out[item.key()] = item.value();
  return out;
}

void require_supported(const torch::optim::Optimizer& optimizer) {
  if (!dynamic_cast<const torch::optim::SGD*>(&optimizer) &&
      !dynamic_cast<const torch::optim::Adam*>(&optimizer))
    throw InvalidOption(
        "checkpoint: only torch::optim::SGD and torch::optim::Adam state can be "
        "saved");
}

// The first line of a LibTorch message (its stack trace stays out of ours).
std::string torch_message(const c10::Error& e) {
  std::string text = e.what_without_backtrace();
  const auto newline = text.find('\n');
  return newline == std::string::npos ? text : text.substr(0, newline);
}

// Runs `body` on every rank; if it throws anywhere, every rank throws the same
// weft::CollectiveError (weft::mpi::agree_or_throw): no rank is left waiting in a later
// collective, and the job can end with one line.
template <class Body>
void collectively(MPI_Comm comm, const std::string& what, Body body) {
  std::exception_ptr error;
  try {
    body();
  } catch (const InvalidOption& e) {
    error = std::make_exception_ptr(InvalidOption(what + ": " + e.what()));
  } catch (const c10::Error& e) {
    error = std::make_exception_ptr(BadData(what + ": " + torch_message(e)));
  } catch (const std::exception& e) {
    error = std::make_exception_ptr(BadData(what + ": " + e.what()));
  }
  mpi::agree_or_throw(comm, error);
}

// Makes a written file durable before the manifest names it.
void sync_file(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw BadData("cannot reopen " + path.string() + ": " + std::strerror(errno));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw BadData("cannot sync " + path.string() + ": " + std::strerror(errno));
}

// Writes `text` (or a LibTorch archive) to `path`, checking every step: a full disk or a
// failing device is an error here, not a short file found by the next load.
template <class Write>
void write_checked(const fs::path& path, Write write) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw BadData("cannot create " + path.string() + ": " + std::strerror(errno));
    write(out);
    out.flush();
    if (!out) throw BadData("cannot write " + path.string() + ": " + std::strerror(errno));
    out.close();
    if (out.fail()) throw BadData("cannot close " + path.string() + ": " + std::strerror(errno));
  }
  sync_file(path);
}

// The save number of the checkpoint in `dir` (0 when there is none or it cannot be read).
long long current_generation(const std::string& dir) {
  std::ifstream in(fs::path(dir) / "manifest.json");
  if (!in) return 0;
  try {
    return json::parse(in).value("generation", 0LL);
  } catch (const json::exception&) {
    return 0;
  }
}

json read_manifest(const std::string& dir) {
  const fs::path path = fs::path(dir) / "manifest.json";
  if (!fs::is_directory(dir)) throw BadData("checkpoint " + dir + " is not a folder");
  std::ifstream in(path);
  if (!in) throw BadData("checkpoint " + dir + ": missing file " + path.string());
  try {
    json m = json::parse(in);
    if (!m.is_object() || m.value("format", "") != kFormat)
      throw BadData("checkpoint " + dir + ": " + path.string() +
                    " has an unknown format (expected " + kFormat + ")");
    if (!m.contains("parts") || !m.at("parts").is_array())
      throw BadData("checkpoint " + dir + ": " + path.string() + " lists no parts");
    return m;
  } catch (const json::exception& e) {
    throw BadData("checkpoint " + dir + ": " + path.string() + " is not valid: " + e.what());
  }
}

}  // namespace

std::map<std::string, torch::Tensor> optimizer_fields(const torch::optim::Optimizer& optimizer,
                                                      const torch::Tensor& param) {
  std::map<std::string, torch::Tensor> fields;
  const auto& state = optimizer.state();
  const auto it = state.find(state_key(param));
  if (it == state.end()) return fields;
  if (const auto* s = dynamic_cast<const torch::optim::SGDParamState*>(it->second.get())) {
    if (s->momentum_buffer().defined()) fields["momentum_buffer"] = s->momentum_buffer();
  } else if (const auto* a = dynamic_cast<const torch::optim::AdamParamState*>(it->second.get())) {
    fields["step"] = torch::tensor(a->step(), torch::kInt64);
    fields["exp_avg"] = a->exp_avg();
    fields["exp_avg_sq"] = a->exp_avg_sq();
    if (a->max_exp_avg_sq().defined()) fields["max_exp_avg_sq"] = a->max_exp_avg_sq();
  }
  return fields;
}

void set_optimizer_fields(torch::optim::Optimizer& optimizer, const torch::Tensor& param,
                          const std::map<std::string, torch::Tensor>& fields) {
  auto& state = optimizer.state();
  if (dynamic_cast<torch::optim::SGD*>(&optimizer)) {
    if (!fields.count("momentum_buffer")) return;
    auto s = std::make_unique<torch::optim::SGDParamState>();
    s->momentum_buffer(fields.at("momentum_buffer"));
    state[state_key(param)] = std::move(s);
    return;
  }
  if (!fields.count("step") || !fields.count("exp_avg") || !fields.count("exp_avg_sq")) return;
  auto s = std::make_unique<torch::optim::AdamParamState>();
  s->step(fields.at("step").item<std::int64_t>());
  s->exp_avg(fields.at("exp_avg"));
  s->exp_avg_sq(fields.at("exp_avg_sq"));
  if (fields.count("max_exp_avg_sq")) s->max_exp_avg_sq(fields.at("max_exp_avg_sq"));
  state[state_key(param)] = std::move(s);
}

void save_checkpoint(const std::string& dir, MPI_Comm comm, torch::nn::Module& module,
                     const torch::optim::Optimizer* optimizer, const std::string& metadata_json) {
  const int rank = mpi::rank(comm), ranks = mpi::size(comm);
  json metadata;
  try {
    metadata = json::parse(metadata_json.empty() ? "{}" : metadata_json);
  } catch (const json::exception& e) {
    throw InvalidOption(std::string("checkpoint metadata is not JSON: ") + e.what());
  }
  if (optimizer) require_supported(*optimizer);
  const std::string failed = "saving checkpoint " + dir +
                             " failed (the checkpoint saved there before, if any, is unchanged)";
  // Every rank writes its part under the next save number, beside the current checkpoint.
  long long generation = 0;
  collectively(comm, failed, [&]() {
    fs::create_directories(dir);
    if (rank == 0) generation = current_generation(dir) + 1;
  });
  mpi::check(MPI_Bcast(&generation, 1, MPI_LONG_LONG, 0, comm), "MPI_Bcast (checkpoint)");
  json keys = json::array();
  collectively(comm, failed, [&]() {
    torch::serialize::OutputArchive archive;
    torch::NoGradGuard no_grad;
    for (auto& [name, tensor] : named_tensors(module)) {
      archive.write("model/" + name, tensor.detach().cpu());
      keys.push_back(name);
      if (!optimizer) continue;
      for (auto& [field, value] : optimizer_fields(*optimizer, tensor))
        archive.write("optim/" + name + "/" + field, value.detach().cpu());
    }
    write_checked(fs::path(dir) / part_file(generation, rank),
                  [&](std::ostream& out) { archive.save_to(out); });
  });
  const std::vector<std::string> all_keys =
      mpi::all_gather_bytes(comm, keys.dump(), "MPI_Allgatherv (checkpoint keys)");
  // One rename switches the folder from the old checkpoint to the new one.
  std::vector<std::string> files;
  for (int r = 0; r < ranks; ++r) files.push_back(part_file(generation, r));
  collectively(comm, failed, [&]() {
    if (rank != 0) return;
    json manifest = {
        {"format", kFormat}, {"generation", generation}, {"ranks", ranks}, {"metadata", metadata}};
    json parts = json::array();
    for (int r = 0; r < ranks; ++r)
      parts.push_back({{"file", files[static_cast<size_t>(r)]},
                       {"keys", json::parse(all_keys[static_cast<size_t>(r)])}});
    manifest["parts"] = parts;
    const fs::path tmp = fs::path(dir) / "manifest.json.tmp";
    write_checked(tmp, [&](std::ostream& out) { out << manifest.dump(1) << "\n"; });
    fs::rename(tmp, fs::path(dir) / "manifest.json");
    sync_file(dir);
  });
  // The old parts are garbage now; removing them is tidying, not part of the save.
  if (rank == 0) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      const bool part = name.rfind("part-", 0) == 0 && entry.path().extension() == ".pt";
      if (part && std::find(files.begin(), files.end(), name) == files.end())
        fs::remove(entry.path(), ec);
    }
  }
}

std::string load_checkpoint(const std::string& dir, MPI_Comm comm, torch::nn::Module& module,
                            torch::optim::Optimizer* optimizer) {
  return load_checkpoint(dir, comm, module, optimizer, KeySources());
}

std::string load_checkpoint(const std::string& dir, MPI_Comm comm, torch::nn::Module& module,
                            torch::optim::Optimizer* optimizer, const KeySources& sources) {
  std::string metadata;
  if (optimizer) require_supported(*optimizer);
  collectively(comm, "loading checkpoint " + dir, [&]() {
    const json manifest = read_manifest(dir);
    metadata = manifest.value("metadata", json::object()).dump();
    // Each tensor of the module is the weighted sum of its sources (itself without `sources`);
    // integer tensors (batch norm's batch count) and Adam's step take their heaviest source.
    struct Target {
      torch::Tensor tensor;
      std::size_t sources = 0, loaded = 0;
      double heaviest = -1;
      std::map<std::string, torch::Tensor> fields;  ///< optimizer state, accumulated
      std::map<std::string, std::size_t> field_sources;
    };
    std::map<std::string, Target> targets;
    std::map<std::string, std::vector<std::pair<std::string, double>>> needed;  // stored -> uses
    for (auto& [name, tensor] : named_tensors(module)) {
      Target& t = targets[name];
      t.tensor = tensor;
      const auto from =
          sources ? sources(name) : std::vector<std::pair<std::string, double>>{{name, 1.0}};
      t.sources = from.size();
      for (const auto& [key, weight] : from) needed[key].emplace_back(name, weight);
    }
    torch::NoGradGuard no_grad;
    for (auto& [name, t] : targets)
      if (t.tensor.is_floating_point()) t.tensor.zero_();
    for (const auto& part : manifest.at("parts")) {
      bool relevant = false;
      for (const auto& key : part.at("keys")) relevant = relevant || needed.count(key) > 0;
      if (!relevant) continue;
      const std::string file = (fs::path(dir) / part.at("file").get<std::string>()).string();
      if (!fs::exists(file)) throw BadData("missing file " + file);
      torch::serialize::InputArchive archive;
      try {
        archive.load_from(file);
      } catch (const c10::Error& e) {
        throw BadData("part file " + file + " cannot be read: " + torch_message(e));
      }
      try {
        for (const auto& key_json : part.at("keys")) {
          const std::string key = key_json.get<std::string>();
          auto it = needed.find(key);
          if (it == needed.end()) continue;
          torch::Tensor stored;
          archive.read("model/" + key, stored);
          std::map<std::string, torch::Tensor> stored_fields;
          if (optimizer)
            for (const char* field : kOptimizerFields) {
              torch::Tensor f;
              if (archive.try_read("optim/" + key + "/" + field, f)) stored_fields[field] = f;
            }
          for (const auto& [name, weight] : it->second) {
            Target& t = targets.at(name);
            if (stored.sizes() != t.tensor.sizes())
              throw BadData("part file " + file + ": '" + key + "' has shape " +
                            c10::str(stored.sizes()) + ", the model expects " +
                            c10::str(t.tensor.sizes()) +
                            (key == name ? std::string() : " for '" + name + "'"));
            const bool heaviest = weight > t.heaviest;
            if (t.tensor.is_floating_point())
              t.tensor.add_(stored.to(t.tensor.device(), t.tensor.scalar_type()), weight);
            else if (heaviest)
              t.tensor.copy_(stored);
            for (const auto& [field, value] : stored_fields) {
              torch::Tensor& acc = t.fields[field];
              const torch::Tensor v = value.to(t.tensor.device());
              if (field == "step")
                acc = acc.defined() && !heaviest ? acc : v;
              else
                acc = acc.defined() ? acc.add(v, weight) : v.mul(weight);
              ++t.field_sources[field];
            }
            if (heaviest) t.heaviest = weight;
            ++t.loaded;
          }
        }
      } catch (const c10::Error& e) {
        throw BadData("part file " + file + ": " + torch_message(e));
      }
    }
    for (const auto& [key, uses] : needed)
      for (const auto& [name, weight] : uses)
        if (targets.at(name).loaded < targets.at(name).sources)
          throw BadData("no value for '" + key + "'" +
                        (key == name ? std::string() : " (for '" + name + "')") +
                        " (a checkpoint of a different network?)");
    if (!optimizer) return;
    for (auto& entry : targets) {
      Target& t = entry.second;  // a plain reference: C++17 lambdas cannot capture bindings
      std::map<std::string, torch::Tensor> complete;
      for (const auto& [field, value] : t.fields)
        if (t.field_sources.at(field) == t.sources) complete[field] = value;
      set_optimizer_fields(*optimizer, t.tensor, complete);
    }
  });
  return metadata;
}

std::string read_checkpoint_metadata(const std::string& dir) {
  return read_manifest(dir).value("metadata", json::object()).dump();
}

}  // namespace weft::nn
