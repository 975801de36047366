// A user's dataset class read from its source; see dataset_source.h.
#include "importers/dataset_source.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "base/assert.h"
#include "base/error.h"
#include "base/file_io.h"
#include "base/input_files.h"
#include "formats/pyconfig/lexer.h"
#include "formats/pyconfig/parser.h"

namespace petrsim {
namespace {

namespace fs = std::filesystem;
using pyconfig::Expr;
using pyconfig::ExprKind;
using pyconfig::Stmt;
using pyconfig::StmtKind;

constexpr size_t kMaxSourceFiles = 4000;
constexpr uint64_t kMaxSourceBytes = uint64_t{4} << 20;
constexpr int kMaxBaseDepth = 8;
constexpr int kMaxRootSearch = 8;
constexpr int kMaxCallFollow = 4;

// "np.random.choice" of a Name / Attribute chain; "" for anything else.
std::string Dotted(const Expr* e) {
  if (e == nullptr) return "";
  if (e->kind == ExprKind::kName) return e->text;
  if (e->kind == ExprKind::kAttribute) {
    const std::string left = Dotted(e->items[0].get());
    return left.empty() ? "" : left + "." + e->text;
  }
  return "";
}

bool EndsWith(std::string_view s, std::string_view suffix) { return s.ends_with(suffix); }

// The function a call expression calls ("self.prepare_train_data"), "" when `e` is not a call.
std::string CalleeOf(const Expr* e) {
  return e != nullptr && e->kind == ExprKind::kCall ? Dotted(e->items[0].get()) : "";
}

bool IsLenSelf(const Expr* e) {
  return CalleeOf(e) == "len" && e->items.size() == 2 && Dotted(e->items[1].get()) == "self";
}

std::string Where(const std::string& path, int line) { return fmt::format("{}:{}", path, line); }

// A class of one file: its statement and the file's path.
struct ClassSource {
  const Stmt* node = nullptr;
  std::string path;
};

// Every file under the plugin directory that defines classes, parsed on demand.
class PluginSources {
 public:
  explicit PluginSources(fs::path root) : root_(std::move(root)) {}

  // The plugin's own build_dataloader, if any: where it is and what its text names.
  struct Builder {
    std::string where;
    bool infinite_batch_sampler = false;  // it builds InfiniteGroupEachSampleInBatchSampler
  };
  const std::optional<Builder>& builder() {
    Index();
    return builder_;
  }
  // The file whose train script passes cfg.runner itself on (StreamPETR's mmdet_train.py: AttributeError
  // without a runner), "" when no file does.
  const std::string& strict_runner_where() {
    Index();
    return strict_runner_where_;
  }
  // The file whose train script passes the config's data.shuffler_sampler to the builder, "" when none.
  const std::string& passes_shuffler_where() {
    Index();
    return passes_shuffler_where_;
  }
  // Other files that define a class of this name (the first in path order is read).
  std::vector<std::string> Duplicates(const std::string& name) {
    Index();
    const auto it = duplicates_.find(name);
    return it == duplicates_.end() ? std::vector<std::string>{} : it->second;
  }

  // The class named `name`, or nullopt. Scans the files' text for "class NAME" before parsing any.
  std::optional<ClassSource> Find(const std::string& name) {
    Index();
    const auto it = class_files_.find(name);
    if (it == class_files_.end()) return std::nullopt;
    const pyconfig::Module& module = Parsed(it->second);
    for (const auto& stmt : module.body) {
      if (stmt->kind == StmtKind::kClassDef && stmt->name == name) return ClassSource{stmt.get(), module.path};
    }
    return std::nullopt;  // a "class NAME" inside a function or a string: not a module-level class
  }

