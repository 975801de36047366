// libFuzzer target: arbitrary bytes as an mmdet3d info file (the importers' numpy mode of the
// pickle reader, record mode, then the info checks), with and without the valid flag. Any input
// must end in an imported sub-dataset or a ScenarioError: no crash, no hang, no unbounded
// allocation. And record mode's skip of dropped values (PickleOptions::skip_dropped) against
// building every value: a file that parses without the skip parses with it to the same tree. And
// record mode's hand-over of records (PickleOptions::on_record) against the record list: the same
// records in the same order, read while the machine reuses their nodes (what ASan checks). And
// record mode's one pass against the memo scan first (PickleOptions::memo_scan_first): the same
// tree where both parse; an error of the one pass is the scan's, or comes after the scan's (the one
// pass builds no value the scan skips, and may skip more: errors in their content are not read).
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "formats/pickle/pickle.h"
#include "importers/mmdet3d_infos.h"

namespace {

// Whether two trees are the same, compared pair by pair up to a budget (a list may contain itself,
// so the walk is bounded rather than exhaustive).
bool SameTree(const petrsim::PickleNode& a, const petrsim::PickleNode& b) {
  std::vector<std::pair<const petrsim::PickleNode*, const petrsim::PickleNode*>> pending = {{&a, &b}};
  for (int budget = 1 << 20; !pending.empty() && budget > 0; --budget) {
    const auto [x, y] = pending.back();
    pending.pop_back();
    if (x->type != y->type || x->text != y->text || x->integer != y->integer || x->boolean != y->boolean ||
        std::bit_cast<uint64_t>(x->real) != std::bit_cast<uint64_t>(y->real) || x->shape != y->shape ||
        x->dtype.kind != y->dtype.kind || x->dtype.itemsize != y->dtype.itemsize ||
        x->items.size() != y->items.size() || x->entries.size() != y->entries.size()) {
      return false;
    }
    for (size_t i = 0; i < x->items.size(); ++i) pending.emplace_back(x->items[i], y->items[i]);
    for (size_t i = 0; i < x->entries.size(); ++i) {
      pending.emplace_back(x->entries[i].first, y->entries[i].first);
      pending.emplace_back(x->entries[i].second, y->entries[i].second);
    }
  }
  return true;
}

// A bounded text of a value (type, scalars, children), to compare a record handed over with the list's.
void Fingerprint(const petrsim::PickleNode& node, std::string& out, int& budget) {
  if (--budget < 0) return;
  out += std::to_string(static_cast<int>(node.type)) + ':' + node.text + ':' + std::to_string(node.integer) + ':' +
         std::to_string(std::bit_cast<uint64_t>(node.real)) + (node.boolean ? "T" : "F") + '[';
  for (const petrsim::PickleNode* item : node.items) Fingerprint(*item, out, budget);
  for (const auto& [key, value] : node.entries) {
    Fingerprint(*key, out, budget);
    Fingerprint(*value, out, budget);
  }
  out += ']';
}
std::string Fingerprint(const petrsim::PickleNode& node) {
  std::string out;
  int budget = 4096;
  Fingerprint(node, out, budget);
  return out;
}

// The same parse with on_record: it must succeed too, and where the records went to one list (a
// single run of indices 0, 1, ...) of the size of the tree's "infos", they must be its items. A hand-made file that
// changes a record through the memo after it was added is refused (pickle.h), the one way the two may differ.
void CompareStream(std::string_view bytes, petrsim::PickleOptions options, const petrsim::PickleDocument& built) {
  std::vector<std::string> handed;
  bool one_run = true;
  options.on_record = [&](const petrsim::PickleNode& record, uint64_t index) {
    one_run = one_run && index == handed.size();
    handed.push_back(Fingerprint(record));
  };
  try {
    petrsim::ParsePickle(bytes, "fuzz", options);  // must not throw, but for the one refusal of pickle.h:
  } catch (const petrsim::PickleError& error) {
    // a hand-made file that changes a record after it was added to its list
    if (std::string_view(error.what()).find(petrsim::kRecordChangedAfterHandOver) == std::string_view::npos) {
      throw;
    }
    return;
  }
  const petrsim::PickleNode* list = built.root->Get("infos");
  if (!one_run || list == nullptr || list->type != petrsim::PickleNode::Type::kList ||
      list->items.size() != handed.size()) {
    return;
  }
  for (size_t i = 0; i < handed.size(); ++i) {
    if (Fingerprint(*list->items[i]) != handed[i]) std::abort();
  }
}

// A parse's tree as text, or its error and offset.
struct Outcome {
  std::string tree;
  std::string error;
  uint64_t offset = 0;
};
Outcome Parse(std::string_view bytes, petrsim::PickleOptions options, bool stream) {
  Outcome outcome;
  if (stream) {
    options.on_record = [&](const petrsim::PickleNode& record, uint64_t index) {
      outcome.tree += std::to_string(index) + '=' + Fingerprint(record) + '\n';
    };
  }
  try {
    const petrsim::PickleDocument doc = petrsim::ParsePickle(bytes, "fuzz", options);
    outcome.tree += Fingerprint(*doc.root);
  } catch (const petrsim::PickleError& error) {
    outcome.error = error.what();
    outcome.offset = error.offset();
  }
  return outcome;
}

// With and without on_record (then the records handed over, in order, and the tree).
void CompareOnePass(std::string_view bytes, petrsim::PickleOptions options) {
  for (const bool stream : {false, true}) {
    options.memo_scan_first = true;
    const Outcome scanned = Parse(bytes, options, stream);
    options.memo_scan_first = false;
    const Outcome one = Parse(bytes, options, stream);
    if (one.error.empty() && scanned.error.empty() && one.tree != scanned.tree) std::abort();        // another tree
    if (!one.error.empty() && (scanned.error.empty() || scanned.offset > one.offset)) std::abort();  // own error
    if (!one.error.empty() && scanned.offset == one.offset && scanned.error != one.error) std::abort();
  }
}

void CompareSkip(std::string_view bytes) {
  petrsim::PickleOptions options;
  options.numpy = true;
  options.salvage = false;
  options.record_lists = {"infos"};
  options.record_keys = {"token", "gt_boxes", "gt_names"};
  options.record_length_keys = {"sweeps"};
  options.skip_dropped = true;  // the one pass needs it
  CompareOnePass(bytes, options);
  options.skip_dropped = false;
  petrsim::PickleDocument built;
  try {
    built = petrsim::ParsePickle(bytes, "fuzz", options);
  } catch (const petrsim::ScenarioError&) {
    // Errors in a dropped value's content are not read with the skip: it may parse.
    options.skip_dropped = true;
    try {
      petrsim::ParsePickle(bytes, "fuzz", options);
    } catch (const petrsim::ScenarioError&) {
    }
    return;
  }
  CompareStream(bytes, options, built);
  options.skip_dropped = true;
  const petrsim::PickleDocument skipped = petrsim::ParsePickle(bytes, "fuzz", options);  // must not throw
  if (!SameTree(*built.root, *skipped.root)) std::abort();
  if (!skipped.skip_restarted) CompareStream(bytes, options, skipped);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  for (const bool valid_flag : {true, false}) {
    petrsim::Mmdet3dInfosOptions options;
    options.use_valid_flag = valid_flag;
    try {
      const petrsim::ImportedSubDataset imported = petrsim::ParseMmdet3dInfos(bytes, "fuzz", options);
      (void)imported;
    } catch (const petrsim::ScenarioError&) {
    }
  }
  CompareSkip(bytes);
  return 0;
}
