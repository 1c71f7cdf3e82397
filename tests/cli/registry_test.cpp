// `weft mgrit` over the library's catalogue (tests/mgrit/catalogue_test.cpp tests the catalogue
// itself): every problem that `weft mgrit --help` lists runs as itself (its name in the report
// and the JSON summary, each of its parameters in the JSON options), so a problem wired in only
// partly cannot fall back to another one unnoticed.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "weft/mgrit/problems/catalogue.hpp"
#include "weft/mgrit/problems/space_time.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
namespace pr = weft::mgrit::problems;
using weft::cli_test::Outcome;
using weft::cli_test::slurp;
using weft::cli_test::weft;
using weft::cli_test::work_dir;

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
  ASSERT_EQ(listed.size(), pr::catalogue().size()) << help.out;
  for (const std::string& name : listed) {
    SCOPED_TRACE(name);
    const pr::CatalogueEntry* entry = pr::find_problem(name);
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
    for (const pr::Parameter& p : entry->parameters) {
      const std::string key = p.name;
      if (key == "ksp" && !pr::petsc_available()) continue;
      EXPECT_TRUE(j["options"].contains(key)) << key << " is not in the JSON options";
    }
  }
}

}  // namespace
