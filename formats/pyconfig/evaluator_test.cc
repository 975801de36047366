// The config evaluator (formats/pyconfig/evaluator.h) through ReadMmcvConfig: each construct of
// tests/data/configs/constructs/ against what real Python makes of the same file (expected.json,
// written by make_expected.py there), unknown values and their reasons, and the limits.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "base/error.h"
#include "formats/mmcv/config.h"
#include "formats/pyconfig/value.h"

namespace petrsim {
namespace {

const std::string kData = std::string(PETRSIM_SOURCE_DIR) + "/tests/data/configs/";

std::string ErrorOf(const std::function<void()>& run) {
  try {
    run();
  } catch (const ScenarioError& error) {
    return error.what();
  }
  return "(no error)";
}

Config Text(const std::string& text) { return ReadMmcvConfigText(text, "/nonexistent/cfg.py"); }
std::string ValueOf(const std::string& expression) { return Text("x = " + expression + "\n").Find("x")->Repr(); }

TEST(PyconfigEvaluator, ConstructsEqualWhatPythonMakesOfThem) {
  std::ifstream in(kData + "constructs/expected.json");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const nlohmann::json expected = nlohmann::json::parse(buffer.str());
  ASSERT_GE(expected.size(), 6u);
  for (const auto& [file, values] : expected.items()) {
    SCOPED_TRACE(file);
    const Config config = ReadMmcvConfig(kData + "constructs/" + file);
    for (const auto& [key, repr] : values.items()) {
      const ConfigValue* v = config.Find(key);
      ASSERT_NE(v, nullptr) << key;
      EXPECT_EQ(v->Repr(), repr.get<std::string>()) << key;
    }
  }
}

TEST(PyconfigEvaluator, ImportsAreUnknownAndModulesLeaveTheDict) {
  const std::string path = kData + "constructs/imports.py";
  const Config config = ReadMmcvConfig(path);
  // mmcv 1.x drops modules (`import os`, `import numpy as np`) from the dict; a from-import's name
  // may be anything, so it stays, unknown.
  EXPECT_EQ(config.Find("os"), nullptr);
  EXPECT_EQ(config.Find("np"), nullptr);
  ASSERT_NE(config.Find("PI"), nullptr);
  EXPECT_EQ(config.Find("PI")->Repr(), "<unknown: " + path + ":4: a name from an import ('math.pi')>");
  EXPECT_EQ(config.Find("ann_file")->Repr(), "<unknown: " + path + ":7: a call of 'os.path.join'>");
  EXPECT_EQ(config.Find("mean")->AsUnknown()->reason, path + ":8: a call of 'np.array'");
  // An operation on an unknown is that unknown.
  EXPECT_EQ(config.Find("circle")->AsUnknown()->reason, path + ":4: a name from an import ('math.pi')");
  EXPECT_EQ(config.Find("plain")->Repr(), "5");
  EXPECT_EQ(config.Find("ann_file")->kind(), ConfigValue::Kind::kUnknown);
  EXPECT_EQ(ConfigValue::KindName(ConfigValue::Kind::kUnknown), std::string("a value petrsim cannot evaluate"));
}

TEST(PyconfigEvaluator, FindUnknownNamesTheFieldAndTheConstruct) {
  const Config config = Text(
      "import os\n"
      "data = dict(train=dict(type='X', ann_file=os.path.join('a', 'b.pkl'), pipeline=[1, 2]))\n");
  std::string path;
  const ConfigValue* unknown = FindUnknown(*config.Find("data"), &path);
  ASSERT_NE(unknown, nullptr);
  EXPECT_EQ(path, "train.ann_file");
  EXPECT_EQ(DescribeUnknown(*config.Find("data"), "data"),
            "data.train.ann_file depends on /nonexistent/cfg.py:2: a call of 'os.path.join'");
  EXPECT_EQ(FindUnknown(*config.Find("data.train.pipeline")), nullptr);
  EXPECT_EQ(DescribeUnknown(*config.Find("data.train.type"), "data.train.type"), "");
  EXPECT_FALSE(config.Find("data.train.ann_file")->Truth().has_value());
}

TEST(PyconfigEvaluator, UnknownsPropagateAndAreNeitherTrueNorFalse) {
  const Config config = Text(
      "import numpy as np\n"
      "a = np.pi if np.flag else 2\n"
      "b = np.x and 1\n"
      "c = [i for i in range(3) if np.keep]\n"
      "d = len([np.x, 2])\n"
      "e = f = lambda x: x\n"
      "g = {1, 2}\n"
      "h = '%d' % 3\n"
      "if np.flag:\n"
      "    k = 1\n"
      "def fn():\n"
      "    pass\n"
      "class C:\n"
      "    pass\n");
  EXPECT_EQ(config.Find("a")->AsUnknown()->reason, "/nonexistent/cfg.py:1: a name from an import ('numpy')");
  EXPECT_TRUE(config.Find("b")->is_unknown());
  EXPECT_TRUE(config.Find("c")->is_unknown());
  EXPECT_EQ(config.Find("d")->Repr(), "2");
  EXPECT_EQ(config.Find("e"), nullptr);  // a function: mmcv leaves it out
  EXPECT_EQ(config.Find("fn"), nullptr);
  EXPECT_EQ(config.Find("g")->AsUnknown()->reason, "/nonexistent/cfg.py:7: a set literal ('{a, b}')");
  EXPECT_EQ(config.Find("h")->AsUnknown()->reason, "/nonexistent/cfg.py:8: string formatting with '%'");
  EXPECT_TRUE(config.Find("k")->is_unknown());
  EXPECT_EQ(config.Find("C")->AsUnknown()->reason, "/nonexistent/cfg.py:13: a class definition ('C')");
}

TEST(PyconfigEvaluator, PythonSemanticsOfSmallExpressions) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[1, 2, 3][-1]", "3"},
      {"'abcdef'[1:5:2]", "'bd'"},
      {"[1, 2, 3][5:]", "[]"},
      {"round(0.5)", "0"},
      {"round(-1.5)", "-2"},
      {"round(2.5, 0)", "2.0"},
      {"int(' -12 ')", "-12"},
      {"float(' 1_000.5 ')", "1000.5"},
      {"1 if [] else 2", "2"},
      {"[] or {}", "{}"},
      {"3 > 2 > 1", "True"},
      {"'b' in dict(a=1, b=2)", "True"},
      {"1 << 4 | 1", "17"},
      {"min('b', 'a')", "'a'"},
      {"max([1.5, 2])", "2"},
      {"sum([[1], [2]], [])", "[1, 2]"},
      {"'{0}{1}{0}'.format('a', 'b')", "'aba'"},
      {"'{:08.3f}'.format(-3.14159)", "'-003.142'"},
      {"'{:x}'.format(255)", "'ff'"},
      {"'{:#b}'.format(5)", "'0b101'"},
      {"'{!r}'.format('x')", "\"'x'\""},
      {"f'{1 + 1}{\"!\"}'", "'2!'"},
      {"f'{3.0}'", "'3.0'"},
      {"f'{10:>{4}}'", "'  10'"},
      {"' a b '.split()", "['a', 'b']"},
      {"'a.b.c'.rsplit('.', 1)", "['a.b', 'c']"},
      {"dict(a=1).get('b', 5)", "5"},
      {"list(dict(a=1, b=2).values())", "[1, 2]"},
      {"[*[1, 2], *(3,)]", "[1, 2, 3]"},
      {"{**dict(a=1), 'b': 2}", "{'a': 1, 'b': 2}"},
      {"(1, 2) < (1, 3)", "True"},
      {"None is not None", "False"},
      {"[1, 2].count(2)", "1"},
      {"str(1.0) + str(None)", "'1.0None'"},
      {"bool([])", "False"},
      {"abs(-2.5)", "2.5"},
  };
  for (const auto& [expression, repr] : cases) {
    SCOPED_TRACE(expression);
    EXPECT_EQ(ValueOf(expression), repr);
  }
}