 private:
  void Index() {
    if (indexed_) return;
    indexed_ = true;
    // The .py files in path order (a directory iterator's order is unspecified), bounded in number
    // and in the directory entries walked.
    std::vector<fs::path> files;
    size_t entries = 0;
    std::error_code error;
    for (auto it = fs::recursive_directory_iterator(root_, fs::directory_options::skip_permission_denied, error);
         !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
      if (++entries > 20 * kMaxSourceFiles) {
        throw ScenarioError(
            fmt::format("{}: more than {} entries under the plugin directory", root_.string(), 20 * kMaxSourceFiles));
      }
      if (!it->is_regular_file(error) || it->path().extension() != ".py") continue;
      if (files.size() == kMaxSourceFiles) {
        throw ScenarioError(
            fmt::format("{}: more than {} Python files under the plugin directory", root_.string(), kMaxSourceFiles));
      }
      if (it->file_size(error) <= kMaxSourceBytes) files.push_back(it->path());
    }
    std::sort(files.begin(), files.end());
    NoteInputDirectory(root_.string());
    for (const fs::path& file : files) {
      const std::string text = ReadRegularFile(file.string(), "dataset source", kMaxSourceBytes);
      ScanTrainScript(text, file.string());
      for (size_t at = text.find("class "); at != std::string::npos; at = text.find("class ", at + 6)) {
        if (at != 0 && text[at - 1] != '\n') continue;
        size_t end = at + 6;
        while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_')) ++end;
        const std::string name = text.substr(at + 6, end - at - 6);
        const auto [it, added] = class_files_.emplace(name, file.string());
        if (!added && it->second != file.string()) duplicates_[name].push_back(file.string());
      }
    }
  }

  static int LineOf(const std::string& text, size_t at) {
    return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
  }

  // `text` without spaces and tabs: `runner_type = cfg.runner` and `runner_type=cfg.runner` alike.
  static std::string Squeezed(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (const char c : text) {
      if (c != ' ' && c != '\t') out.push_back(c);
    }
    return out;
  }

  void ScanTrainScript(const std::string& text, const std::string& path) {
    const std::string squeezed = Squeezed(text);
    if (strict_runner_where_.empty() && squeezed.find("runner_type=cfg.runner,") != std::string::npos) {
      strict_runner_where_ = path;
    }
    if (passes_shuffler_where_.empty() &&
        squeezed.find("shuffler_sampler=cfg.data.shuffler_sampler") != std::string::npos) {
      passes_shuffler_where_ = path;
    }
    size_t def = text.rfind("def build_dataloader(", 0) == 0 ? 0 : text.find("\ndef build_dataloader(");
    if (def == std::string::npos || builder_) return;
    if (def != 0) ++def;
    const size_t end = std::min(text.find("\ndef ", def + 1), text.size());
    const std::string_view body(text.data() + def, end - def);
    builder_ = Builder{Where(path, LineOf(text, def)),
                       body.find("InfiniteGroupEachSampleInBatchSampler") != std::string_view::npos};
  }

  const pyconfig::Module& Parsed(const std::string& path) {
    auto it = modules_.find(path);
    if (it != modules_.end()) return *it->second;
    const std::string text = ReadRegularFile(path, "dataset source", kMaxSourceBytes);
    pyconfig::CheckText(text, path, 1);
    pyconfig::LexOptions options;
    options.path = path;
    auto module = std::make_unique<pyconfig::Module>(pyconfig::Parse(text, options));
    return *modules_.emplace(path, std::move(module)).first->second;
  }

