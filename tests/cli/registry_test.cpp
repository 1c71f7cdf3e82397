// The `weft mgrit` problem registry (apps/weft/mgrit_problems.cpp): every entry is complete, and
// every problem that `weft mgrit --help` lists runs as itself (its name in the report and the
// JSON summary, each of its flags' values in the JSON options), so a problem wired in only
// partly cannot fall back to another one unnoticed.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "mgrit_problems.hpp"
#include "mgrit_settings.hpp"
#include "weft/mgrit/problems/space_time.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using weft::cli::mgrit_problems;
using weft::cli::ProblemEntry;
using weft::cli::ProblemFlag;
using weft::cli_test::Outcome;
using weft::cli_test::slurp;
using weft::cli_test::weft;
using weft::cli_test::work_dir;

TEST(Registry, EveryEntryHasEveryField) {
  ASSERT_GE(mgrit_problems().size(), 7u);
  std::set<std::string> names;
  for (const ProblemEntry& e : mgrit_problems()) {
    SCOPED_TRACE(e.name ? e.name : "(no name)");
    ASSERT_NE(e.name, nullptr);
    EXPECT_TRUE(names.insert(e.name).second) << "registered twice";
    ASSERT_NE(e.summary, nullptr);
    EXPECT_GT(std::string(e.summary).size(), 5u);
    EXPECT_NE(e.make, nullptr);
    std::set<std::string> flags;
    for (const ProblemFlag& f : e.flags) {
      ASSERT_NE(f.flag, nullptr);
      SCOPED_TRACE(f.flag);
      EXPECT_EQ(std::string(f.flag).rfind("--", 0), 0u);
      EXPECT_TRUE(flags.insert(f.flag).second) << "listed twice";
      ASSERT_NE(f.type, nullptr);
      EXPECT_FALSE(std::string(f.type).empty());
      ASSERT_NE(f.fallback, nullptr);
      ASSERT_NE(f.help, nullptr);
      EXPECT_FALSE(std::string(f.help).empty());
      ASSERT_NE(f.library, nullptr);
      EXPECT_FALSE(std::string(f.library).empty()) << "errors could not name this flag";
    }
    EXPECT_EQ(flags.count("--integrator"), 1u);
  }
}

TEST(Registry, EveryEntryBuildsFromItsDefaultsAndDescribesItself) {
  CLI::App app;
  weft::cli::MgritArgs args;
  weft::cli::add_mgrit_flags(app, args);
  app.parse(std::vector<std::string>{});
  for (const ProblemEntry& e : mgrit_problems()) {
    SCOPED_TRACE(e.name);
    const weft::cli::ProblemValues values(e, args);
    weft::cli::MgritSettings s;
    s.problem = e.name;
    s.integrator = values.text("--integrator");
    const auto problem = e.make(values);
    ASSERT_NE(problem, nullptr);
    EXPECT_EQ(problem->describe(s).rfind(std::string(e.name) + ": ", 0), 0u)
        << problem->describe(s);
    json j = json::object();
    problem->add_json(j);
    EXPECT_FALSE(j.empty());
  }
}

// The problem names of `weft mgrit --help` ("--problem NAME  model problem: a, b, c (default x)").
std::vector<std::string> problems_in_help(const std::string& help) {
  const std::string marker = "model problem: ";
  const auto at = help.find(marker);
  if (at == std::string::npos) return {};
  const auto end = help.find(" (default", at);
  std::vector<std::string> names;
  std::string list = help.substr(at + marker.size(), end - at - marker.size());
  for (std::size_t pos = 0; pos <= list.size();) {
    const auto comma = list.find(", ", pos);
    names.push_back(list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (comma == std::string::npos) break;
    pos = comma + 2;
  }
  return names;
}

TEST(Registry, EveryProblemListedInHelpRunsAsItself) {
  const fs::path dir = work_dir();
  const Outcome help = weft(0, "mgrit --help", dir);
  ASSERT_EQ(help.code, 0);
  const std::vector<std::string> listed = problems_in_help(help.out);
  ASSERT_EQ(listed.size(), mgrit_problems().size()) << help.out;
  for (const std::string& name : listed) {
    SCOPED_TRACE(name);
    const ProblemEntry* entry = weft::cli::find_mgrit_problem(name);
    ASSERT_NE(entry, nullptr) << "listed in --help but not registered";
    const fs::path path = dir / (name + ".json");
    const Outcome r = weft(
        0, "mgrit --problem " + name + " --nt 16 --levels 2 --max-iter 2 --json " + path.string(),
        dir);
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("weft mgrit: " + name + " on 1 rank"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("  problem      " + name + ": "), std::string::npos) << r.out;
    const json j = json::parse(slurp(path));
    EXPECT_EQ(j["problem"], name);
    EXPECT_EQ(j["options"]["problem"], name);
    EXPECT_FALSE(j["residuals"].empty());
    for (const ProblemFlag& f : entry->flags) {
      const std::string key = f.library;
      if (key == "ksp" && !weft::mgrit::problems::petsc_available()) continue;
      EXPECT_TRUE(j["options"].contains(key)) << f.flag << " is not in the JSON options";
    }
  }
}

}  // namespace
