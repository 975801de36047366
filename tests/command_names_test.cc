// Command names on the command line (cli/command_names.h): typos of a command and help paths.
#include "cli/command_names.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace petrsim {
namespace {

const std::vector<std::string> kNames = {"help",     "check",  "sample", "plan",   "sweep", "merge",
                                         "diagnose", "export", "replay", "import", "train"};

TEST(CommandNames, EditDistanceCountsTranspositionsAsOneEdit) {
  EXPECT_EQ(EditDistance("check", "check", 2), 0);
  EXPECT_EQ(EditDistance("chek", "check", 2), 1);
  EXPECT_EQ(EditDistance("plna", "plan", 2), 1) << "two adjacent letters swapped";
  EXPECT_EQ(EditDistance("diagnsoe", "diagnose", 2), 1);
  EXPECT_EQ(EditDistance("tiny.pbtxt", "train", 2), 3) << "above the cap: cap + 1";
}

TEST(CommandNames, ATypoNamesTheNearestCommandAndAnythingElseNone) {
  EXPECT_EQ(NearestCommand("chek", kNames), "check");
  EXPECT_EQ(NearestCommand("smaple", kNames), "sample");
  EXPECT_EQ(NearestCommand("diagnoze", kNames), "diagnose");
  EXPECT_EQ(NearestCommand("imprt", kNames), "import");
  EXPECT_EQ(NearestCommand("check", kNames), std::nullopt) << "a command is no typo";
  EXPECT_EQ(NearestCommand("tiny.pbtxt", kNames), std::nullopt) << "a scenario file";
  EXPECT_EQ(NearestCommand("x", kNames), std::nullopt);
  EXPECT_EQ(NearestCommand("pan", kNames), "plan");
}

TEST(CommandNames, AHelpPathFindsNestedCommands) {
  CLI::App app{"test"};
  CLI::App* import = app.add_subcommand("import", "import");
  CLI::App* config = import->add_subcommand("mmdet3d-config", "config");
  const std::vector<std::string> path = {"import", "mmdet3d-config"};
  EXPECT_EQ(FindCommand(app, path), config);
  const std::vector<std::string> top = {"import"};
  EXPECT_EQ(FindCommand(app, top), import);
  const std::vector<std::string> wrong = {"import", "nope"};
  EXPECT_EQ(FindCommand(app, wrong), nullptr);
}

}  // namespace
}  // namespace petrsim