  fs::path root_;
  bool indexed_ = false;
  std::map<std::string, std::string> class_files_;  // class name -> its first file
  std::map<std::string, std::vector<std::string>> duplicates_;
  std::optional<Builder> builder_;
  std::string strict_runner_where_;
  std::string passes_shuffler_where_;
  std::map<std::string, std::unique_ptr<pyconfig::Module>> modules_;
};

const Stmt* Method(const Stmt& cls, std::string_view name) {
  for (const auto& stmt : cls.body) {
    if (stmt->kind == StmtKind::kFunctionDef && stmt->name == name) return stmt.get();
  }
  return nullptr;
}

// Calls every statement below `body` (blocks included) with `visit`.
template <typename Visit>
void Walk(const std::vector<pyconfig::StmtPtr>& body, const Visit& visit, int depth = 0) {
  if (depth > 100) return;
  for (const auto& stmt : body) {
    visit(*stmt);
    Walk(stmt->body, visit, depth + 1);
    Walk(stmt->orelse, visit, depth + 1);
    Walk(stmt->finalbody, visit, depth + 1);
    for (const auto& handler : stmt->handlers) Walk(handler.body, visit, depth + 1);
  }
}

// Whether `body` (a loop's) sets the index from self._rand_another(...) on a None.
bool RedrawsWithRandAnother(const std::vector<pyconfig::StmtPtr>& body) {
  bool found = false;
  Walk(body, [&](const Stmt& s) {
    if (s.kind == StmtKind::kAssign && EndsWith(CalleeOf(s.value.get()), "self._rand_another")) found = true;
  });
  return found;
}

bool CallsPrepareTrainData(const std::vector<pyconfig::StmtPtr>& body) {
  bool found = false;
  Walk(body, [&](const Stmt& s) {
    if (s.value != nullptr && CalleeOf(s.value.get()) == "self.prepare_train_data") found = true;
  });
  return found;
}

// What __getitem__ (or a method it calls) does with a None.
struct RetryLoop {
  enum class Kind { kNotFound, kUnbounded, kBounded, kNone } kind = Kind::kNotFound;
  std::string where;
  std::string attempts_expr;  // kBounded: the range() argument's source form
  int64_t attempts = 0;       // kBounded, when the argument is a literal or self.max_refetch + 1 with a default
  std::optional<int64_t> max_refetch_offset;  // kBounded over self.max_refetch + k: k
};

// The int default of __init__'s parameter `arg_name` (positional or keyword-only), if it has one.
std::optional<int64_t> IntDefault(const Stmt& cls, std::string_view arg_name) {
  const Stmt* init = Method(cls, "__init__");
  if (init == nullptr || init->args == nullptr) return std::nullopt;
  const auto int_constant = [](const Expr* d) -> std::optional<int64_t> {
    if (d == nullptr || d->kind != ExprKind::kConstant || d->constant.kind != pyconfig::Constant::Kind::kInt) {
      return std::nullopt;
    }
    return d->constant.int_value;
  };
  const auto& args = init->args->args;
  const auto& defaults = init->args->defaults;
  const size_t first_default = args.size() - defaults.size();
  for (size_t i = first_default; i < args.size(); ++i) {
    if (args[i].name == arg_name) return int_constant(defaults[i - first_default].get());
  }
  const auto& kwonly = init->args->kwonlyargs;
  for (size_t i = 0; i < kwonly.size() && i < init->args->kw_defaults.size(); ++i) {
    if (kwonly[i].name == arg_name) return int_constant(init->args->kw_defaults[i].get());
  }
  return std::nullopt;
}

RetryLoop FindRetryLoop(const Stmt& cls, const Stmt& method, const std::string& path, int depth) {
  RetryLoop loop;
  Walk(method.body, [&](const Stmt& s) {
    if (loop.kind != RetryLoop::Kind::kNotFound) return;
    const bool while_true = s.kind == StmtKind::kWhile && s.test != nullptr && s.test->kind == ExprKind::kConstant &&
                            s.test->constant.kind == pyconfig::Constant::Kind::kBool && s.test->constant.bool_value;
    if (while_true && RedrawsWithRandAnother(s.body)) {
      loop.kind = RetryLoop::Kind::kUnbounded;
      loop.where = Where(path, s.line);
    } else if (s.kind == StmtKind::kFor && CalleeOf(s.value.get()) == "range" && RedrawsWithRandAnother(s.body)) {
      loop.kind = RetryLoop::Kind::kBounded;
      loop.where = Where(path, s.line);
      const Expr* n = s.value->items.size() == 2 ? s.value->items[1].get() : nullptr;
      if (n != nullptr && n->kind == ExprKind::kConstant && n->constant.kind == pyconfig::Constant::Kind::kInt) {
        loop.attempts = n->constant.int_value;
        loop.attempts_expr = std::to_string(loop.attempts);
      } else if (n != nullptr && n->kind == ExprKind::kBinOp && n->text == "+" &&
                 Dotted(n->items[0].get()) == "self.max_refetch" && n->items[1]->kind == ExprKind::kConstant &&
                 n->items[1]->constant.kind == pyconfig::Constant::Kind::kInt) {
        loop.attempts_expr = "self.max_refetch + " + std::to_string(n->items[1]->constant.int_value);
        loop.max_refetch_offset = n->items[1]->constant.int_value;
        if (const auto refetch = IntDefault(cls, "max_refetch")) {
          loop.attempts = *refetch + n->items[1]->constant.int_value;
        }
      }
    }
  });
  if (loop.kind != RetryLoop::Kind::kNotFound || depth >= kMaxCallFollow) return loop;
  // A method the loop lives in, called as self.NAME(...) (Sparse4D's __getitem__ calls self._getitem).
  std::set<std::string> callees;  // each method once, so the search stays linear in the class's size
  Walk(method.body, [&](const Stmt& s) {
    for (const Expr* e : {s.value.get(), s.test.get()}) {
      const std::string callee = CalleeOf(e);
      if (callee.rfind("self.", 0) == 0 && callee != "self.prepare_train_data" && callee != "self._rand_another" &&
          callee.substr(5) != method.name) {
        callees.insert(callee.substr(5));
      }
    }
  });
  for (const std::string& name : callees) {
    if (const Stmt* called = Method(cls, name)) {
      RetryLoop inner = FindRetryLoop(cls, *called, path, depth + 1);
      if (inner.kind != RetryLoop::Kind::kNotFound) return inner;
    }
  }
  if (CallsPrepareTrainData(method.body)) {
    loop.kind = RetryLoop::Kind::kNone;
    loop.where = Where(path, method.line);
  }
  return loop;
}

// The pool of `_rand_another`'s draw, or nullopt when petrsim does not recognise it.
std::optional<ResamplePool> PoolOf(const Stmt& method) {
  std::map<std::string, const Expr*> locals;
  const Expr* returned = nullptr;
  for (const auto& stmt : method.body) {
    if (stmt->kind == StmtKind::kAssign && stmt->targets.size() == 1 && stmt->targets[0]->kind == ExprKind::kName) {
      locals[stmt->targets[0]->text] = stmt->value.get();
    } else if (stmt->kind == StmtKind::kReturn) {
      returned = stmt->value.get();
    }
  }
  if (returned == nullptr) return std::nullopt;
  const std::string callee = CalleeOf(returned);
  if (EndsWith(callee, "random.randint")) {
    const size_t n = returned->items.size();
    const bool whole = (n == 2 && IsLenSelf(returned->items[1].get())) ||
                       (n == 3 && returned->items[1]->kind == ExprKind::kConstant &&
                        returned->items[1]->constant.int_value == 0 && IsLenSelf(returned->items[2].get()));
    return whole ? std::optional(ResamplePool::kWholeDataset) : std::nullopt;
  }
  if (!EndsWith(callee, "random.choice") || returned->items.size() < 2) return std::nullopt;
  const Expr* pool = returned->items[1].get();
  if (pool->kind == ExprKind::kName && locals.count(pool->text) > 0) pool = locals[pool->text];
  if (IsLenSelf(pool) || ((EndsWith(CalleeOf(pool), "arange") || CalleeOf(pool) == "range") &&
                          pool->items.size() == 2 && IsLenSelf(pool->items[1].get()))) {
    return ResamplePool::kWholeDataset;
  }
  // np.where(<compare>)[0]
  if (pool->kind != ExprKind::kSubscript || !EndsWith(CalleeOf(pool->items[0].get()), "where")) return std::nullopt;
  const Expr* where_call = pool->items[0].get();
  if (where_call->items.size() != 2 || where_call->items[1]->kind != ExprKind::kCompare) return std::nullopt;
  const Expr* compare = where_call->items[1].get();
  if (compare->ops.size() != 1 || Dotted(compare->items[0].get()) != "self.flag") return std::nullopt;
  const Expr* right = compare->items[1].get();
  if (compare->ops[0] == "==" && right->kind == ExprKind::kSubscript && Dotted(right->items[0].get()) == "self.flag") {
    return ResamplePool::kFlagGroup;
  }
  if (compare->ops[0] == "!=" && right->kind == ExprKind::kUnaryOp && right->text == "-") {
    return ResamplePool::kWholeDataset;  // flags are never negative: every index
  }
  return std::nullopt;
}

class SourceReader {
 public:
  SourceReader(PluginSources& sources, const DatasetSourceQuery& query) : sources_(sources), query_(query) {}

