// `weft plot` end to end: pictures from the small inputs in plot_inputs/ (real `weft mgrit
// --json` summaries, metrics lines in the `weft train --metrics` format, `weft predict --json`
// files (strong and --weak), a 2-rank `weft train --trace` file), checked to be PNG (or SVG) files
// with a picture in them; bad inputs give one line and exit code 2.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_runner.hpp"

namespace {

namespace fs = std::filesystem;
using weft::cli_test::Outcome;
using weft::cli_test::slurp;
using weft::cli_test::weft;
using weft::cli_test::work_dir;

std::string input(const std::string& name) {
  return std::string(WEFT_PLOT_INPUTS) + "/" + name;
}

std::uint32_t big_endian(const std::string& bytes, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

// A PNG: the signature, an IHDR chunk first with a nonzero size, an IEND chunk last.
void expect_png(const fs::path& path) {
  ASSERT_TRUE(fs::exists(path)) << path;
  const std::string bytes = slurp(path);
  ASSERT_GT(bytes.size(), 100u) << path;
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << path;
  EXPECT_EQ(bytes.substr(12, 4), "IHDR") << path;
  EXPECT_GE(big_endian(bytes, 16), 300u) << "width";
  EXPECT_GE(big_endian(bytes, 20), 200u) << "height";
  EXPECT_EQ(bytes.substr(bytes.size() - 8, 4), "IEND") << path;
}

struct Picture {
  std::string args;  ///< after `weft plot`, without --output
  std::string file;  ///< the output's name
};

class Plots : public ::testing::TestWithParam<Picture> {};

std::string picture_name(const ::testing::TestParamInfo<Picture>& param) {
  std::string name = param.param.file;
  for (char& c : name)
    if (c == '.') c = '_';
  return name;
}

TEST_P(Plots, AreDrawnAsValidPictures) {
  const fs::path dir = work_dir();
  const fs::path out = dir / GetParam().file;
  const Outcome r = weft(0, "plot " + GetParam().args + " --output " + out.string(), dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  if (out.extension() == ".png") {
    expect_png(out);
  } else {
    const std::string svg = slurp(out);
    EXPECT_NE(svg.find("<svg"), std::string::npos);
    EXPECT_NE(svg.find("</svg>"), std::string::npos);
    if (GetParam().args.find("--x time") != std::string::npos) {
      EXPECT_NE(svg.find("wall time [s]"), std::string::npos);  // the runs against their time
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, Plots,
    ::testing::Values(
        Picture{"training " + input("exact_2ranks.jsonl"), "training_one.png"},
        Picture{"training " + input("exact_2ranks.jsonl") + " " + input("mgrit_3ranks.jsonl") +
                    " " + input("serial.jsonl"),
                "training_three.png"},
        Picture{
            "training --x time " + input("exact_2ranks.jsonl") + " " + input("mgrit_3ranks.jsonl"),
            "training_time.svg"},
        Picture{"convergence " + input("heat1d_fcf.json") + " " + input("heat1d_f.json") + " " +
                    input("dahlquist_gradient.json"),
                "convergence.png"},
        Picture{"timing " + input("exact_2ranks.jsonl") + " " + input("mgrit_3ranks.jsonl"),
                "timing.png"},
        Picture{"scaling " + input("predict.json"), "scaling.png"},
        Picture{"scaling " + input("predict.json") + " --title 'a title'", "scaling.svg"},
        Picture{"scaling " + input("predict_weak.json"), "scaling_weak.png"},
        Picture{"timeline " + input("trace_2ranks.json"), "timeline.png"}),
    picture_name);

TEST(Plots, RunTheSameOnSeveralRanks) {
  const fs::path dir = work_dir();
  const Outcome r = weft(
      2, "plot convergence " + input("heat1d_fcf.json") + " -o " + (dir / "c.png").string(), dir);
  ASSERT_EQ(r.code, 0) << r.err;
  expect_png(dir / "c.png");
}

// Bad input: exit code 2, one line on stderr naming the problem, no picture.
struct BadPlot {
  std::string args;
  std::string says;
};

class BadPlots : public ::testing::TestWithParam<BadPlot> {};

std::string bad_plot_name(const ::testing::TestParamInfo<BadPlot>& param) {
  return std::to_string(param.index);
}

TEST_P(BadPlots, ExitWithUsageErrorAndOneLine) {
  const fs::path dir = work_dir();
  const Outcome r = weft(0, "plot " + GetParam().args, dir);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  const auto lines = r.err_lines();
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].rfind("weft plot: ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find(GetParam().says), std::string::npos) << lines[0];
  EXPECT_FALSE(fs::exists(dir / "x.png"));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadPlots,
    ::testing::Values(
        BadPlot{"training " + input("missing.jsonl") + " -o x.png", "cannot read it"},
        BadPlot{"training " + input("malformed.jsonl") + " -o x.png", "line 2: not valid JSON"},
        BadPlot{"training " + input("no_accuracy.jsonl") + " -o x.png", "\"test_accuracy\""},
        BadPlot{"training " + input("empty.jsonl") + " -o x.png", "no epochs"},
        BadPlot{
            "training " + input("exact_2ranks.jsonl") + " " + input("missing.jsonl") + " -o x.png",
            "missing.jsonl"},
        BadPlot{"timing " + input("serial.jsonl") + " -o x.png", "no \"per_rank\""},
        BadPlot{"convergence " + input("no_residuals.json") + " -o x.png", "\"residuals\""},
        BadPlot{"convergence " + input("malformed.jsonl") + " -o x.png", "not valid JSON"},
        BadPlot{"scaling " + input("no_predictions.json") + " -o x.png", "\"predictions\""},
        BadPlot{"scaling " + input("missing.json") + " -o x.png", "cannot read it"},
        BadPlot{"scaling " + input("predict_weak.json") + " " + input("predict.json") + " -o x.png",
                "strong and weak scaling files mixed"},
        BadPlot{"training " + input("exact_2ranks.jsonl") + " -o x.jpg", "option --output"},
        BadPlot{"training --x steps " + input("exact_2ranks.jsonl") + " -o x.png",
                "option --x: 'steps' is invalid"},
        BadPlot{"training " + input("exact_2ranks.jsonl") + " -o no/such/dir/x.png",
                "option --output"},
        BadPlot{"training " + input("exact_2ranks.jsonl"), "--output is required"},
        BadPlot{"training -o x.png", "required"}, BadPlot{"", "subcommand"},
        BadPlot{"timeline " + input("predict.json") + " -o x.png", "not a weft trace"},
        BadPlot{"timeline " + input("trace_2ranks.json") + " " + input("trace_2ranks.json") +
                    " -o x.png",
                "one trace"}),
    bad_plot_name);

}  // namespace