TEST(PyconfigEvaluator, WhatPythonRefusesIsAnError) {
  const std::string at = "/nonexistent/cfg.py:1:";
  EXPECT_EQ(ErrorOf([] { Text("x = [1][3]\n"); }), at + "9: index out of range (Python raises IndexError)");
  EXPECT_EQ(ErrorOf([] { Text("x = dict(a=1)['b']\n"); }), at + "15: KeyError: 'b' (the dict has no such key)");
  EXPECT_EQ(ErrorOf([] { Text("x = int('a')\n"); }),
            at + "5: invalid literal for int() with base 10: 'a' (Python raises ValueError)");
  EXPECT_EQ(ErrorOf([] { Text("x = 1 < 'a'\n"); }),
            at + "7: '<' not supported between instances of 'int' and 'str' (Python raises TypeError)");
  EXPECT_EQ(ErrorOf([] { Text("a, b = 1, 2, 3\n"); }),
            at + "1: cannot unpack 3 values into 2 targets (Python raises ValueError)");
  EXPECT_EQ(ErrorOf([] { Text("x = y\n"); }).substr(0, at.size() + 26), at + "5: name 'y' is not defined");
}

TEST(PyconfigEvaluator, LoopsAndComprehensionsDrawFromTheValueBudget) {
  const std::string at = "/nonexistent/cfg.py:";
  EXPECT_EQ(ErrorOf([] { Text("while True:\n    pass\n"); }),
            at + "1:1: the config builds more than 1000000 values (petrsim's limit for a config)");
  EXPECT_EQ(ErrorOf([] { Text("x = [i for i in range(1000) for j in range(1000) for k in range(2)]\n"); }),
            at + "1:59: the config builds more than 1000000 values (petrsim's limit for a config)");
  EXPECT_EQ(ErrorOf([] { Text("x = list(range(10 ** 9))\n"); }),
            at + "1:10: range() of more than 1048576 ints (petrsim's limit)");
}

TEST(PyconfigEvaluator, StreamPetrConfigsReadFast) {
  const auto start = std::chrono::steady_clock::now();
  for (const char* name :
       {"stream_petr_r50_704_bs2_seq_24e", "stream_petr_vov_800_bs2_seq_24e", "stream_petr_r50_704_trainval_24e"}) {
    ReadMmcvConfig(kData + "streampetr/" + name + ".py");
  }
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(ms, 100);
}

}  // namespace
}  // namespace petrsim