  // The semantics of class `name`: its base's, then what its own code overrides.
  std::optional<DatasetSemantics> Read(const std::string& name, int depth, DatasetSourceReading* out) {
    const std::optional<ClassSource> found = sources_.Find(name);
    if (!found) return std::nullopt;
    const Stmt& cls = *found->node;
    if (depth == 0) out->class_where = Where(found->path, cls.line);
    for (const std::string& other : sources_.Duplicates(name)) {
      out->findings.push_back(fmt::format(
          "class {} is also defined in {}: read the one in {} (the first in path order)", name, other, found->path));
    }
    DatasetSemantics semantics = BaseSemantics(cls, depth, out);
    semantics.type = query_.type;
    ReadRetryLoop(cls, found->path, &semantics, out);
    ReadPool(cls, found->path, &semantics, out);
    ReadDefaults(cls, found->path, &semantics, out);
    ReadClasses(cls, found->path, &semantics, out);
    if (const Stmt* prepare = Method(cls, "prepare_train_data"))
      ReadQueueCheck(cls, *prepare, found->path, &semantics, out);
    return semantics;
  }

 private:
  DatasetSemantics BaseSemantics(const Stmt& cls, int depth, DatasetSourceReading* out) {
    for (const auto& base : cls.bases) {
      std::string base_name = Dotted(base.get());
      if (const size_t dot = base_name.rfind('.'); dot != std::string::npos) base_name = base_name.substr(dot + 1);
      if (base_name.empty() || base_name == "object") continue;
      if (depth + 1 < kMaxBaseDepth && base_name != cls.name) {
        if (auto inherited = Read(base_name, depth + 1, out)) return *inherited;
      }
      const std::string lookup = base_name == "Custom3DDataset" ? "NuScenesDataset" : base_name;
      if (const DatasetSemantics* entry = FindDatasetSemantics(lookup, query_.keys)) {
        if (out->base_entry.empty()) out->base_entry = fmt::format("{} of {}", entry->type, entry->codebase);
        DatasetSemantics copy = *entry;
        if (base_name == "Custom3DDataset") copy.default_classes.clear();  // Custom3DDataset.CLASSES is None
        return copy;
      }
    }
    const DatasetSemantics* fallback = FindDatasetSemantics("NuScenesDataset", {});
    PETRSIM_ASSERT(fallback != nullptr);
    out->findings.push_back(fmt::format(
        "{}: class {} derives from no class petrsim knows: assumed mmdet3d Custom3DDataset's retry loop, pool and "
        "defaults where its own code says nothing",
        cls.name, cls.name));
    out->base_entry = fmt::format("{} of {} (assumed)", fallback->type, fallback->codebase);
    return *fallback;
  }

