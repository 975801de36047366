// Reading Flight Recorder dumps: the format by its first byte, a pickle entry by entry (or as one tree), a JSON dump
// as its text comes (flight_recorder_json.cc); see flight_recorder.h.
#include "formats/flight_recorder/flight_recorder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>

#include <fmt/format.h>

#include "base/assert.h"
#include "base/error.h"
#include "base/file_io.h"
#include "formats/flight_recorder/flight_recorder_internal.h"
#include "formats/pickle/pickle.h"

namespace petrsim {

using flight_recorder_internal::Converter;
using flight_recorder_internal::ParseJsonDump;
using Type = PickleNode::Type;

namespace {

bool RankFromFileName(const std::string& path, uint32_t& rank) {
  const std::string name = std::filesystem::path(path).filename().string();
  size_t end = name.size();
  if (end >= 5 && name.compare(end - 5, 5, ".json") == 0) end -= 5;
  size_t begin = end;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(name[begin - 1]))) --begin;
  if (begin == end || end - begin > 7) return false;
  if (std::stoul(name.substr(begin, end - begin)) >= (1ul << 20)) return false;
  rank = static_cast<uint32_t>(std::stoul(name.substr(begin, end - begin)));
  return true;
}

char FirstByte(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char c = 0;
  while (in.get(c)) {
    if (c != ' ' && c != '\n' && c != '\t' && c != '\r') return c;
  }
  return 0;
}

}  // namespace

bool LooksLikeFlightRecorderDump(const std::string& path) {
  const char c = FirstByte(path);
  return static_cast<uint8_t>(c) == 0x80 || c == '{';
}

