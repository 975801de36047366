// The pickle machine's record mode (PickleOptions::record_lists, pickle_internal.h): which values
// are records and what a record keeps, the hand-over of records, and the copying collection of
// the young nodes. Its memo: pickle_one_pass.cc, and pickle_memo_scan.cc's first pass.
#include "formats/pickle/pickle_internal.h"

namespace petrsim::pickle_internal {

// At EMPTY_LIST: whether the new list is the value of a record_lists key of the top-level dict
// (stack: the dict, then its MARK and keys and values, the key last; or the dict and the key),
// or, with record_top_list, the top-level value itself.
bool Machine::IsRecordListKey() const {
  if (replaying_) return false;  // a dropped value, inside a record where it was (Replay)
  if (options_.record_top_list && stack_.empty() && marks_.empty()) return true;  // the top-level list
  if (stack_.size() < 2 || stack_[0]->type != PickleNode::Type::kDict) return false;
  const PickleNode* key = stack_.back();
  if (key->type != PickleNode::Type::kString) return false;
  const size_t key_at = stack_.size() - 1;
  const bool key_position =
      (marks_.empty() && key_at == 1) || (marks_.size() == 1 && marks_[0] == 1 && (key_at - 1) % 2 == 0);
  if (!key_position) return false;
  return std::find(options_.record_lists.begin(), options_.record_lists.end(), key->text) !=
         options_.record_lists.end();
}
bool Machine::IsRecordList(const PickleNode* node) const {
  return std::find(record_lists_.begin(), record_lists_.end(), node) != record_lists_.end();
}
// Whether the dict at stack position `at` is an item being added to a record list: right above
// the list (APPEND), or anywhere above the list's MARK (APPENDS).
bool Machine::IsRecordPosition(size_t at) const {
  if (replaying_) return false;  // a dropped value holds no record (Replay)
  if (record_lists_.empty() || stack_[at]->type != PickleNode::Type::kDict) return false;
  if (at >= 1 && IsRecordList(stack_[at - 1])) return true;
  return !marks_.empty() && marks_.back() >= 1 && marks_.back() <= at && IsRecordList(stack_[marks_.back() - 1]);
}
// The value a record keeps for `key`.
PickleNode* Machine::Prune(PickleNode* key, PickleNode* value) {
  if (key->type != PickleNode::Type::kString) return dropped_;
  const auto is = [&](const std::vector<std::string>& keys) {
    return std::find(keys.begin(), keys.end(), key->text) != keys.end();
  };
  if (is(options_.record_keys)) return value;
  if (is(options_.record_length_keys)) {
    if (!value->is_sequence()) return value;  // kept as it is, so the caller can say what it is
    if (value->type == PickleNode::Type::kList && (value->items.empty() || value->items[0] == dropped_)) {
      return value;  // already its length only (the skip made it)
    }
    ChargeCopy(value->items.size() * sizeof(PickleNode*), "a sweeps list's length");
    PickleNode* length_only = New(PickleNode::Type::kList);
    length_only->items.assign(value->items.size(), dropped_);
    return length_only;
  }
  return dropped_;
}
// APPEND and APPENDS.
void Machine::AddItems(PickleNode* list, PickleNode* const* first, PickleNode* const* last) {
  Changed(list);
  if (!streaming_ || !IsRecordList(list)) {
    list->items.insert(list->items.end(), first, last);
    CheckRecordCount(list);
    return;
  }
  // The limit before any of these records is handed over (an error halfway would leave the stack half added).
  CheckRecordCount(list, static_cast<uint64_t>(last - first));
  for (; first != last; ++first) {
    const uint64_t index = list->items.size();
    list->items.push_back(dropped_);  // the list keeps its length, not the record
    CheckRecordCount(list);           // before the caller reads a record beyond the limit
    options_.on_record(**first, index);
    MarkHanded(*first);
  }
  collect_pending_ = true;  // the records handed over are garbage now, and the pool free again
}
// Every node of a handed record is marked, once (shared values and cycles are met again, marked).
void Machine::MarkHanded(PickleNode* record) {
  std::vector<PickleNode*> to_mark{record};
  while (!to_mark.empty()) {
    PickleNode* node = to_mark.back();
    to_mark.pop_back();
    // A kept value may lead back to the record list itself (a cycle): the list still grows, it is not the record's.
    if (node->handed || node == dropped_ || IsRecordList(node)) continue;
    node->handed = true;
    to_mark.insert(to_mark.end(), node->items.begin(), node->items.end());
    for (const auto& [key, value] : node->entries) {
      to_mark.push_back(key);
      to_mark.push_back(value);
    }
  }
}
// The values above the lowest record list on the stack are its records to come (or parts of them).
size_t Machine::RecordRegion() const {
  for (size_t i = 1; i < stack_.size(); ++i) {
    if (IsRecordList(stack_[i - 1])) return i;
  }
  return stack_.size();
}
// No record waits on the stack: the pool's nodes are garbage, unless something else points to them.
void Machine::ReleasePool() {
  if (pool_escaped_) {
    for (size_t i = 0; i < pool_used_; ++i) {
      pool_set_.erase(pool_[i].get());
      doc_.arena.push_back(std::move(pool_[i]));
    }
    pool_.erase(pool_.begin(), pool_.begin() + static_cast<std::ptrdiff_t>(pool_used_));
    pool_escaped_ = false;
  }
  pool_used_ = 0;
}
// The old copy of a young node (made once, in the pool or the document's arena), or the node
// itself when old. A reference from outside the pool into it marks the pool escaped.
void Machine::Forward(PickleNode*& node, bool to_pool) {
  if (!IsYoung(node)) {
    if (streaming_ && !to_pool && IsPool(node)) pool_escaped_ = true;
    return;
  }
  const size_t index = static_cast<size_t>(node - slab_.data());
  PETRSIM_ASSERT(index < slab_used_);  // a young node reachable now was made since the last collection
  if (forwarded_[index] == nullptr) {
    PickleNode* old = to_pool ? PoolNode() : OldNode();
    *old = *node;  // a copy: the slab node keeps its capacity for reuse
    forwarded_[index] = old;
    (to_pool ? pool_scan_ : to_scan_).push_back(old);
  } else if (streaming_ && !to_pool && IsPool(forwarded_[index])) {
    pool_escaped_ = true;
  }
  node = forwarded_[index];
  PETRSIM_ASSERT(!IsYoung(node));
}
// The children old containers gained since the last collection: those of the pool's or of the arena's.
void Machine::ForwardChanged(bool pool) {
  for (const Remembered& changed : remembered_) {
    if (streaming_ && IsPool(changed.node) != pool) continue;
    for (size_t i = changed.items_from; i < changed.node->items.size(); ++i) Forward(changed.node->items[i], pool);
    for (size_t i = changed.entries_from; i < changed.node->entries.size(); ++i) {
      Forward(changed.node->entries[i].first, pool);
      Forward(changed.node->entries[i].second, pool);
    }
  }
  std::vector<PickleNode*>& scan = pool ? pool_scan_ : to_scan_;
  while (!scan.empty()) {
    PickleNode* node = scan.back();
    scan.pop_back();
    for (PickleNode*& item : node->items) Forward(item, pool);
    for (auto& [key, value] : node->entries) {
      Forward(key, pool);
      Forward(value, pool);
    }
  }
}
// Between opcodes (nothing is held outside the stack and the memo then).
void Machine::Collect() {
  collecting_ = true;
  // Only what changed since the last collection can point into the slab: the stack above the
  // part that stayed, the memo entries stored since, the containers that gained children. The
  // arena's roots first, so that what they share with a waiting record is the arena's.
  const size_t region = streaming_ ? RecordRegion() : stack_.size();
  const size_t stayed = std::min(stack_old_, stack_.size());
  for (const uint64_t index : young_memo_) {
    PickleNode** node = memo_.Find(index);
    if (node != nullptr && *node != nullptr) Forward(*node);  // (a value not kept since: none)
  }
  young_memo_.clear();
  last_str_ = nullptr;  // its slab slot is reused from here
  for (PickleNode*& node : record_lists_) Forward(node);
  for (size_t i = stayed; i < std::min(region, stack_.size()); ++i) Forward(stack_[i]);
  ForwardChanged(false);
  if (streaming_) {
    for (size_t i = std::max(stayed, region); i < stack_.size(); ++i) Forward(stack_[i], true);
    ForwardChanged(true);
    if (region >= stack_.size()) ReleasePool();
  }
  stack_old_ = stack_.size();
  std::fill(forwarded_.begin(), forwarded_.begin() + static_cast<std::ptrdiff_t>(slab_used_), nullptr);
  slab_used_ = 0;
  remembered_.clear();
  collect_pending_ = false;
  collecting_ = false;
}
// Machine::Salvage with records: the records waiting for their APPENDS are handed over and a half-built record
// pruned (Salvage does both in record mode), then the young nodes the document keeps are forwarded (the slab dies with
// the machine).
PickleNode* Machine::SalvageRecords() {
  if (collecting_ || stack_.empty()) return nullptr;
  Salvage();
  if (stack_.empty()) return nullptr;
  stack_.erase(stack_.begin() + 1, stack_.end());  // what Salvage returns; the rest dies with the machine
  stack_old_ = 0;
  Collect();
  return stack_.front();
}

}  // namespace petrsim::pickle_internal