  // StreamPETR's sliding window: prepare_train_data loops `for k in range(self.num_frame_losses)` over the
  // last frames of its queue and returns None when one has no GT.
  static void ReadQueueCheck(const Stmt& cls, const Stmt& prepare, const std::string& path, DatasetSemantics* s,
                             DatasetSourceReading* out) {
    const Stmt* loop = nullptr;
    Walk(prepare.body, [&](const Stmt& st) {
      if (loop == nullptr && st.kind == StmtKind::kFor && CalleeOf(st.value.get()) == "range" &&
          st.value->items.size() == 2 && Dotted(st.value->items[1].get()) == "self.num_frame_losses") {
        loop = &st;
      }
    });
    if (loop != nullptr) {
      s->queue_checks_frame_losses = true;
      s->queue_source = Where(path, loop->line);
      out->findings.push_back(fmt::format(
          "{}: prepare_train_data rejects a frame when one of the last num_frame_losses frames of its queue has no GT",
          s->queue_source));
      return;
    }
    s->queue_checks_frame_losses = false;  // the override replaces a parent's queue check, if it had one
    out->findings.push_back(fmt::format(
        "{}: {}.prepare_train_data is overridden: petrsim reads no None condition from it beyond the GT check "
        "(filter_empty_gt) it models for every dataset",
        Where(path, prepare.line), cls.name));
  }

  void ReadRetryLoop(const Stmt& cls, const std::string& path, DatasetSemantics* s, DatasetSourceReading* out) {
    const Stmt* getitem = Method(cls, "__getitem__");
    if (getitem == nullptr) return;
    const RetryLoop loop = FindRetryLoop(cls, *getitem, path, 0);
    switch (loop.kind) {
      case RetryLoop::Kind::kUnbounded:
        s->pool_source = loop.where;
        s->bounded_attempts = 0;
        out->findings.push_back(
            fmt::format("{}: __getitem__ retries without a bound (while True ... "
                        "self._rand_another)",
                        loop.where));
        break;
      case RetryLoop::Kind::kBounded:
        s->pool_source = loop.where;
        s->bounded_attempts = loop.attempts;
        s->bounded_by_max_refetch = loop.max_refetch_offset.has_value();
        s->max_refetch_offset = loop.max_refetch_offset.value_or(0);
        out->findings.push_back(
            loop.attempts > 0
                ? fmt::format("{}: __getitem__ retries at most {} times (range({})), then raises", loop.where,
                              loop.attempts, loop.attempts_expr)
                : fmt::format("{}: __getitem__ retries a bounded number of times, range({}), whose value petrsim "
                              "cannot read: assumed unbounded",
                              loop.where, loop.attempts_expr.empty() ? "..." : loop.attempts_expr));
        break;
      case RetryLoop::Kind::kNone:
        s->pool = ResamplePool::kNoResample;
        s->pool_source = loop.where;
        out->findings.push_back(
            fmt::format("{}: __getitem__ returns prepare_train_data's result without a retry loop", loop.where));
        break;
      case RetryLoop::Kind::kNotFound:
        out->findings.push_back(
            fmt::format("{}: __getitem__ is not a retry loop petrsim recognises: assumed the base's ({})",
                        Where(path, getitem->line), s->pool_source));
        break;
    }
  }

