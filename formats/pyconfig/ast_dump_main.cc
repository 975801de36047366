// pyconfig_ast_dump FILE: prints petrsim's AST of a Python file in the canonical S-expression form
// that ast_oracle_test.py prints for CPython's ast.parse of the same file, so that the two parsers
// can be compared line by line. Exit 0 and the tree, or exit 2 and "error: <message>".
// A test tool: nothing here is run by petrsim itself.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "base/error.h"
#include "formats/pyconfig/ast.h"
#include "formats/pyconfig/parser.h"
#include "formats/pyconfig/value.h"

namespace petrsim::pyconfig {
namespace {

std::string Str(const std::string& s) { return nlohmann::json(s).dump(); }

class Dumper {
 public:
  std::string out;

  void Module(const pyconfig::Module& m) {
    out += "(Module";
    for (const StmtPtr& s : m.body) {
      out += "\n ";
      Stmt(*s);
    }
    out += ")\n";
  }

 private:
  bool positions_ = true;

  void Pos(int line, int col) {
    if (positions_) out += "@" + std::to_string(line) + ":" + std::to_string(col - 1);
  }
  void Open(const char* name, int line, int col) {
    out += "(";
    out += name;
    Pos(line, col);
  }
  void Opt(const ExprPtr& e) {
    out += " ";
    if (e) {
      Expr(*e);
    } else {
      out += "None";
    }
  }
  void List(const char* name, const std::vector<ExprPtr>& items) {
    out += " (";
    out += name;
    for (const ExprPtr& e : items) Opt(e);
    out += ")";
  }
  void Body(const char* name, const std::vector<StmtPtr>& body) {
    out += " (";
    out += name;
    for (const StmtPtr& s : body) {
      out += " ";
      Stmt(*s);
    }
    out += ")";
  }
  void Keywords(const std::vector<Keyword>& keywords) {
    out += " (keywords";
    for (const Keyword& k : keywords) {
      out += " (keyword " + (k.name.empty() ? std::string("None") : k.name);
      Opt(k.value);
      out += ")";
    }
    out += ")";
  }
  void ArgNode(const Arg* a) {
    if (a == nullptr) {
      out += " None";
      return;
    }
    out += " (arg " + a->name;
    Opt(a->annotation);
    out += ")";
  }
  void Args(const Arguments& a) {
    out += " (arguments (posonlyargs";
    for (const Arg& x : a.posonlyargs) ArgNode(&x);
    out += ") (args";
    for (const Arg& x : a.args) ArgNode(&x);
    out += ")";
    ArgNode(a.vararg.get());
    out += " (kwonlyargs";
    for (const Arg& x : a.kwonlyargs) ArgNode(&x);
    out += ")";
    List("kw_defaults", a.kw_defaults);
    ArgNode(a.kwarg.get());
    List("defaults", a.defaults);
    out += ")";
  }
  void Generators(const std::vector<Comprehension>& gens) {
    for (const Comprehension& c : gens) {
      out += " (comprehension";
      Opt(c.target);
      Opt(c.iter);
      List("ifs", c.ifs);
      out += c.is_async ? " 1)" : " 0)";
    }
  }

