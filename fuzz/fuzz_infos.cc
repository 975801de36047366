// libFuzzer target: arbitrary bytes as an mmdet3d info file (the importers' numpy mode of the
// pickle reader, record mode, then the info checks), with and without the valid flag. Any input
// must end in an imported sub-dataset or a ScenarioError: no crash, no hang, no unbounded
// allocation. And record mode's skip of dropped values (PickleOptions::skip_dropped) against
// building every value: a file that parses without the skip parses with it to the same tree.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
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

void CompareSkip(std::string_view bytes) {
  petrsim::PickleOptions options;
  options.numpy = true;
  options.salvage = false;
  options.record_lists = {"infos"};
  options.record_keys = {"token", "gt_boxes", "gt_names"};
  options.record_length_keys = {"sweeps"};
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
  options.skip_dropped = true;
  const petrsim::PickleDocument skipped = petrsim::ParsePickle(bytes, "fuzz", options);  // must not throw
  if (!SameTree(*built.root, *skipped.root)) std::abort();
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