  void ReadPool(const Stmt& cls, const std::string& path, DatasetSemantics* s, DatasetSourceReading* out) {
    const Stmt* method = Method(cls, "_rand_another");
    if (method == nullptr || s->pool == ResamplePool::kNoResample) return;
    const auto pool = PoolOf(*method);
    if (!pool) {
      out->findings.push_back(fmt::format(
          "{}: _rand_another's pool is not one petrsim recognises (np.random.choice over the group's indices or "
          "over len(self), np.random.randint(0, len(self))): assumed {}",
          Where(path, method->line),
          s->pool == ResamplePool::kFlagGroup ? "the frame's own group" : "the whole dataset"));
      return;
    }
    s->pool = *pool;
    s->pool_source = Where(path, method->line);
    out->findings.push_back(
        fmt::format("{}: _rand_another draws from {}", s->pool_source,
                    *pool == ResamplePool::kFlagGroup ? "the frame's own group flag" : "the whole dataset"));
  }

  void ReadDefaults(const Stmt& cls, const std::string& path, DatasetSemantics* s, DatasetSourceReading* out) {
    const Stmt* init = Method(cls, "__init__");
    if (init == nullptr || init->args == nullptr) return;
    const auto& args = init->args->args;
    const auto& defaults = init->args->defaults;
    const size_t first_default = args.size() - defaults.size();
    bool has_group_flag_method = false;
    for (const auto& stmt : cls.body) {
      has_group_flag_method |=
          stmt->kind == StmtKind::kFunctionDef && stmt->name.find("group_flag") != std::string::npos;
    }
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& name = args[i].name;
      const Expr* d = i >= first_default ? defaults[i - first_default].get() : nullptr;
      const bool is_bool =
          d != nullptr && d->kind == ExprKind::kConstant && d->constant.kind == pyconfig::Constant::Kind::kBool;
      const std::string where = Where(path, args[i].line);
      if (name == "filter_empty_gt" && is_bool) {
        s->filter_empty_gt_default = d->constant.bool_value;
        s->filter_empty_gt_source = where;
      } else if (name == "use_valid_flag" && is_bool) {
        s->use_valid_flag_default = d->constant.bool_value;
        s->use_valid_flag_source = where;
      } else if ((name == "seq_mode" || name == "with_seq_flag") && has_group_flag_method) {
        s->flags = name == "seq_mode" ? GroupFlags::kSeqModeSplit : GroupFlags::kSeqFlagSplit;
        s->flags_source = where;
        out->findings.push_back(
            fmt::format("{}: {} with a sequence-flag method: chunked sequence groups", where, name));
      }
    }
  }

  void ReadClasses(const Stmt& cls, const std::string& path, DatasetSemantics* s, DatasetSourceReading* out) {
    for (const auto& stmt : cls.body) {
      if (stmt->kind != StmtKind::kAssign || stmt->targets.size() != 1 || Dotted(stmt->targets[0].get()) != "CLASSES") {
        continue;
      }
      const Expr* value = stmt->value.get();
      std::vector<std::string> names;
      const bool literal =
          (value->kind == ExprKind::kTuple || value->kind == ExprKind::kList) &&
          std::all_of(value->items.begin(), value->items.end(), [&](const auto& item) {
            if (item->kind != ExprKind::kConstant || item->constant.kind != pyconfig::Constant::Kind::kString) {
              return false;
            }
            names.push_back(item->constant.text);
            return true;
          });
      if (literal) {
        s->default_classes = names;
        s->default_classes_source = Where(path, stmt->line);
      } else {
        s->default_classes.clear();
        s->default_classes_source =
            fmt::format("{} (CLASSES is not a literal list petrsim reads)", Where(path, stmt->line));
        out->findings.push_back(
            fmt::format("{}: CLASSES is computed: set classes=[...] in the config", Where(path, stmt->line)));
      }
    }
  }