  void Stmt(const pyconfig::Stmt& s) {
    switch (s.kind) {
      case StmtKind::kExpr:
        Open("Expr", s.line, s.col);
        Opt(s.value);
        break;
      case StmtKind::kAssign:
        Open("Assign", s.line, s.col);
        List("targets", s.targets);
        Opt(s.value);
        break;
      case StmtKind::kAugAssign:
        Open("AugAssign", s.line, s.col);
        Opt(s.targets[0]);
        out += " " + s.op;
        Opt(s.value);
        break;
      case StmtKind::kAnnAssign:
        Open("AnnAssign", s.line, s.col);
        Opt(s.targets[0]);
        Opt(s.annotation);
        Opt(s.value);
        out += s.simple ? " 1" : " 0";
        break;
      case StmtKind::kIf:
        Open("If", s.line, s.col);
        Opt(s.test);
        Body("body", s.body);
        Body("orelse", s.orelse);
        break;
      case StmtKind::kFor:
        Open(s.is_async ? "AsyncFor" : "For", s.line, s.col);
        Opt(s.targets[0]);
        Opt(s.value);
        Body("body", s.body);
        Body("orelse", s.orelse);
        break;
      case StmtKind::kWhile:
        Open("While", s.line, s.col);
        Opt(s.test);
        Body("body", s.body);
        Body("orelse", s.orelse);
        break;
      case StmtKind::kFunctionDef:
        Open(s.is_async ? "AsyncFunctionDef" : "FunctionDef", s.line, s.col);
        out += " " + s.name;
        Args(*s.args);
        Body("body", s.body);
        List("decorator_list", s.decorators);
        Opt(s.returns);
        break;
      case StmtKind::kClassDef:
        Open("ClassDef", s.line, s.col);
        out += " " + s.name;
        List("bases", s.bases);
        Keywords(s.keywords);
        Body("body", s.body);
        List("decorator_list", s.decorators);
        break;
      case StmtKind::kReturn:
        Open("Return", s.line, s.col);
        Opt(s.value);
        break;
      case StmtKind::kPass:
        Open("Pass", s.line, s.col);
        break;
      case StmtKind::kBreak:
        Open("Break", s.line, s.col);
        break;
      case StmtKind::kContinue:
        Open("Continue", s.line, s.col);
        break;
      case StmtKind::kImport:
      case StmtKind::kImportFrom:
        Open(s.kind == StmtKind::kImport ? "Import" : "ImportFrom", s.line, s.col);
        if (s.kind == StmtKind::kImportFrom) out += " " + (s.module.empty() ? std::string("None") : s.module);
        for (const Alias& a : s.names) out += " (alias " + a.name + " " + (a.asname.empty() ? "None" : a.asname) + ")";
        if (s.kind == StmtKind::kImportFrom) out += " " + std::to_string(s.level);
        break;
      case StmtKind::kTry:
        Open("Try", s.line, s.col);
        Body("body", s.body);
        out += " (handlers";
        for (const ExceptHandler& h : s.handlers) {
          out += " ";
          Open("ExceptHandler", h.line, h.col);
          Opt(h.type);
          out += " " + (h.name.empty() ? std::string("None") : h.name);
          Body("body", h.body);
          out += ")";
        }
        out += ")";
        Body("orelse", s.orelse);
        Body("finalbody", s.finalbody);
        break;
      case StmtKind::kWith:
        Open(s.is_async ? "AsyncWith" : "With", s.line, s.col);
        out += " (items";
        for (const WithItem& item : s.items) {
          out += " (withitem";
          Opt(item.context);
          Opt(item.target);
          out += ")";
        }
        out += ")";
        Body("body", s.body);
        break;
      case StmtKind::kRaise:
        Open("Raise", s.line, s.col);
        Opt(s.value);
        Opt(s.cause);
        break;
      case StmtKind::kAssert:
        Open("Assert", s.line, s.col);
        Opt(s.test);
        Opt(s.value);
        break;
      case StmtKind::kDelete:
        Open("Delete", s.line, s.col);
        List("targets", s.targets);
        break;
      case StmtKind::kGlobal:
      case StmtKind::kNonlocal:
        Open(s.kind == StmtKind::kGlobal ? "Global" : "Nonlocal", s.line, s.col);
        for (const std::string& name : s.identifiers) out += " " + name;
        break;
    }
    out += ")";
  }

  void Constant(const pyconfig::Constant& c) {
    switch (c.kind) {
      case Constant::Kind::kNone:
        out += " None";
        return;
      case Constant::Kind::kBool:
        out += c.bool_value ? " True" : " False";
        return;
      case Constant::Kind::kInt:
        out += " " + std::to_string(c.int_value);
        return;
      case Constant::Kind::kFloat:
        out += " " + PythonFloatRepr(c.float_value);
        return;
      case Constant::Kind::kString:
        out += " " + Str(c.text);
        return;
      case Constant::Kind::kBytes:
        out += " b" + Str(c.text);
        return;
      case Constant::Kind::kEllipsis:
        out += " Ellipsis";
        return;
      case Constant::Kind::kImaginary:
        out += " imaginary";
        return;
    }
  }

