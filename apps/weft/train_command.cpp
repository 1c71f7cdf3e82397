#include "train_command.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "programs.hpp"
#include "spatial_flags.hpp"
#include "training.hpp"
#include "weft/train/model_registry.hpp"
#include "weft/util/error.hpp"

namespace weft::cli {
namespace {

// Flags are taken as text and converted strictly (cli_support), so that each bad value gets
// one message of the same form. The defaults train Fashion-MNIST to >= 85 % test accuracy in
// a few minutes at 2 ranks on 2 cores (README).
struct TrainDefaults {
  static constexpr const char* data = "/usr/share/datasets/fashion-mnist";
  static constexpr const char* channels = "4";
  static constexpr const char* steps = "8";
  static constexpr const char* T = "1";
  static constexpr const char* open = "conv";
  static constexpr const char* batch = "50";
  static constexpr const char* optimizer = "adam";
  static constexpr const char* momentum = "0.9";
  static constexpr const char* seed = "1";
  static constexpr const char* nrelax = "0";
  static constexpr const char* tol = "0";
  static constexpr const char* model = "resnet";
  static constexpr const char* stage_channels = "8,16,32";
  static constexpr const char* stage_steps = "2,2,2";
  static constexpr const char* batchnorm = "1";
  static constexpr const char* dropout = "0";
  static constexpr const char* data_ranks = "1";
  static constexpr const char* hidden = "64";
  static constexpr const char* rnn_layers = "1";
  static constexpr const char* sequence = "rows";
  static constexpr const char* coarse_input = "start";
  static constexpr const char* implicit_step = "0";
  static constexpr const char* implicit_iterations = "3";
  // gru/lstm: the per-batch cost is mostly per step, so larger batches train faster
  static constexpr const char* rnn_batch = "100";
};

// Defaults that depend on the model: its recipe (train::ModelKind::recipe) as flag text. Every
// value is a flag default only: given flags win.
struct Recipe {
  std::string levels, cf, fwd_iters, bwd_iters, epochs, lr, lr_schedule, fwd_skip, bwd_skip;
  std::string fwd_iters_skipping;  // the forward's iterations where it skips
};

// A recipe as flag text.
Recipe as_text(const train::ModelKind::Recipe& r) {
  return {std::to_string(r.levels),
          std::to_string(r.cfactor),
          std::to_string(r.forward_iterations),
          std::to_string(r.backward_iterations),
          std::to_string(r.epochs),
          fmt::format("{}", r.lr),
          r.lr_schedule,
          r.forward_skip ? "1" : "0",
          r.backward_skip ? "1" : "0",
          std::to_string(r.forward_iterations_skipping)};
}

// `model` may be any text (it is checked later): an unknown one gets the default model's.
Recipe recipe_of(const std::string& model) {
  const auto& kinds = train::model_kinds();
  const bool known = std::any_of(kinds.begin(), kinds.end(),
                                 [&](const train::ModelKind& k) { return k.name == model; });
  return as_text(train::model_kind(known ? model : TrainDefaults::model).recipe);
}

constexpr long long kMaxSteps = 1000000;

// --data-format: "" (recognised by the folder's files) or a reader's name.
std::string data_format_of(const std::string& text) {
  if (text.empty()) return text;
  const std::vector<std::string> names = {"idx",      "idx-volumes",   "cifar10",
                                          "cifar100", "tiny-imagenet", "folder"};
  return names[parse_choice("--data-format", text, names)];
}

// --normalize: measured | none | MEAN,STD | M1..MC,S1..SC (an even count, stds > 0).
std::vector<double> normalize_values_of(const std::string& text) {
  const std::string accepted =
      "measured, none, MEAN,STD or per channel M1,...,MC,S1,...,SC (standard deviations > 0)";
  if (text == "measured" || text == "none") return {};
  std::vector<double> values;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    try {
      values.push_back(parse_number("--normalize", item, accepted));
    } catch (const InvalidOption&) {
      invalid_value("--normalize", text, accepted, "item '" + item + "'");
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (values.size() < 2 || values.size() % 2 != 0)
    invalid_value("--normalize", text, accepted, "an odd count of values");
  for (std::size_t i = values.size() / 2; i < values.size(); ++i)
    if (!(values[i] > 0)) invalid_value("--normalize", text, accepted);
  return values;
}

std::string label_of(const std::string& text) {
  const std::vector<std::string> labels = {"fine", "coarse"};
  return labels[parse_choice("--label", text, labels)];
}

// 0 = one thread per core shared among the ranks (the default).
long long parse_threads(const std::string& text) {
  return parse_integer("--threads", text, 0, "0 (cores / ranks) or an integer in [1, 1024]", 1024);
}

struct Flags {
  std::map<std::string, std::string> text;
  std::map<std::string, CLI::Option*> options;
  bool serial = false;
  bool no_progress = false;
  bool warm_start = false;
  bool exact = false;
  bool check_images = false;
  std::string get(const std::string& flag, const std::string& fallback) const {
    const auto it = options.find(flag);  // flags `weft predict` does not register: defaults
    return it != options.end() && it->second->count() > 0 ? text.at(flag) : fallback;
  }
  void add(CLI::App& cmd, const char* name, const char* type, const std::string& help) {
    options[name] = cmd.add_option(name, text[name], help)->type_name(type);
  }
};

// One direction's MGRIT options from --fwd-* or --bwd-*.
mgrit::Options solver_options(const Flags& f, const std::string& dir, const Recipe& recipe) {
  using D = TrainDefaults;
  const std::string p = "--" + dir + "-";
  const int levels = static_cast<int>(parse_integer(
      p + "levels", f.get(p + "levels", f.exact ? "1" : recipe.levels), 1, "an integer >= 1"));
  if (f.exact && levels > 1)
    invalid_value(p + "levels", f.get(p + "levels", ""), "1 with --exact",
                  "--exact means one level in both directions");
  const std::string skip = f.get(p + "skip", dir == "fwd" ? recipe.fwd_skip : recipe.bwd_skip);
  const bool skips = parse_switch(p + "skip", skip);
  const std::string default_iters =
      dir == "fwd" ? (skips ? recipe.fwd_iters_skipping : recipe.fwd_iters) : recipe.bwd_iters;
  // auto: chosen by the training (resolve_train), starting from the default count.
  const std::string iters_text = f.get(p + "iters", default_iters);
  const int iters =
      static_cast<int>(parse_integer(p + "iters", iters_text == "auto" ? default_iters : iters_text,
                                     1, "an integer >= 1 or auto"));
  const double tol = parse_number(p + "tol", f.get(p + "tol", D::tol), "a number >= 0");
  if (tol < 0) invalid_value(p + "tol", f.get(p + "tol", D::tol), "a number >= 0");
  mgrit::Options o;
  o.max_levels(levels).max_iterations(iters).abs_tol(tol);
  const std::string per_level = "integers, one per level (at most --" + dir + "-levels)";
  const auto cfs = parse_int_list(p + "cf", f.get(p + "cf", recipe.cf), 2, "integers >= 2");
  const auto nrelax =
      parse_int_list(p + "nrelax", f.get(p + "nrelax", D::nrelax), 0, "integers >= 0");
  if (static_cast<int>(cfs.size()) > std::max(1, levels - 1))
    invalid_value(p + "cf", f.get(p + "cf", recipe.cf), per_level, "more values than levels");
  if (static_cast<int>(nrelax.size()) > levels)
    invalid_value(p + "nrelax", f.get(p + "nrelax", D::nrelax), per_level,
                  "more values than levels");
  o.cfactor(cfs.back());
  for (size_t l = 0; l < cfs.size(); ++l) o.cfactor(cfs[l], static_cast<int>(l));
  // One value: the fine level; coarse levels relax with FCF (the TorchBraid-style default).
  o.nrelax(1);
  for (size_t l = 0; l < nrelax.size(); ++l) o.nrelax(nrelax[l], static_cast<int>(l));
  o.initial_phase(skips ? mgrit::InitialPhase::Skip : mgrit::InitialPhase::None);
  o.warm_start(f.warm_start);
  return o;
}

// A flag given for a field the model does not have: "used with --model A or B only".
void refuse_foreign_flags(const Flags& f, const train::ModelKind& kind,
                          const std::vector<std::pair<const char*, const char*>>& flag_fields) {
  for (const auto& [flag, field] : flag_fields) {
    if (kind.has_field(field) || f.options.at(flag)->count() == 0) continue;
    std::string models;
    for (const std::string& name : train::model_kinds_with(field))
      models += (models.empty() ? "" : " or ") + name;
    // A staged model given resnet's --channels/--steps/--open: name what it takes instead.
    const bool resnet_only = train::model_kinds_with(field) == std::vector<std::string>{"resnet"};
    invalid_value(flag, f.text.at(flag), "used with --model " + models + " only",
                  kind.staged() && resnet_only
                      ? "--model " + kind.name + " takes --stage-channels and --stage-steps"
                      : "");
  }
}

// --fwd-iters auto / --bwd-iters auto and the controller's --auto-* settings.
void resolve_iteration_control(const Flags& f, TrainConfig& c) {
  for (const bool forward : {true, false}) {
    const std::string flag = forward ? "--fwd-iters" : "--bwd-iters";
    if (f.get(flag, "") != "auto") continue;
    (forward ? c.iterations.forward : c.iterations.backward) = true;
    if (f.serial)
      invalid_value(flag, "auto", "an integer >= 1 with --serial", "--serial trains without MGRIT");
    const int levels = (forward ? c.parallel.forward() : c.parallel.backward()).max_levels();
    if (levels < 2)
      invalid_value(flag, "auto",
                    "an integer >= 1 in exact mode (" + std::string(forward ? "--fwd" : "--bwd") +
                        "-levels 1)",
                    "one level solves exactly: there are no iterations to choose");
  }
  const char* settings[] = {"--auto-tol", "--auto-fwd-tol",    "--auto-check",      "--auto-max",
                            "--auto-min", "--auto-half-steps", "--auto-diagnostics"};
  if (!c.iterations.active()) {
    for (const char* flag : settings)
      if (!f.get(flag, "").empty())
        invalid_value(flag, f.get(flag, ""),
                      "a value used with --fwd-iters auto or --bwd-iters auto");
    return;
  }
  const std::string tol = f.get("--auto-tol", "0.3");
  c.iterations.gradient_tolerance = parse_number("--auto-tol", tol, "a number in (0, 1)");
  if (!(c.iterations.gradient_tolerance > 0 && c.iterations.gradient_tolerance < 1))
    invalid_value("--auto-tol", tol, "a number in (0, 1)");
  const std::string forward_tol = f.get("--auto-fwd-tol", "0.1");
  c.iterations.forward_tolerance =
      parse_number("--auto-fwd-tol", forward_tol, "a number in (0, 1)");
  if (!(c.iterations.forward_tolerance > 0 && c.iterations.forward_tolerance < 1))
    invalid_value("--auto-fwd-tol", forward_tol, "a number in (0, 1)");
  c.iterations.check_every = static_cast<int>(parse_integer(
      "--auto-check", f.get("--auto-check", "50"), 1, "an integer in [1, 1000000]", 1000000));
  c.iterations.max_iterations = static_cast<int>(
      parse_integer("--auto-max", f.get("--auto-max", "8"), 1, "an integer in [1, 100]", 100));
  c.iterations.min_iterations = static_cast<int>(
      parse_integer("--auto-min", f.get("--auto-min", "1"), 1, "an integer in [1, 100]", 100));
  if (c.iterations.min_iterations > c.iterations.max_iterations)
    invalid_value("--auto-min", std::to_string(c.iterations.min_iterations),
                  "an integer <= --auto-max " + std::to_string(c.iterations.max_iterations));
  // Half steps by default where a solve skips; asked for, a skipping solve is required.
  const std::string half_steps = f.get("--auto-half-steps", "");
  c.iterations.half_steps = half_steps.empty() || parse_switch("--auto-half-steps", half_steps);
  c.iterations.diagnostics = parse_switch("--auto-diagnostics", f.get("--auto-diagnostics", "0"));
  // Half steps lie between k iterations with and without skip: without a skipping automatic
  // solve the flag would do nothing.
  if (!half_steps.empty() && c.iterations.half_steps &&
      !train::uses_half_steps(c.iterations, c.parallel.forward(), c.parallel.backward()))
    invalid_value("--auto-half-steps", "1", "0 when no automatic solve skips",
                  "half steps lie between k iterations with and without --fwd-skip/--bwd-skip");
  for (const bool forward : {true, false}) {
    const int start = (forward ? c.parallel.forward() : c.parallel.backward()).max_iterations();
    if ((forward ? c.iterations.forward : c.iterations.backward) &&
        start > c.iterations.max_iterations)
      invalid_value("--auto-max", std::to_string(c.iterations.max_iterations),
                    "an integer >= the starting iterations " + std::to_string(start));
  }
}

// --mgopt LEVELS and its settings (MG/Opt over depth, weft/train/mgopt.hpp).
void resolve_mgopt(const Flags& f, TrainConfig& c) {
  const char* settings[] = {"--mgopt-factor", "--mgopt-relax", "--mgopt-restriction",
                            "--mgopt-interpolation", "--mgopt-line-search"};
  const std::string levels = f.get("--mgopt", "");
  if (levels.empty()) {
    for (const char* flag : settings)
      if (!f.get(flag, "").empty())
        invalid_value(flag, f.get(flag, ""), "a value used with --mgopt LEVELS (none given)");
    return;
  }
  train::MGOpt& m = c.mgopt;
  m.levels = static_cast<int>(
      parse_integer("--mgopt", levels, 0, "an integer in [0, 16]: the depth levels (0: off)", 16));
  if (m.levels == 0) {  // off: with --resume, no MG/Opt where the checkpoint had it
    for (const char* flag : settings)
      if (!f.get(flag, "").empty())
        invalid_value(flag, f.get(flag, ""), "a value used with --mgopt LEVELS >= 1 (0 given)");
    return;
  }
  m.factor = static_cast<int>(parse_integer("--mgopt-factor", f.get("--mgopt-factor", "2"), 2,
                                            "an integer in [2, 64]", 64));
  if (!f.get("--mgopt-relax", "").empty()) {
    const std::string text = f.get("--mgopt-relax", "");
    const std::string accepted = "PRE,POST,COARSE: optimizer steps >= 0, >= 0, >= 1";
    const std::vector<int> relax = parse_int_list("--mgopt-relax", text, 0, accepted);
    if (relax.size() != 3 || relax[2] < 1) invalid_value("--mgopt-relax", text, accepted);
    m.pre = relax[0];
    m.post = relax[1];
    m.coarse = relax[2];
  }
  const std::vector<std::string> restrictions = {"injection", "averaging"};
  if (!f.get("--mgopt-restriction", "").empty())
    m.restriction = nn::depth_restriction_from(
        restrictions[parse_choice("--mgopt-restriction", f.get("--mgopt-restriction", ""),
                                  restrictions)],
        "weft train");
  const std::vector<std::string> interpolations = {"constant", "linear"};
  if (!f.get("--mgopt-interpolation", "").empty())
    m.interpolation = nn::depth_interpolation_from(
        interpolations[parse_choice("--mgopt-interpolation", f.get("--mgopt-interpolation", ""),
                                    interpolations)],
        "weft train");
  m.line_search = static_cast<int>(parse_integer(
      "--mgopt-line-search", f.get("--mgopt-line-search", "4"), 0, "an integer in [0, 30]", 30));
  if (c.growth.active())
    invalid_value("--mgopt", levels, "no --mgopt with --grow-depth",
                  "MG/Opt trains every depth at once; nested iteration one after the other");
  if (c.iterations.active())
    invalid_value("--mgopt", levels, "no --mgopt with --fwd-iters/--bwd-iters auto",
                  "MG/Opt runs with fixed MGRIT iteration counts");
}

TrainConfig resolve_train(const Flags& f) {
  using D = TrainDefaults;
  TrainConfig c;
  c.data_dir = f.get("--data", D::data);
  c.data_format = data_format_of(f.get("--data-format", ""));
  c.label = label_of(f.get("--label", "fine"));
  const std::vector<std::string> augments = {"auto", "none", "crop-flip"};
  c.augment = augments[parse_choice("--augment", f.get("--augment", "auto"), augments)];
  c.crop_padding =
      parse_integer("--crop-padding", f.get("--crop-padding", "4"), 0, "an integer in [0, 64]", 64);
  c.image_size = f.get("--image-size", "").empty()
                     ? 0
                     : parse_integer("--image-size", f.get("--image-size", ""), 8,
                                     "an integer in [8, 1024]", 1024);
  c.normalize = f.get("--normalize", "measured");
  c.normalize_values = normalize_values_of(c.normalize);
  if (!f.get("--normalize", "").empty() && !f.get("--resume", "").empty())
    invalid_value("--normalize", c.normalize, "no --normalize with --resume",
                  "the checkpoint's normalization is used");
  c.model.channels = static_cast<int>(parse_integer("--channels", f.get("--channels", D::channels),
                                                    1, "an integer in [1, 65536]", 65536));
  // Bounds far beyond any meaningful network; the memory estimate (training.cpp) does the rest.
  c.model.steps = parse_integer("--steps", f.get("--steps", D::steps), 1,
                                "an integer in [1, 1000000]", kMaxSteps);
  c.model.t_final = parse_number("--T", f.get("--T", D::T), "a number > 0");
  if (!(c.model.t_final > 0)) invalid_value("--T", f.get("--T", D::T), "a number > 0");
  const std::vector<std::string> kinds = train::model_kind_names();
  c.model.kind = kinds[parse_choice("--model", f.get("--model", D::model), kinds)];
  // --preset tiny-imagenet: TorchBraid's Tiny-ImageNet network as the defaults of the stages flags.
  const std::vector<std::string> presets = {"none", "tiny-imagenet"};
  const std::string preset = presets[parse_choice("--preset", f.get("--preset", "none"), presets)];
  if (preset != "none" && c.model.kind != "stages")
    invalid_value("--preset", preset, "none, or tiny-imagenet with --model stages",
                  "--model is " + c.model.kind);
  const train::ModelConfig tiny = train::tiny_imagenet_stages();
  auto list_text = [](const std::vector<std::int64_t>& v) {
    std::string text;
    for (std::int64_t x : v) text += (text.empty() ? "" : ",") + std::to_string(x);
    return text;
  };
  const bool preset_on = preset == "tiny-imagenet";
  const std::string channels_default =
      preset_on ? list_text(tiny.stage_channels) : D::stage_channels;
  const std::string steps_default = preset_on ? list_text(tiny.stage_steps) : D::stage_steps;
  const auto stage_channels = parse_int_list(
      "--stage-channels", f.get("--stage-channels", channels_default), 1, "integers >= 1");
  const auto stage_steps =
      parse_int_list("--stage-steps", f.get("--stage-steps", steps_default), 1, "integers >= 1");
  const std::vector<std::string> stems = {"conv", "imagenet"};
  c.model.stem =
      stems[parse_choice("--stem", f.get("--stem", preset_on ? tiny.stem : "conv"), stems)];
  if (c.model.stem == "imagenet" && c.model.kind != "stages")
    invalid_value("--stem", c.model.stem, "conv, or imagenet with --model stages",
                  "--model is " + c.model.kind);
  if (stage_channels.size() != stage_steps.size())
    invalid_value("--stage-steps", f.get("--stage-steps", steps_default),
                  "one value per stage of --stage-channels",
                  std::to_string(stage_steps.size()) + " values for " +
                      std::to_string(stage_channels.size()) + " stages");
  for (std::int64_t ch : stage_channels)
    if (ch > 4096)
      invalid_value("--stage-channels", f.get("--stage-channels", channels_default),
                    "integers in 1..4096");
  c.model.stage_channels.assign(stage_channels.begin(), stage_channels.end());
  c.model.stage_steps.assign(stage_steps.begin(), stage_steps.end());
  c.model.batchnorm = parse_switch("--batchnorm", f.get("--batchnorm", D::batchnorm));
  c.model.dropout = parse_number("--dropout", f.get("--dropout", D::dropout), "a rate in [0, 1)");
  if (!(c.model.dropout >= 0 && c.model.dropout < 1))
    invalid_value("--dropout", f.get("--dropout", D::dropout), "a rate in [0, 1)");
  const train::ModelKind& kind = train::model_kind(c.model);
  refuse_foreign_flags(f, kind,
                       {{"--stage-channels", "stage_channels"},
                        {"--stage-steps", "stage_steps"},
                        {"--batchnorm", "batchnorm"},
                        {"--dropout", "dropout"},
                        {"--stem", "stem"},
                        {"--channels", "channels"},
                        {"--steps", "steps"},
                        {"--open", "open"}});
  c.model.hidden =
      parse_integer("--hidden", f.get("--hidden", D::hidden), 1, "an integer in [1, 65536]", 65536);
  c.model.rnn_layers = parse_integer("--rnn-layers", f.get("--rnn-layers", D::rnn_layers), 1,
                                     "an integer in [1, 64]", 64);
  const std::vector<std::string> orders = {"rows", "pixels"};
  c.model.sequence = orders[parse_choice("--sequence", f.get("--sequence", D::sequence), orders)];
  const std::vector<std::string> coarse_inputs = {"start", "mean"};
  c.model.coarse_input = coarse_inputs[parse_choice(
      "--coarse-input", f.get("--coarse-input", D::coarse_input), coarse_inputs)];
  const std::string dt_text = f.get("--implicit-step", D::implicit_step);
  c.model.implicit_step =
      parse_number("--implicit-step", dt_text, "0 (torch's cell) or a number > 0");
  if (!(c.model.implicit_step >= 0))
    invalid_value("--implicit-step", dt_text, "0 (torch's cell) or a number > 0");
  c.model.implicit_iterations = static_cast<int>(
      parse_integer("--implicit-iterations", f.get("--implicit-iterations", D::implicit_iterations),
                    1, "an integer in [1, 1000]", 1000));
  refuse_foreign_flags(f, kind,
                       {{"--hidden", "hidden"},
                        {"--rnn-layers", "rnn_layers"},
                        {"--sequence", "sequence"},
                        {"--coarse-input", "coarse_input"},
                        {"--implicit-step", "implicit_step"},
                        {"--implicit-iterations", "implicit_iterations"}});
  c.data_ranks = static_cast<int>(parse_integer(
      "--data-ranks", f.get("--data-ranks", D::data_ranks), 1, "an integer >= 1", 1 << 20));
  if (f.serial && c.data_ranks > 1)
    invalid_value("--data-ranks", f.get("--data-ranks", D::data_ranks), "1 with --serial",
                  "--serial trains on one rank, without replicas");
  const std::vector<std::string> opens = {"conv", "copy"};
  c.model.open = opens[parse_choice("--open", f.get("--open", D::open), opens)];
  c.model.seed = static_cast<std::uint64_t>(
      parse_integer("--seed", f.get("--seed", D::seed), 0, "an integer >= 0", 1LL << 62));
  const char* batch_default = kind.recurrent() ? D::rnn_batch : D::batch;
  c.batch = parse_integer("--batch", f.get("--batch", batch_default), 1, "an integer >= 1");
  if (c.batch % c.data_ranks != 0)
    invalid_value("--batch", f.get("--batch", batch_default),
                  "a multiple of --data-ranks " + std::to_string(c.data_ranks),
                  "each replica takes batch / data-ranks images");
  const Recipe recipe = as_text(train::recipe_for(c.model));
  c.epochs = static_cast<int>(
      parse_integer("--epochs", f.get("--epochs", recipe.epochs), 1, "an integer >= 1"));
  c.train_size = parse_integer("--train-size", f.get("--train-size", "-1"), -1,
                               "-1 (all) or an integer >= 1", 1LL << 40);
  c.test_size = parse_integer("--test-size", f.get("--test-size", "-1"), -1,
                              "-1 (all) or an integer >= 1", 1LL << 40);
  if (c.train_size == 0) invalid_value("--train-size", "0", "-1 (all) or an integer >= 1");
  if (c.test_size == 0) invalid_value("--test-size", "0", "-1 (all) or an integer >= 1");
  if (!f.get("--eval-batch", "").empty())
    c.eval_batch = parse_integer("--eval-batch", f.get("--eval-batch", ""), 1, "an integer >= 1");
  const std::vector<std::string> eval_forwards = {"exact", "mgrit", "both"};
  const train::EvaluationForward forwards[] = {train::EvaluationForward::exact,
                                               train::EvaluationForward::solver,
                                               train::EvaluationForward::both};
  c.evaluation_forward =
      forwards[parse_choice("--eval-forward", f.get("--eval-forward", "both"), eval_forwards)];
  const std::vector<std::string> optimizers = {"sgd", "adam"};
  c.optimizer =
      optimizers[parse_choice("--optimizer", f.get("--optimizer", D::optimizer), optimizers)];
  c.lr = parse_number("--lr", f.get("--lr", recipe.lr), "a number > 0");
  if (!(c.lr > 0)) invalid_value("--lr", f.get("--lr", recipe.lr), "a number > 0");
  const std::vector<std::string> schedules = {"constant", "cosine"};
  c.lr_schedule = schedules[parse_choice("--lr-schedule",
                                         f.get("--lr-schedule", recipe.lr_schedule), schedules)];
  c.momentum = parse_number("--momentum", f.get("--momentum", D::momentum), "a number in [0, 1)");
  if (c.momentum < 0 || c.momentum >= 1)
    invalid_value("--momentum", f.get("--momentum", D::momentum), "a number in [0, 1)");
  c.threads = static_cast<int>(parse_threads(f.get("--threads", "0")));
  for (const char* flag :
       {"--channels", "--steps", "--T", "--open", "--seed", "--optimizer", "--model", "--mgopt",
        "--stage-channels", "--stage-steps", "--batchnorm", "--dropout", "--hidden", "--rnn-layers",
        "--sequence", "--coarse-input", "--implicit-step", "--implicit-iterations", "--stem"})
    if (const auto it = f.options.find(flag); it != f.options.end() && it->second->count() > 0)
      c.given.insert(flag);                   // (weft predict has no --mgopt)
  if (f.options.at("--preset")->count() > 0)  // it gives the stages flags' values
    c.given.insert({"--stage-channels", "--stage-steps", "--stem"});
  c.serial = f.serial;
  const std::vector<std::string> balances = {"layers", "cost"};
  if (!f.get("--balance", "").empty()) {
    const std::string b = f.get("--balance", "");
    c.balance_cost = parse_choice("--balance", b, balances) == 1;
    if (c.balance_cost && f.serial)
      invalid_value("--balance", b, "layers with --serial", "--serial trains on one rank");
    if (c.balance_cost && kind.recurrent())
      invalid_value("--balance", b, "layers with --model " + c.model.kind,
                    "its sequence steps cost alike");
  }
  c.progress = !f.no_progress;
  c.check_images = f.check_images;
  c.metrics_path = f.get("--metrics", "");
  c.trace_path = f.get("--trace", "");
  c.trace_batches =
      parse_integer("--trace-batches", f.get("--trace-batches", "4"), 1, "an integer >= 1");
  if (!f.get("--trace-batches", "").empty() && c.trace_path.empty())
    invalid_value("--trace-batches", f.get("--trace-batches", "4"),
                  "a count used with --trace FILE (no --trace given)");
  c.checkpoint_dir = f.get("--checkpoint", "");
  c.resume_dir = f.get("--resume", "");
  const std::string grow = f.get("--grow-depth", "");
  if (!grow.empty()) {
    const std::string accepted = "R,K: a factor R in [2, 64] and K >= 1 refinements";
    const std::vector<int> rk = parse_int_list("--grow-depth", grow, 1, accepted);
    if (rk.size() != 2 || rk[0] < 2 || rk[0] > 64 || rk[1] > 16)
      invalid_value("--grow-depth", grow, accepted + " (K <= 16)");
    c.growth.factor = rk[0];
    c.growth.refinements = rk[1];
    c.given.insert("--grow-depth");
  }
  for (const char* flag : {"--grow-epochs", "--grow-interpolation"})
    if (!f.get(flag, "").empty() && grow.empty())
      invalid_value(flag, f.get(flag, ""), "a value used with --grow-depth R,K (none given)");
  if (!f.get("--grow-epochs", "").empty())
    c.growth.epochs = parse_int_list("--grow-epochs", f.get("--grow-epochs", ""), 1,
                                     "K integers >= 1: epochs at each shallower depth");
  const std::vector<std::string> interpolations = {"constant", "linear"};
  if (!f.get("--grow-interpolation", "").empty())
    c.growth.interpolation = nn::depth_interpolation_from(
        interpolations[parse_choice("--grow-interpolation", f.get("--grow-interpolation", ""),
                                    interpolations)],
        "weft train");
  c.parallel.forward(solver_options(f, "fwd", recipe)).backward(solver_options(f, "bwd", recipe));
  const SpatialTexts spatial{f.get("--spatial-levels", ""), f.get("--fwd-spatial-levels", ""),
                             f.get("--bwd-spatial-levels", "")};
  for (const char* flag : kSpatialLevelFlags)
    if (!f.get(flag, "").empty()) c.given.insert(flag);  // errors found later name them
  const bool coarse_in_space =
      !spatial.both.empty() || !spatial.forward.empty() || !spatial.backward.empty();
  if (coarse_in_space) {
    auto given = [&](const char* flag) {
      GivenNrelax g{flag, f.get(flag, ""), 0};
      if (!g.text.empty())
        g.count = static_cast<int>(parse_int_list(flag, g.text, 0, "integers >= 0").size());
      return g;
    };
    apply_spatial_levels(spatial, c, given("--fwd-nrelax"), given("--bwd-nrelax"));
  }
  for (const char* flag : {"--spatial-bn-stats", "--spatial-kernels"})
    if (!coarse_in_space && !f.get(flag, "").empty())
      invalid_value(flag, f.get(flag, ""), "a value used with --spatial-levels (none given)");
  if (!f.get("--spatial-bn-stats", "").empty()) {
    const std::vector<std::string> statistics = {"running", "own"};
    c.parallel.spatial_running_statistics(
        parse_choice("--spatial-bn-stats", f.get("--spatial-bn-stats", ""), statistics) == 0);
  }
  if (!f.get("--spatial-kernels", "").empty()) {
    const std::vector<std::string> kernels = {"same", "moments", "galerkin"};
    c.parallel.spatial_kernels(nn::spatial_kernels_from(
        kernels[parse_choice("--spatial-kernels", f.get("--spatial-kernels", ""), kernels)],
        "weft train"));
  }
  c.parallel.validate();
  resolve_iteration_control(f, c);
  resolve_mgopt(f, c);
  return c;
}

}  // namespace

struct TrainFlags : Flags {};

std::shared_ptr<TrainFlags> add_network_flags(CLI::App& command) {
  using D = TrainDefaults;
  CLI::App* cmd = &command;
  auto f = std::make_shared<TrainFlags>();
  f->add(*cmd, "--data", "DIR|shapes3d",
         fmt::format("MNIST-format data folder (images; volumes as written by `weft data`), or "
                     "shapes3d: the generated 3-D set, cached in $XDG_CACHE_HOME/weft or "
                     "~/.cache/weft (default {})",
                     D::data));
  f->add(*cmd, "--data-format", "NAME",
         "read --data as idx, idx-volumes, cifar10, cifar100, tiny-imagenet or folder (default: "
         "recognised by its files)");
  f->add(*cmd, "--label", "fine|coarse",
         "CIFAR-100: the 100 fine or the 20 coarse classes (default fine)");
  f->add(*cmd, "--image-size", "S",
         "tiny-imagenet and folder data: images are scaled so that their shorter side is S and "
         "the centre S x S cropped (default 64)");
  f->add(*cmd, "--augment", "auto|none|crop-flip",
         "training images: a random crop of the image padded by --crop-padding and a horizontal "
         "flip, drawn per seed, epoch and image; auto = crop-flip for CIFAR, tiny-imagenet and "
         "folder data, none otherwise "
         "(default auto)");
  f->add(*cmd, "--crop-padding", "INT", "pixels of padding for --augment crop-flip (default 4)");
  f->add(*cmd, "--normalize", "measured|none|MEAN,STD|M1..MC,S1..SC",
         "x' = (x - mean) / std of the pixels in [0, 1]: measured on the training set (per "
         "channel for colour images), none, or given for all channels or per channel (default "
         "measured)");
  f->add(*cmd, "--channels", "INT",
         fmt::format("channels C of the residual blocks (default {})", D::channels));
  f->add(*cmd, "--steps", "INT", fmt::format("residual steps N = layers (default {})", D::steps));
  f->add(*cmd, "--T", "X", fmt::format("final time T; step size h = T/N (default {})", D::T));
  f->add(*cmd, "--open", "conv|copy", fmt::format("open layer (default {})", D::open));
  f->add(*cmd, "--model", "resnet|stages|conv3d|gru|lstm",
         fmt::format("network: resnet (one stage, --channels/--steps), stages (batch norm, "
                     "resolution halved between stages), conv3d (stages in 3-D, for volumes: "
                     "--data shapes3d), or gru/lstm (the image as a sequence, MGRIT over its "
                     "steps) (default {})",
                     D::model));
  f->add(*cmd, "--hidden", "H", fmt::format("gru/lstm: hidden size (default {})", D::hidden));
  f->add(*cmd, "--rnn-layers", "L",
         fmt::format("gru/lstm: stacked recurrent layers (default {})", D::rnn_layers));
  f->add(*cmd, "--sequence", "rows|pixels",
         fmt::format("gru/lstm: rows = 28 steps of 28 pixels, pixels = 784 steps of 1 (default {})",
                     D::sequence));
  f->add(*cmd, "--coarse-input", "start|mean",
         fmt::format("gru/lstm: the input of a coarse MGRIT step: the first of the steps it "
                     "stands for, or their mean (default {})",
                     D::coarse_input));
  f->add(*cmd, "--implicit-step", "DT",
         fmt::format("gru/lstm: 0 = torch's cell; DT > 0 = the implicit cell, one backward-Euler "
                     "step of ds/dt = cell(s, x) - s of size DT per sequence step (default {})",
                     D::implicit_step));
  f->add(*cmd, "--implicit-iterations", "K",
         fmt::format("gru/lstm: fixed-point iterations of the implicit cell (default {})",
                     D::implicit_iterations));
  f->add(*cmd, "--preset", "none|tiny-imagenet",
         "stages: tiny-imagenet = TorchBraid's Tiny-ImageNet network for 64x64 RGB images: "
         "--stage-channels 64,128,256,512 --stage-steps 3,3,3,3 --stem imagenet unless given "
         "(default none)");
  f->add(*cmd, "--stem", "conv|imagenet",
         "stages: the open layer, conv3x3 (conv) or conv7x7 stride 2 + max pool stride 2 "
         "(imagenet: states 4x smaller per side than the images) (default conv)");
  f->add(*cmd, "--stage-channels", "INT,INT...",
         fmt::format("stages: channels of each stage (default {})", D::stage_channels));
  f->add(*cmd, "--stage-steps", "INT,INT...",
         fmt::format("stages: residual steps of each stage (default {})", D::stage_steps));
  f->add(
      *cmd, "--batchnorm", "0|1",
      fmt::format("stages: batch norm in open, steps and transitions (default {})", D::batchnorm));
  f->add(*cmd, "--dropout", "RATE",
         fmt::format("stages: dropout after the ReLU inside each step (default {})", D::dropout));
  f->add(*cmd, "--data-ranks", "D",
         fmt::format("data parallelism: D replicas of P/D layer-parallel ranks, each taking "
                     "batch/D images; gradients averaged (default {})",
                     D::data_ranks));
  f->add(*cmd, "--batch", "INT",
         fmt::format("batch size (default {}; gru/lstm {})", D::batch, D::rnn_batch));
  const Recipe exact = recipe_of(TrainDefaults::model), stages = recipe_of("stages"),
               rnn = recipe_of("gru");
  f->add(*cmd, "--optimizer", "sgd|adam", fmt::format("optimizer (default {})", D::optimizer));
  f->add(*cmd, "--lr", "X",
         fmt::format("learning rate (default {}; {} with --model stages, {} with gru/lstm)",
                     exact.lr, stages.lr, rnn.lr));
  f->add(*cmd, "--lr-schedule", "constant|cosine",
         fmt::format("learning rate over the run: constant, or cosine decay from --lr to 0 over "
                     "--epochs (default {}; {} with --model stages)",
                     exact.lr_schedule, stages.lr_schedule));
  f->add(*cmd, "--momentum", "X", fmt::format("SGD momentum (default {})", D::momentum));
  f->add(*cmd, "--seed", "INT",
         fmt::format("initialisation and shuffling seed (default {})", D::seed));
  f->add(*cmd, "--threads", "INT", "torch threads per rank; 0 = cores / ranks (default 0)");
  const train::ModelKind::Recipe& staged = train::model_kind("stages").recipe;
  const std::string skipping_forward =
      fmt::format(", {} where the forward skips", staged.forward_iterations_skipping);
  const std::string long_stages =
      fmt::format(", 1 where a stage has more than {} steps", staged.short_stage_steps);
  for (const std::string dir : {"fwd", "bwd"}) {
    const std::string what = dir == "fwd" ? "forward" : "backward (adjoint)";
    const bool fwd = dir == "fwd";
    f->add(*cmd, ("--" + dir + "-levels").c_str(), "INT",
           fmt::format("{} MGRIT levels; 1 = exact sequential solve (default {}; {} with --model "
                       "stages)",
                       what, exact.levels, stages.levels));
    f->add(*cmd, ("--" + dir + "-iters").c_str(), "INT|auto",
           fmt::format("{} MGRIT iterations (default {}; {} with --model stages{}); weft "
                       "train: auto = chosen batch by batch from the solves' residuals and "
                       "exact-gradient checks, starting from the default (--auto-*)",
                       what, fwd ? exact.fwd_iters : exact.bwd_iters,
                       fwd ? stages.fwd_iters : stages.bwd_iters, fwd ? skipping_forward : ""));
    f->add(*cmd, ("--" + dir + "-cf").c_str(), "INT[,INT...]",
           fmt::format("{} coarsening factor per level (default {}; {} with --model stages)", what,
                       exact.cf, stages.cf));
    f->add(*cmd, ("--" + dir + "-nrelax").c_str(), "INT[,INT...]",
           fmt::format("{} CF sweeps per level: 0 F, 1 FCF; unlisted levels FCF (default {})", what,
                       D::nrelax));
    f->add(*cmd, ("--" + dir + "-tol").c_str(), "X",
           fmt::format("{} absolute tolerance; 0 = fixed iterations (default {})", what, D::tol));
    f->add(*cmd, ("--" + dir + "-skip").c_str(), "0|1",
           fmt::format("{}: skip the first down-cycle (default {}; {} with --model stages{})", what,
                       fwd ? exact.fwd_skip : exact.bwd_skip,
                       fwd ? stages.fwd_skip : stages.bwd_skip, fwd ? long_stages : ""));
  }
  cmd->add_flag("--exact", f->exact,
                "exact mode: one level forward and backward (sequential chains over the ranks; "
                "gradients equal ordinary backprop), whatever the model's default");
  f->add(*cmd, "--spatial-levels", "0|1,...",
         "one 0/1 per level (both directions): 1 where that level's states are coarsened in "
         "space (stride 2) relative to the level above; convolutional models (default none)");
  f->add(*cmd, "--fwd-spatial-levels", "0|1,...",
         "as --spatial-levels for the forward solve alone (one per --fwd-levels level); "
         "replaces --spatial-levels there");
  f->add(*cmd, "--bwd-spatial-levels", "0|1,...",
         "as --spatial-levels for the adjoint solve alone (one per --bwd-levels level); "
         "replaces --spatial-levels there");
  f->add(*cmd, "--spatial-bn-stats", "running|own",
         "batch norm in steps on levels coarsened in space: the layer's running statistics "
         "(running, the default) or those of the restricted states (own)");
  f->add(*cmd, "--spatial-kernels", "same|moments|galerkin",
         "3x3(x3) convolution kernels on levels coarsened in space: the fine ones (same, the "
         "default), moments rescaled for the coarser spacing (moments), or the Galerkin product "
         "of restriction, the fine kernel and interpolation (galerkin)");
  cmd->add_flag("--warm-start", f->warm_start,
                "start each batch's MGRIT solves from the previous batch's states");
  f->add(*cmd, "--balance", "layers|cost",
         "how the layers are spread over the ranks: equal numbers (layers, the default) or "
         "blocks of equal cost, each layer's steps timed at the start (cost: fewer of the dearer "
         "layers per rank); convolutional models");
  return f;
}

TrainConfig resolve_network_flags(const TrainFlags& flags) {
  return resolve_train(flags);
}

Subcommand add_train_command(CLI::App& weft) {
  CLI::App* cmd = weft.add_subcommand(
      "train",
      "Train a classifier layer-parallel with MGRIT (default: Fashion-MNIST). Exact mode "
      "(--exact: one level both ways) is the default except for --model stages, the main job "
      "(multilevel MGRIT both ways); --serial is plain LibTorch.");
  auto f = add_network_flags(*cmd);
  const Recipe exact = recipe_of(TrainDefaults::model), stages = recipe_of("stages"),
               rnn = recipe_of("gru");
  f->add(*cmd, "--epochs", "INT",
         fmt::format("epochs, counted from the start of the run (default {}; {} with --model "
                     "stages, {} with gru/lstm)",
                     exact.epochs, stages.epochs, rnn.epochs));
  f->add(*cmd, "--train-size", "INT", "training images to use (default all)");
  f->add(*cmd, "--test-size", "INT", "test images to use (default all)");
  f->add(*cmd, "--eval-batch", "INT",
         "test images per evaluation batch after each epoch (default the larger of --batch and "
         "500)");
  f->add(*cmd, "--eval-forward", "exact|mgrit|both",
         "the forward of the evaluation after each epoch: exact, the network's own (pipelined "
         "over the ranks; what --serial and `weft eval` report), mgrit, the training's "
         "forward solve in evaluation mode, or both, the exact figures with the mgrit ones "
         "beside them (default both; multilevel forwards only)");
  cmd->add_flag("--serial", f->serial, "plain sequential LibTorch training on rank 0 (reference)");
  cmd->add_flag("--no-progress", f->no_progress, "no progress bar");
  cmd->add_flag("--check-images", f->check_images,
                "decode every image file once before training, each rank a share (tiny-imagenet "
                "and folder data): damage inside an image is then rejected before any work");
  f->add(*cmd, "--metrics", "PATH", "append one JSON line per epoch");
  f->add(*cmd, "--trace", "FILE",
         "write a timeline of a few batches (Chrome trace-event JSON: Perfetto, weft replay, "
         "weft plot timeline; docs/tracing.md)");
  f->add(*cmd, "--trace-batches", "INT",
         "batches to trace with --trace, after the first two of the run (default 4)");
  f->add(*cmd, "--checkpoint", "DIR", "save model and optimizer after every epoch");
  f->add(*cmd, "--resume", "DIR",
         "continue the run saved in DIR (architecture, seed and optimizer from DIR; "
         "--epochs counts from the start of the run)");
  f->add(*cmd, "--auto-tol", "X",
         "with --fwd-iters/--bwd-iters auto: the relative error of the parameter gradient "
         "accepted at the exact-gradient checks (default 0.3)");
  f->add(*cmd, "--auto-fwd-tol", "X",
         "with auto iterations: the relative error of the MGRIT forward's logits against the "
         "network's own accepted at the checks (default 0.1)");
  f->add(*cmd, "--auto-check", "K",
         "with auto iterations: batches between exact-gradient checks (default 50)");
  f->add(*cmd, "--auto-max", "N",
         "with auto iterations: the most iterations per solve (default 8)");
  f->add(*cmd, "--auto-min", "N",
         "with auto iterations: the fewest iterations per solve (default 1; equal to --auto-max "
         "it holds the count and only measures)");
  f->add(*cmd, "--auto-diagnostics", "0|1",
         "with auto iterations: at each check also measure the exact gradient's sampling noise "
         "and the persistence of the gradient error (2 more exact passes a check; default 0)");
  f->add(*cmd, "--auto-half-steps", "0|1",
         "with auto iterations: between k and k+1 iterations of a solve that skips (--fwd-skip, "
         "--bwd-skip), also try k iterations without skip (default 1)");
  f->add(*cmd, "--grow-depth", "R,K",
         "nested iteration over depth: train with every stage's steps divided by R^K first and "
         "refine the depth by R, K times, to the steps given (same T; docs/training.md)");
  f->add(*cmd, "--grow-epochs", "E1,...,EK",
         "with --grow-depth: epochs at each shallower depth, shallowest first; the full depth "
         "trains the rest of --epochs (default 1 each)");
  f->add(*cmd, "--grow-interpolation", "constant|linear",
         "with --grow-depth: the refined steps' parameters, piecewise constant or linear in "
         "time (default constant)");
  f->add(*cmd, "--mgopt", "LEVELS",
         "MG/Opt over depth: each batch one V-cycle over LEVELS networks, each coarser one with "
         "1/R of every stage's steps (same T; 1: plain training; 0: off, also for a run resumed "
         "from a checkpoint trained with MG/Opt, which otherwise continues it; "
         "docs/training.md)");
  f->add(*cmd, "--mgopt-factor", "R", "with --mgopt: the depth ratio of the levels (default 2)");
  f->add(*cmd, "--mgopt-relax", "PRE,POST,COARSE",
         "with --mgopt: optimizer steps before and after each coarse correction and on the "
         "coarsest level (default 1,1,2)");
  f->add(*cmd, "--mgopt-restriction", "injection|averaging",
         "with --mgopt: a coarse step's parameters from the fine step at its time, or the mean "
         "of the fine steps it spans (default injection)");
  f->add(*cmd, "--mgopt-interpolation", "constant|linear",
         "with --mgopt: the prolonged correction, piecewise constant or linear in time "
         "(default constant)");
  f->add(*cmd, "--mgopt-line-search", "N",
         "with --mgopt: the most halvings of a coarse correction before it is rejected "
         "(default 4)");
  return Subcommand{cmd,
                    [f](MPI_Comm comm) { return network_runners().train(resolve_train(*f), comm); },
                    network_program};
}

Subcommand add_eval_command(CLI::App& weft) {
  CLI::App* cmd = weft.add_subcommand(
      "eval", "Evaluate a checkpoint of `weft train` on the test set (any rank count).");
  auto f = std::make_shared<Flags>();
  f->add(*cmd, "--resume", "DIR", "checkpoint folder (required)");
  f->options.at("--resume")->required();
  f->add(*cmd, "--data", "DIR|shapes3d",
         fmt::format("MNIST-format data folder, or shapes3d (default {})", TrainDefaults::data));
  f->add(*cmd, "--data-format", "NAME",
         "read --data as idx, idx-volumes, cifar10, cifar100, tiny-imagenet or folder (default: "
         "recognised by its files)");
  f->add(*cmd, "--label", "fine|coarse",
         "CIFAR-100: the 100 fine or the 20 coarse classes (default fine)");
  f->add(*cmd, "--test-size", "INT", "test images to use (default all)");
  f->add(*cmd, "--batch", "INT", "evaluation batch size (default 500)");
  f->add(*cmd, "--threads", "INT", "torch threads per rank; 0 = cores / ranks (default 0)");
  f->add(*cmd, "--json", "PATH", "write loss, accuracy and the confusion matrix as JSON");
  return Subcommand{cmd,
                    [f](MPI_Comm comm) {
                      EvalConfig c;
                      c.resume_dir = f->get("--resume", "");
                      c.data_dir = f->get("--data", TrainDefaults::data);
                      c.data_format = data_format_of(f->get("--data-format", ""));
                      c.label = label_of(f->get("--label", "fine"));
                      c.test_size = parse_integer("--test-size", f->get("--test-size", "-1"), -1,
                                                  "-1 (all) or an integer >= 1", 1LL << 40);
                      if (c.test_size == 0)
                        invalid_value("--test-size", "0", "-1 (all) or an integer >= 1");
                      c.batch =
                          parse_integer("--batch", f->get("--batch", "500"), 1, "an integer >= 1");
                      c.threads = static_cast<int>(parse_threads(f->get("--threads", "0")));
                      c.json_path = f->get("--json", "");
                      return network_runners().eval(c, comm);
                    },
                    network_program};
}

}  // namespace weft::cli