  PluginSources& sources_;
  const DatasetSourceQuery& query_;
};

// The checkout's root: the nearest directory at or above the config's that holds plugin_dir.
std::optional<fs::path> PluginRoot(const DatasetSourceQuery& query) {
  std::error_code error;
  fs::path dir = fs::absolute(query.config_path, error).parent_path();
  for (int i = 0; i < kMaxRootSearch && !dir.empty(); ++i) {
    const fs::path candidate = dir / query.plugin_dir;
    if (fs::is_directory(candidate, error)) return candidate;
    if (fs::exists(dir / ".git", error)) break;  // the checkout's root: never look outside it
    if (dir == dir.parent_path()) break;
    dir = dir.parent_path();
  }
  return std::nullopt;
}

// The codebase's train script, from the plugin's own build_dataloader and the train loop that calls it (the
// codebases that train through their plugin define both; mmdet3d's train_model uses mmdet's builder).
void ReadTrainScript(PluginSources& sources, DatasetSourceReading* out) {
  const auto& builder = sources.builder();
  DatasetSemantics& s = out->semantics;
  if (!builder) {
    s.script = TrainScript::kMmdet3dTrainModel;
    s.script_source = "the plugin defines no build_dataloader: mmdet3d's train_model and mmdet's build_dataloader";
    out->findings.push_back(s.script_source);
    return;
  }
  // What the train loop passes decides, not the builder's signature (Sparse4D's builder takes a
  // shuffler_sampler parameter its train loop never passes).
  const bool passes_shuffler = !sources.passes_shuffler_where().empty();
  if (passes_shuffler && builder->infinite_batch_sampler) {
    s.script = TrainScript::kStreamPetrCustomTrain;
  } else if (passes_shuffler) {
    s.script = TrainScript::kBevformerCustomTrain;
  } else if (builder->infinite_batch_sampler) {
    s.script = TrainScript::kSparse4dCustomTrain;
  } else {
    s.script = TrainScript::kMmdet3dTrainModel;
    out->findings.push_back(fmt::format(
        "{}: the plugin's build_dataloader builds no InfiniteGroupEachSampleInBatchSampler and no train loop passes "
        "it data.shuffler_sampler: assumed mmdet's samplers",
        builder->where));
  }
  s.script_source = builder->where;
  std::string finding =
      fmt::format("{}: the plugin's build_dataloader{}", builder->where,
                  builder->infinite_batch_sampler ? " builds InfiniteGroupEachSampleInBatchSampler" : "");
  if (passes_shuffler) {
    finding += fmt::format("; {} passes it data.shuffler_sampler", sources.passes_shuffler_where());
  }
  if (!sources.strict_runner_where().empty()) {
    finding += fmt::format("; {} passes cfg.runner on (a config needs `runner`)", sources.strict_runner_where());
  } else if (s.script == TrainScript::kStreamPetrCustomTrain) {
    finding += "; no train loop passes cfg.runner itself: petrsim still requires `runner`, as StreamPETR's does";
  }
  out->findings.push_back(finding);
}

}  // namespace

bool PluginDirectoryFound(const DatasetSourceQuery& query) {
  return !query.plugin_dir.empty() && !fs::path(query.plugin_dir).is_absolute() && PluginRoot(query).has_value();
}

std::optional<DatasetSourceReading> ReadDatasetSource(const DatasetSourceQuery& query) {
  if (query.plugin_dir.empty() || fs::path(query.plugin_dir).is_absolute()) return std::nullopt;
  const std::optional<fs::path> root = PluginRoot(query);
  if (!root) return std::nullopt;
  PluginSources sources(*root);
  DatasetSourceReading out;
  SourceReader reader(sources, query);
  std::optional<DatasetSemantics> semantics = reader.Read(query.type, 0, &out);
  if (!semantics) return std::nullopt;
  out.semantics = std::move(*semantics);
  ReadTrainScript(sources, &out);
  out.semantics.codebase = fmt::format("{} (read from its source, {})", query.type, out.class_where);
  return out;
}

}  // namespace petrsim