  void Expr(const pyconfig::Expr& e) {
    static const char* const kNames[] = {
        "Constant", "Name",      "BaseRef",        "Attribute", "Subscript", "Slice",        "Call",
        "Starred",  "List",      "Tuple",          "Set",       "Dict",      "BinOp",        "UnaryOp",
        "BoolOp",   "Compare",   "IfExp",          "ListComp",  "SetComp",   "GeneratorExp", "DictComp",
        "Lambda",   "JoinedStr", "FormattedValue", "NamedExpr", "Yield",     "YieldFrom",    "Await"};
    Open(kNames[static_cast<int>(e.kind)], e.line, e.col);
    switch (e.kind) {
      case ExprKind::kConstant:
        Constant(e.constant);
        break;
      case ExprKind::kName:
      case ExprKind::kBaseRef:
        out += " " + e.text;
        break;
      case ExprKind::kAttribute:
        Opt(e.items[0]);
        out += " " + e.text;
        break;
      case ExprKind::kCall:
        Opt(e.items[0]);
        out += " (args";
        for (size_t i = 1; i < e.items.size(); ++i) Opt(e.items[i]);
        out += ")";
        Keywords(e.keywords);
        break;
      case ExprKind::kDict:
        List("keys", e.items);
        List("values", e.values);
        break;
      case ExprKind::kBinOp:
        Opt(e.items[0]);
        out += " " + e.text;
        Opt(e.items[1]);
        break;
      case ExprKind::kUnaryOp:
      case ExprKind::kBoolOp:
        out += " " + e.text;
        for (const ExprPtr& item : e.items) Opt(item);
        break;
      case ExprKind::kCompare:
        Opt(e.items[0]);
        out += " (ops";
        for (const std::string& op : e.ops) out += " " + op;
        out += ") (comparators";
        for (size_t i = 1; i < e.items.size(); ++i) Opt(e.items[i]);
        out += ")";
        break;
      case ExprKind::kListComp:
      case ExprKind::kSetComp:
      case ExprKind::kGeneratorExp:
      case ExprKind::kDictComp:
        for (const ExprPtr& item : e.items) Opt(item);
        Generators(e.generators);
        break;
      case ExprKind::kLambda:
        Args(*e.args);
        Opt(e.items[0]);
        break;
      case ExprKind::kJoinedStr: {
        // Positions inside an f-string differ between CPython versions: left out on both sides.
        const bool saved = positions_;
        positions_ = false;
        for (const ExprPtr& item : e.items) Opt(item);
        positions_ = saved;
        break;
      }
      case ExprKind::kFormattedValue:
        Opt(e.items[0]);
        out += " " + std::to_string(e.conversion);
        if (e.items[1] && !e.items[1]->items.empty()) {
          Opt(e.items[1]);
        } else {
          out += " None";
        }
        break;
      default:
        for (const ExprPtr& item : e.items) Opt(item);
        break;
    }
    out += ")";
  }
};

}  // namespace
}  // namespace petrsim::pyconfig

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: pyconfig_ast_dump FILE.py\n";
    return 1;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::cerr << "error: cannot open " << argv[1] << "\n";
    return 2;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  try {
    petrsim::pyconfig::CheckText(text, argv[1], 1);
    petrsim::pyconfig::LexOptions options;
    options.path = argv[1];
    const petrsim::pyconfig::Module module = petrsim::pyconfig::Parse(text, options);
    petrsim::pyconfig::Dumper dumper;
    dumper.Module(module);
    std::cout << dumper.out;
  } catch (const petrsim::ScenarioError& error) {
    std::cout << "error: " << error.what() << "\n";
    return 2;
  }
  return 0;
}
