// The strict pickle reader (plain data, and numpy arrays when asked); see pickle.h. This file
// holds the nodes (lookup, type names, DescribePickleValue) and ParsePickle, which runs the pickle
// machine of pickle_internal.h.
#include "formats/pickle/pickle.h"

#include <fmt/format.h>

#include "formats/pickle/pickle_internal.h"

namespace petrsim {
namespace pickle_internal {

// A name from the file, safe to print: printable ASCII, at most 80 characters.
std::string Printable(std::string_view text) {
  std::string out;
  for (const char c : text.substr(0, 80)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out.push_back(c);
    } else {
      out += fmt::format("\\x{:02x}", u);
    }
  }
  if (text.size() > 80) out += "...";
  return out;
}

}  // namespace pickle_internal

using pickle_internal::Machine;
using pickle_internal::Printable;

const PickleNode* PickleNode::Get(std::string_view key) const {
  if (type != Type::kDict) return nullptr;
  const PickleNode* found = nullptr;
  for (const auto& [k, v] : entries) {
    if (k->type == Type::kString && k->text == key) found = v;
  }
  return found;
}

std::string PickleNode::TypeName() const {
  switch (type) {
    case Type::kNone:
      return "None";
    case Type::kBool:
      return "bool";
    case Type::kInt:
      return "int";
    case Type::kFloat:
      return "float";
    case Type::kString:
      return "str";
    case Type::kBytes:
      return "bytes";
    case Type::kList:
      return "list";
    case Type::kTuple:
      return "tuple";
    case Type::kDict:
      return "dict";
    case Type::kNumpyArray:
      return "numpy.ndarray";
    case Type::kNumpyScalar:
      return "numpy scalar";
    case Type::kNumpyDtype:
      return "numpy.dtype";
    case Type::kGlobal:
      return "global " + text;
    case Type::kOpaque:
      return "object of " + text;
    case Type::kDropped:
      return "dropped value";
  }
  return "?";
}

std::string NumpyDtype::Name() const {
  switch (kind) {
    case 'b':
      return "|b1";
    case 'O':
      return "|O";
    case 'S':
      return fmt::format("|S{}", itemsize);
    case 'U':
      return fmt::format("<U{}", itemsize / 4);
    case 'i':
    case 'u':
    case 'f':
      return itemsize == 1 ? fmt::format("|{}1", kind) : fmt::format("<{}{}", kind, itemsize);
    default:
      return "(no dtype)";
  }
}

std::string DescribePickleValue(const PickleNode& node) {
  auto dtype_name = [](const NumpyDtype& dtype) -> std::string {
    switch (dtype.kind) {
      case 'b':
        return "bool";
      case 'i':
        return fmt::format("int{}", dtype.itemsize * 8);
      case 'u':
        return fmt::format("uint{}", dtype.itemsize * 8);
      case 'f':
        return fmt::format("float{}", dtype.itemsize * 8);
      case 'U':
        return fmt::format("str (<U{})", dtype.itemsize / 4);
      case 'S':
        return fmt::format("bytes (|S{})", dtype.itemsize);
      case 'O':
        return "object";
      default:
        return "untyped";
    }
  };
  switch (node.type) {
    case PickleNode::Type::kNumpyArray: {
      std::string shape = "(";
      for (size_t i = 0; i < node.shape.size(); ++i) shape += fmt::format("{}{}", i ? ", " : "", node.shape[i]);
      shape += node.shape.size() == 1 ? ",)" : ")";
      return fmt::format("{} array of shape {}", dtype_name(node.dtype), shape);
    }
    case PickleNode::Type::kNumpyScalar:
      return fmt::format("numpy {} scalar", dtype_name(node.dtype));
    case PickleNode::Type::kInt:
      return fmt::format("int {}", node.integer);
    case PickleNode::Type::kString:
      return fmt::format("str '{}'", Printable(node.text));
    case PickleNode::Type::kList:
      return fmt::format("list of {} items", node.items.size());
    case PickleNode::Type::kTuple:
      return fmt::format("tuple of {} items", node.items.size());
    default:
      return node.TypeName();
  }
}

PickleDocument ParsePickle(std::string_view bytes, const std::string& display_name, bool salvage) {
  PickleOptions options;
  options.salvage = salvage;
  return ParsePickle(bytes, display_name, options);
}

namespace {

PickleDocument RunMachine(std::string_view bytes, const std::string& display_name, const PickleOptions& options) {
  PickleDocument doc;
  Machine machine(bytes, display_name, doc, options);
  try {
    doc.root = machine.Run();

  } catch (const PickleError& error) {
    // Record mode's young nodes die with the machine: only with on_record does it salvage, the
    // records handed over and the young nodes kept forwarded (SalvageRecords).
    PickleNode* root = nullptr;
    if (options.salvage && options.record_lists.empty()) root = machine.Salvage();
    if (options.salvage && !options.record_lists.empty() && options.on_record) root = machine.SalvageRecords();
    if (root == nullptr || (root->type != PickleNode::Type::kDict && root->type != PickleNode::Type::kList)) {
      throw;
    }
    doc.root = root;
    doc.partial = error.what();
    doc.partial_offset = error.offset();
  }
  return doc;
}

}  // namespace

PickleDocument ParsePickle(std::string_view bytes, const std::string& display_name, const PickleOptions& options) {
  // A read again starts from the file's start. The records before the point where the earlier
  // read stopped read the same either way (a skip only steps over values their records drop, and
  // the one pass's memo gives what the scan's gives, or stops the read), so they are not handed
  // over twice.
  uint64_t handed = 0;  // records handed to on_record so far, by all the reads
  PickleOptions read = options;
  bool skip_restarted = false;
  bool memo_rescanned = false;
  for (;;) {
    PickleOptions attempt = read;
    uint64_t seen = 0;
    if (options.on_record) {
      attempt.on_record = [&](const PickleNode& record, uint64_t index) {
        if (seen++ < handed) return;
        ++handed;
        options.on_record(record, index);
      };
    }
    try {
      PickleDocument doc = RunMachine(bytes, display_name, attempt);
      doc.skip_restarted = skip_restarted;
      doc.memo_rescanned = memo_rescanned;
      return doc;
    } catch (const pickle_internal::MemoNotKept&) {
      // The file read back a memoized value the one pass had not kept (not one of Python's info files).
      PETRSIM_ASSERT(!read.memo_scan_first);
      read.memo_scan_first = true;
      memo_rescanned = true;
    } catch (const pickle_internal::SkipMispredicted&) {
      // A hand-made file moved a value record mode had skipped: read it again, building every value. The
      // misprediction shows before its record is complete.
      PETRSIM_ASSERT(read.skip_dropped);
      read.skip_dropped = false;
      skip_restarted = true;
    }
  }
}

}  // namespace petrsim