namespace {

// The keys of an entry the converter reads (ConvertEntry): a streamed pickle keeps only these of each entry.
const std::vector<std::string> kEntryKeys = {
    "record_id",    "pg_id",          "process_group",   "collective_seq_id", "seq_id",       "p2p_seq_id",
    "op_id",        "profiling_name", "time_created_ns", "input_sizes",       "output_sizes", "sizes",
    "input_dtypes", "output_dtypes",  "state",           "timeout_ms",        "is_p2p"};

// Whether a pickle's top level is a list (a bare-list dump) or a dict, from its first opcodes (PROTO, FRAME, then
// EMPTY_LIST or EMPTY_DICT, as PyTorch's pickler writes them); nothing when they say neither.
std::optional<bool> PickleTopIsList(std::string_view bytes) {
  size_t at = 0;
  if (at + 2 <= bytes.size() && static_cast<uint8_t>(bytes[at]) == 0x80) at += 2;  // PROTO n
  if (at < bytes.size() && static_cast<uint8_t>(bytes[at]) == 0x95) at += 9;       // FRAME, 8-byte length
  if (at >= bytes.size()) return std::nullopt;
  if (bytes[at] == ']') return true;
  if (bytes[at] == '}') return false;
  return std::nullopt;
}

// Whether the entries were all handed over, and only they: the top level is what its first opcode said, and its
// entries (the top level itself, or its 'entries') are the one record list, each item handed (kDropped). Not so for a
// hand-made layout (a top-level value popped and replaced, entries in a tuple or a dict, a second entries list, a
// record changed after it was added): the whole tree is read then.
bool HandedEveryEntry(const PickleDocument& doc, bool top_list, uint64_t handed) {
  if ((doc.root->type == Type::kList) != top_list) return false;
  if (doc.partial && doc.partial->find(kRecordChangedAfterHandOver) != std::string::npos) {
    return false;
  }
  const PickleNode* entries = top_list ? doc.root : doc.root->type == Type::kDict ? doc.root->Get("entries") : nullptr;
  if (entries == nullptr) return handed == 0;
  return entries->type == Type::kList && entries->items.size() == handed &&
         std::all_of(entries->items.begin(), entries->items.end(),
                     [](const PickleNode* item) { return item->type == Type::kDropped; });
}

// A pickle dump read entry by entry (PickleOptions::on_record): each entry converted as the pickle machine adds it
// to the list, and its nodes reused, so that memory follows one batch of entries, not the dump (a 1 M-entry dump
// built a tree of 3.46 GB). As in a JSON dump, an entry's error waits for the top level; and, as tree mode reads a
// cut dump, an incomplete last entry of a cut dump is dropped, not an error. Nothing when the top level is neither
// a list nor a dict by its first opcodes (the tree is built then).
std::optional<bool> ParseStreamedPickleDump(std::string_view bytes, const Converter& converter,
                                            const std::string& display_name, FrDump& dump) {
  const std::optional<bool> top_list = PickleTopIsList(bytes);
  if (!top_list) return std::nullopt;
  dump.bare_list = *top_list;
  PickleOptions options;
  options.record_lists = {"entries"};
  options.record_top_list = *top_list;
  options.record_keys = kEntryKeys;
  // Every value built, then pruned: this read must say what the whole tree's says, and the skip of
  // dropped values reads their structure, not their content (a str that is not UTF-8 under
  // 'thread_id' fails the tree and not the skip; fuzz_pickle found it). Without the skip, record
  // mode scans the memo first. Dumps are small beside info files: memory still follows one batch.
  options.skip_dropped = false;
  std::exception_ptr entry_error;
  std::exception_ptr incomplete;  // the last entry handed lacked a key: its error, unless the dump was cut there
  uint64_t handed = 0;
  options.on_record = [&](const PickleNode& entry, uint64_t index) {
    ++handed;
    if (incomplete && !entry_error) entry_error = incomplete;  // not the last one: its missing key is an error
    if (entry_error) return;
    try {
      const size_t before = dump.entries.size();
      converter.ConvertEntry(entry, index, /*cut_last=*/true, dump);
      if (dump.entries.size() == before) {  // incomplete: the error a whole entry's read gives, kept for later
        try {
          converter.ConvertEntry(entry, index, /*cut_last=*/false, dump);
        } catch (const ScenarioError&) {
          incomplete = std::current_exception();
        }
      }
    } catch (const ScenarioError&) {
      entry_error = std::current_exception();
    }
  };
  std::optional<PickleDocument> doc;
  try {
    doc.emplace(ParsePickle(bytes, display_name, options));
  } catch (const PickleError&) {
    return std::nullopt;  // the whole tree's read says what is wrong (or salvages what the stream could not)
  }
  if (!HandedEveryEntry(*doc, *top_list, handed)) return std::nullopt;
  dump.partial = doc->partial;
  if (incomplete && !dump.partial && !entry_error) entry_error = incomplete;
  const bool has_rank = converter.Convert(*doc->root, dump, /*entries_read=*/true);
  if (entry_error) std::rethrow_exception(entry_error);
  return has_rank;
}

// What every dump must satisfy once read: a rank, from its name or its own key.
void FinishDump(const FrDump& dump, bool has_rank, std::optional<uint32_t> rank_from_name) {
  if (!rank_from_name && !has_rank) {
    throw ScenarioError(
        fmt::format("{}: cannot tell the rank: the file name does not end in a "
                    "number and the dump has no 'rank' key",
                    dump.path));
  }
  // What the converter checked as it read: a 'rank' key in range, and no version or pg_status in
  // the bare list of PyTorch 2.2.
  if (has_rank) PETRSIM_ASSERT(dump.rank < (uint32_t{1} << 20));
  if (dump.bare_list) PETRSIM_ASSERT(dump.version.empty());
  if (dump.bare_list) PETRSIM_ASSERT(!dump.has_pg_status);
}

bool IsBlank(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

}  // namespace

FrDump ParseFlightRecorderDump(std::string_view bytes, const std::string& display_name,
                               std::optional<uint32_t> rank_from_name, FrPickleRead pickle_read) {
  FrDump dump;
  dump.path = display_name;
  if (rank_from_name) dump.rank = *rank_from_name;
  const Converter converter(display_name, bytes.size());
  size_t first = 0;
  while (first < bytes.size() && IsBlank(bytes[first])) ++first;
  bool has_rank = false;
  if (first < bytes.size() && static_cast<uint8_t>(bytes[first]) == 0x80) {
    std::optional<bool> streamed;
    if (pickle_read == FrPickleRead::kStreamed) {
      // Its own dump and budget: where the stream cannot take the entries, the tree's read starts afresh.
      FrDump attempt = dump;
      const Converter streaming(display_name, bytes.size());
      streamed = ParseStreamedPickleDump(bytes.substr(first), streaming, display_name, attempt);
      if (streamed) dump = std::move(attempt);
    }
    if (streamed) {
      has_rank = *streamed;
    } else {
      const PickleDocument doc = ParsePickle(bytes.substr(first), display_name);
      dump.partial = doc.partial;
      has_rank = converter.Convert(*doc.root, dump);
    }
  } else if (first < bytes.size() && bytes[first] == '{') {
    has_rank = ParseJsonDump(bytes, nullptr, converter, display_name, dump);
  } else {
    throw ScenarioError(
        fmt::format("{}: byte 0: neither a Flight Recorder pickle (starts with 0x80) nor a JSON dump (starts "
                    "with '{{'){}",
                    display_name, first >= bytes.size() ? ": the file is empty" : ""));
  }
  FinishDump(dump, has_rank, rank_from_name);
  return dump;
}

FrDump ReadFlightRecorderDump(const std::string& path) {
  constexpr uint64_t kMaxBytes = uint64_t{1} << 32;
  uint32_t rank = 0;
  const bool named = RankFromFileName(path, rank);
  const std::optional<uint32_t> rank_from_name = named ? std::optional<uint32_t>(rank) : std::nullopt;
  RegularFileChunks file(path, "Flight Recorder dump", kMaxBytes);
  // Read up to the first byte that is not blank: it tells the format.
  std::string prefix;
  for (std::string_view chunk = file.Next(); !chunk.empty(); chunk = file.Next()) {
    prefix.append(chunk);
    const auto first = std::find_if_not(prefix.begin(), prefix.end(), IsBlank);
    if (first == prefix.end()) continue;
    if (*first != '{') break;
    // A JSON dump is parsed as it is read: its text is never held whole.
    FrDump dump;
    dump.path = path;
    if (named) dump.rank = rank;
    const Converter converter(path, file.size_at_open());
    const bool has_rank = ParseJsonDump(prefix, &file, converter, path, dump);
    FinishDump(dump, has_rank, rank_from_name);
    return dump;
  }
  // A pickle (or neither, which the parser says): read whole, as the pickle machine reads it.
  prefix.reserve(file.size_at_open());
  for (std::string_view chunk = file.Next(); !chunk.empty(); chunk = file.Next()) prefix.append(chunk);
  return ParseFlightRecorderDump(prefix, path, rank_from_name);
}

}  // namespace petrsim
