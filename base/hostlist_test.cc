// Slurm's hostlist expressions (base/hostlist.h): expansion in Slurm's order with its zero
// padding, the first host, and bad input named with its column.
#include "base/hostlist.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"

namespace petrsim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Expand(std::string_view expression) { return ExpandHostlist(expression, "NODES"); }

TEST(HostlistTest, PlainHostsAndCommas) {
  EXPECT_THAT(Expand("localhost"), ElementsAre("localhost"));
  EXPECT_THAT(Expand("a,b.example.com,c-1"), ElementsAre("a", "b.example.com", "c-1"));
}

TEST(HostlistTest, RangesListsAndPaddingAsWritten) {
  EXPECT_THAT(Expand("node[01-04,7],gpu2"), ElementsAre("node01", "node02", "node03", "node04", "node7", "gpu2"));
  EXPECT_THAT(Expand("n[08-10]"), ElementsAre("n08", "n09", "n10"));
  EXPECT_THAT(Expand("n[8-10]"), ElementsAre("n8", "n9", "n10"));
  EXPECT_THAT(Expand("n[3]"), ElementsAre("n3"));
  EXPECT_THAT(Expand("gpu[1-2]-ib"), ElementsAre("gpu1-ib", "gpu2-ib"));
}

TEST(HostlistTest, SeveralGroupsRightmostFastest) {
  EXPECT_THAT(Expand("r[1-2]n[1-2]"), ElementsAre("r1n1", "r1n2", "r2n1", "r2n2"));
  EXPECT_THAT(Expand("a[1-2],r[0-1]-[5,7]"), ElementsAre("a1", "a2", "r0-5", "r0-7", "r1-5", "r1-7"));
}

TEST(HostlistTest, FirstHost) {
  EXPECT_EQ(FirstHostOfHostlist("node[01-04,7],gpu2", "NODES"), "node01");
  EXPECT_EQ(FirstHostOfHostlist("gpu2,node[01-04]", "NODES"), "gpu2");
  EXPECT_EQ(FirstHostOfHostlist("r[3-4]n[009-100]", "NODES"), "r3n009");
  // No host limit for the first host: a huge list is still just its first host.
  EXPECT_EQ(FirstHostOfHostlist("n[0-999999999999]", "NODES"), "n0");
}

// The message of the ScenarioError `expression` raises.
std::string ErrorOf(std::string_view expression) {
  try {
    Expand(expression);
  } catch (const ScenarioError& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(HostlistTest, BadInputNamesTheVariableTheColumnAndWhatWasExpected) {
  EXPECT_EQ(ErrorOf(""), "NODES=: at column 1: expected a hostlist such as node[01-04,7],gpu2, got nothing");
  EXPECT_EQ(ErrorOf("node[01-04"), "NODES=node[01-04: at column 11: expected ']' to close the bracket, got the end");
  EXPECT_EQ(ErrorOf("node01]"), "NODES=node01]: at column 7: ']' without its '['");
  EXPECT_EQ(ErrorOf("n[[1]]"), "NODES=n[[1]]: at column 3: brackets do not nest");
  EXPECT_EQ(ErrorOf("n[]"), "NODES=n[]: at column 3: expected a number in the bracket, got ']'");
  EXPECT_EQ(ErrorOf("n[4-2]"), "NODES=n[4-2]: at column 5: the range 4-2 runs backwards");
  EXPECT_EQ(ErrorOf("n[1-]"), "NODES=n[1-]: at column 5: expected a number in the bracket, got ']'");
  EXPECT_EQ(ErrorOf("n[a-b]"), "NODES=n[a-b]: at column 3: expected a number in the bracket, got 'a'");
  EXPECT_EQ(ErrorOf("n[1:3]"), "NODES=n[1:3]: at column 4: expected ',', '-' or ']' in a bracket, got ':'");
  EXPECT_EQ(ErrorOf("a,,b"),
            "NODES=a,,b: at column 3: expected a host, got an empty item (two commas, or one at an end)");
  EXPECT_THAT(ErrorOf("a,"), HasSubstr("at column 3: expected a host, got an empty item"));
  EXPECT_THAT(ErrorOf(",a"), HasSubstr("at column 1: expected a host, got an empty item"));
  EXPECT_THAT(ErrorOf("a b"), HasSubstr("at column 2: expected a host name character, got whitespace"));
  EXPECT_THAT(ErrorOf("n[1234567890123456789]"), HasSubstr("a number of more than 18 digits"));
  // The first host is not returned from a list that is bad further on.
  EXPECT_THROW(FirstHostOfHostlist("node01,node[02-", "NODES"), ScenarioError);
}

TEST(HostlistTest, AHostLimitIsAnErrorNotAnAllocation) {
  EXPECT_EQ(ExpandHostlist("n[1-4]", "NODES", 4).size(), 4u);
  EXPECT_THROW(ExpandHostlist("n[1-5]", "NODES", 4), ScenarioError);
  EXPECT_THROW(ExpandHostlist("n[1-3],m[1-2]", "NODES", 4), ScenarioError);
  EXPECT_THROW(ExpandHostlist("a[0-99999]b[0-99999]c[0-99999]d[0-99999]", "NODES"), ScenarioError);
  EXPECT_EQ(ErrorOf("n[0-999999999999999999]"), "NODES=n[0-999999999999999999]: more than 65536 hosts");
}

}  // namespace
}  // namespace petrsim
