// Flight Recorder dumps of every version PyTorch has written (formats/flight_recorder/flight_recorder.h), pickle
// and JSON, as tests/data/flight_recorder_json/make_versioned.py writes them from the real 2.9
// pickles of tests/data/flight_recorder/nvrx/lock_gil_2nd in each writer's shape
// (docs/research/flight_recorder_formats.md): each diagnoses as the real pickles do; unknown
// keys are ignored; a missing required key, or a wrong type, is an error naming it.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "formats/flight_recorder/flight_recorder.h"
#include "replay/diagnose.h"
#include "tests/pickle_test_util.h"

namespace petrsim {
namespace {

namespace fs = std::filesystem;

const std::string kData = PETRSIM_SOURCE_DIR "/tests/data";
const std::string kReal = kData + "/flight_recorder/nvrx/lock_gil_2nd";
const std::string kVersioned = kData + "/flight_recorder_json";

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string DiagnosisOf(const std::string& dir) { return DiagnosisJson(Diagnose(LoadRecordings({dir}))).dump(); }

struct Versioned {
  std::string version;
  std::string format;         // "pickle" or "json"
  std::string lib_key_value;  // the library version the dump names ("" where none is written)
};

class VersionedDump : public ::testing::TestWithParam<Versioned> {};

TEST_P(VersionedDump, DiagnosesAsTheRealPickles) {
  const Versioned& v = GetParam();
  const std::string dir = kVersioned + "/" + v.version + "/" + v.format;
  EXPECT_EQ(DiagnosisOf(dir), DiagnosisOf(kReal)) << dir;
}

TEST_P(VersionedDump, ReadsTheVersionStatusAndEntries) {
  const Versioned& v = GetParam();
  const std::string name = v.format == "json" ? "_dump_3.json" : "_dump_3";
  const FrDump dump = ReadFlightRecorderDump(kVersioned + "/" + v.version + "/" + v.format + "/" + name);
  const FrDump real = ReadFlightRecorderDump(kReal + "/_dump_3");
  EXPECT_EQ(dump.version, v.version);
  EXPECT_EQ(dump.comm_lib_version, v.lib_key_value);
  EXPECT_EQ(dump.rank, 3u);
  ASSERT_EQ(dump.entries.size(), real.entries.size());
  for (size_t i = 0; i < dump.entries.size(); ++i) {
    EXPECT_EQ(dump.entries[i].pg_name, real.entries[i].pg_name);
    EXPECT_EQ(dump.entries[i].collective_seq_id, real.entries[i].collective_seq_id);
    EXPECT_EQ(dump.entries[i].state, real.entries[i].state);
    EXPECT_EQ(dump.entries[i].is_p2p, real.entries[i].is_p2p);
  }
  if (v.version == "2.2") {  // before pg_status
    EXPECT_FALSE(dump.has_pg_status);
    return;
  }
  // JSON writes these with std::to_string; they read as the pickle's ints.
  ASSERT_EQ(dump.pg_status.size(), real.pg_status.size());
  for (const auto& [pg_id, status] : real.pg_status) {
    ASSERT_TRUE(dump.pg_status.count(pg_id)) << pg_id;
    EXPECT_EQ(dump.pg_status.at(pg_id).last_enqueued, status.last_enqueued);
    EXPECT_EQ(dump.pg_status.at(pg_id).last_started, status.last_started);
    EXPECT_EQ(dump.pg_status.at(pg_id).last_completed, status.last_completed);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, VersionedDump,
                         ::testing::Values(Versioned{"2.2", "pickle", ""}, Versioned{"2.3", "pickle", ""},
                                           Versioned{"2.3", "json", ""}, Versioned{"2.7", "pickle", "2.27.3"},
                                           Versioned{"2.7", "json", "2.27.3"}, Versioned{"2.10", "pickle", "2.27.3"},
                                           Versioned{"2.10", "json", "2.27.3"}),
                         [](const auto& info) {
                           std::string name = "v" + info.param.version + "_" + info.param.format;
                           for (char& c : name) c = c == '.' ? '_' : c;
                           return name;
                         });

// The earliest dumps are the list of entries alone: no version, no group names (the group is
// its pg_id, ProcessGroupNCCL::uid_: the index of the group among those the process created),
// seq_id for the sequence number. The fixture is lock_gil_2nd's real 2.9 pickles cut to that
// shape (make_versioned.py). One local id is different groups on different ranks (id 5 is each
// rank's tensor-parallel pair, id 10 the expert-parallel group of ranks 8-11 but another group on
// ranks 12-15, whose expert-parallel group is id 11): read as one group each, the ids made petrsim
// blame ranks 12-14 and 0-3 and a desync. Matched across ranks by their calls, the diagnosis is
// NVIDIA's analyzer's on the full dumps (nvrx/reference_outputs/lock_gil_2nd_reference.txt: the
// all_to_all 4096x5120 of the two expert-parallel groups, missing ranks 10 and 15), except that a
// bare list cannot say which of the two groups each rank belongs to.
TEST(FlightRecorderFormats, ABareListsLocalGroupIdsAreMatchedAcrossRanksAsNvidiaSays) {
  const FrDump dump = ReadFlightRecorderDump(kVersioned + "/bare_list/pickle/_dump_3");
  const FrDump real = ReadFlightRecorderDump(kReal + "/_dump_3");
  EXPECT_TRUE(dump.bare_list);
  EXPECT_EQ(dump.version, "");
  EXPECT_TRUE(dump.pg_config.empty());
  EXPECT_FALSE(dump.has_pg_status);
  ASSERT_EQ(dump.entries.size(), real.entries.size());
  for (size_t i = 0; i < dump.entries.size(); ++i) {
    EXPECT_EQ(dump.entries[i].pg_name, std::to_string(real.entries[i].pg_id));
    EXPECT_EQ(dump.entries[i].collective_seq_id, real.entries[i].collective_seq_id);
    EXPECT_EQ(dump.entries[i].profiling_name, real.entries[i].profiling_name);
    EXPECT_EQ(dump.entries[i].is_p2p, real.entries[i].is_p2p);  // from the name: nccl:send / nccl:recv
    EXPECT_EQ(dump.entries[i].input_sizes, std::vector<std::vector<int64_t>>{real.entries[i].input_sizes.at(0)});
  }

  const Diagnosis diagnosis = Diagnose(LoadRecordings({kVersioned + "/bare_list/pickle"}));
  const std::string report = FormatDiagnosis(diagnosis);
  EXPECT_TRUE(diagnosis.desyncs.empty()) << report;
  std::set<uint32_t> missing;
  std::set<std::vector<uint32_t>> all_to_all_waiting;
  for (const StuckCollective& stuck : diagnosis.stuck) {
    missing.insert(stuck.missing_ranks.begin(), stuck.missing_ranks.end());
    if (stuck.root && stuck.op == "nccl:all_to_all") {
      EXPECT_EQ(stuck.seq, 20947) << report;
      EXPECT_EQ(stuck.sizes, (std::vector<std::vector<int64_t>>{{4096, 5120}})) << report;
      all_to_all_waiting.insert(stuck.waiting_ranks);
    }
  }
  EXPECT_EQ(missing, (std::set<uint32_t>{10, 15})) << report;
  // The two expert-parallel groups (73: ranks 8-11, 74: ranks 12-15), each without its missing rank.
  EXPECT_EQ(all_to_all_waiting, (std::set<std::vector<uint32_t>>{{8, 9, 11}, {12, 13, 14}})) << report;
}

// What a dump says of the release (its format, the PyTorch releases that write it, the NCCL it
// names) and of the world (its default group's ranks).
TEST(FlightRecorderFormats, TheReleaseAndTheWorldAreWhatTheDumpSays) {
  const FrDump real = ReadFlightRecorderDump(kReal + "/_dump_3");  // PyTorch's own pickle
  EXPECT_EQ(real.lib_version_key, "nccl_version");
  EXPECT_EQ(FrDumpReleaseText(real), "Flight Recorder format 2.9 (PyTorch 2.8), NCCL 2.27.3");
  EXPECT_EQ(FrDumpWorldSize(real), std::optional<uint32_t>(16));
  EXPECT_EQ(real.world_ranks.front(), 0u);
  EXPECT_EQ(real.world_ranks.back(), 15u);

  const auto text = [](const std::string& dir) { return FrDumpReleaseText(ReadFlightRecorderDump(kVersioned + dir)); };
  EXPECT_EQ(text("/2.10/json/_dump_3.json"),
            "Flight Recorder format 2.10 (PyTorch 2.9 or later), comm_lib_version 2.27.3");
  EXPECT_EQ(text("/2.10/pickle/_dump_3"),
            "Flight Recorder format 2.10 (PyTorch 2.9 or later), comm_lib_version 2.27.3");
  EXPECT_EQ(text("/2.7/json/_dump_3.json"), "Flight Recorder format 2.7 (PyTorch 2.8 development builds), NCCL 2.27.3");
  EXPECT_EQ(text("/2.3/pickle/_dump_3"), "Flight Recorder format 2.3 (PyTorch 2.5)");
  EXPECT_EQ(text("/2.2/pickle/_dump_3"), "Flight Recorder format 2.2 (PyTorch 2.3-2.4)");
  const FrDump bare = ReadFlightRecorderDump(kVersioned + "/bare_list/pickle/_dump_3");
  EXPECT_EQ(FrDumpReleaseText(bare), "Flight Recorder bare list (PyTorch 2.2)");
  EXPECT_EQ(FrDumpWorldSize(bare), std::nullopt);  // no pg_config

  const std::string text_24 =
      R"({"version":"2.4","nccl_version":"2.21.5","pg_config":{"0":{"name":"0","desc":"default_pg",)"
      R"("ranks":"[0, 1, 2, 3]"},"1":{"name":"1","desc":"tp","ranks":"[0, 1]"}}})";
  const FrDump v24 = ParseFlightRecorderDump(text_24, "rank_1.json", 1u);
  EXPECT_EQ(FrDumpReleaseText(v24), "Flight Recorder format 2.4 (PyTorch 2.5-2.7), NCCL 2.21.5");
  EXPECT_EQ(v24.world_ranks, (std::vector<uint32_t>{0, 1, 2, 3}));
  const auto releases = FrFormatTorchReleases(v24);
  ASSERT_TRUE(releases.has_value());
  EXPECT_EQ(releases->first, "2.5");
  EXPECT_EQ(releases->last, "2.7");
  const FrDump unknown = ParseFlightRecorderDump(R"({"version":"2.0"})", "rank_0.json", 0u);
  EXPECT_EQ(FrDumpReleaseText(unknown), "Flight Recorder format 2.0 (a PyTorch release petrsim does not know)");
  EXPECT_FALSE(FrFormatTorchReleases(unknown).has_value());
  EXPECT_EQ(FrDumpWorldSize(unknown), std::nullopt);
}

// One 2.10 JSON dump, changed by `edit`, parsed; the error message, or "" if it parsed.
template <typename Edit>
std::string ParseEdited(Edit edit, FrDump* out = nullptr) {
  nlohmann::json json = nlohmann::json::parse(ReadText(kVersioned + "/2.10/json/_dump_0.json"));
  edit(json);
  try {
    FrDump dump = ParseFlightRecorderDump(json.dump(), "_dump_0.json", 0u);
    if (out != nullptr) *out = std::move(dump);
    return "";
  } catch (const ScenarioError& error) {
    return error.what();
  }
}

TEST(FlightRecorderFormats, AMissingRequiredKeyIsNamed) {
  const auto expect = [](const std::string& message, const std::string& want) {
    EXPECT_NE(message.find(want), std::string::npos) << message;
  };
  expect(ParseEdited([](nlohmann::json& j) { j["entries"][2].erase("collective_seq_id"); }),
         "_dump_0.json: entries[2]: missing key 'collective_seq_id'");
  expect(ParseEdited([](nlohmann::json& j) { j["entries"][0].erase("process_group"); }),
         "_dump_0.json: entries[0]: missing key 'process_group'");
  expect(ParseEdited([](nlohmann::json& j) { j["entries"][1].erase("state"); }),
         "_dump_0.json: entries[1]: missing key 'state'");
  expect(ParseEdited([](nlohmann::json& j) { j["entries"][1].erase("is_p2p"); }),
         "_dump_0.json: entries[1]: missing key 'is_p2p'");
  expect(ParseEdited([](nlohmann::json& j) { j["entries"][1].erase("profiling_name"); }),
         "_dump_0.json: entries[1]: missing key 'profiling_name'");
  expect(ParseEdited([](nlohmann::json& j) { j.erase("version"); }), "_dump_0.json: top level: missing key 'version'");
  expect(ParseEdited([](nlohmann::json& j) { j["pg_config"]["0"].erase("ranks"); }),
         "_dump_0.json: pg_config['0']: missing key 'ranks'");
  // Entries are read as they come only from a list: anything else is said, not taken for none.
  expect(ParseEdited([](nlohmann::json& j) {
           j["entries"] = {{"x", 1}};
         }),
         "_dump_0.json: entries: expected a list, found a dict");
  expect(ParseEdited([](nlohmann::json& j) { j["entries"] = 5; }),
         "_dump_0.json: entries: expected a list, found an int");
}

// Issue 33, point 3: a JSON dump is read an entry at a time (its DOM of a million entries took 7.7 GB); an entry's
// error waits for the top level, so that a dump of another version is refused as such, whatever its entries, and
// after a bad entry the others are still read through for the top level's errors.
TEST(FlightRecorderFormats, AJsonDumpIsReadAnEntryAtATime) {
  const auto expect = [](const std::string& message, const std::string& want) {
    EXPECT_NE(message.find(want), std::string::npos) << message;
  };
  expect(ParseEdited([](nlohmann::json& j) {
           j["entries"][0].erase("state");
           j["version"] = "3.0";
         }),
         "Flight Recorder dump version '3.0' is not supported");
  expect(ParseEdited([](nlohmann::json& j) {
           j["entries"][0].erase("state");
           j["entries"][2].erase("is_p2p");
         }),
         "_dump_0.json: entries[0]: missing key 'state'");
  // Every entry, in order.
  const nlohmann::json json = nlohmann::json::parse(ReadText(kVersioned + "/2.10/json/_dump_0.json"));
  FrDump dump;
  ASSERT_EQ(ParseEdited([](nlohmann::json&) {}, &dump), "");
  ASSERT_EQ(dump.entries.size(), json["entries"].size());
  for (size_t i = 0; i < dump.entries.size(); ++i) {
    EXPECT_EQ(dump.entries[i].record_id, json["entries"][i]["record_id"].get<int64_t>());
  }
}

// A JSON dump file is parsed as it is read, a megabyte at a time (its text is never held whole): the file gives what
// its bytes give in memory, entry for entry, with chunk boundaries inside strings, escapes and blanks; and the depth
// limit names the same byte when the deep part lies past the first chunk.
TEST(FlightRecorderFormats, AJsonDumpFileIsParsedAsItIsRead) {
  const fs::path dir = fs::path(::testing::TempDir()) / "petrsim_fr_chunks";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name, std::ios::binary) << text;
    return (dir / name).string();
  };
  nlohmann::json json = nlohmann::json::parse(ReadText(kVersioned + "/2.10/json/_dump_0.json"));
  // Escaped quotes and backslashes every few bytes, over 2 MB; brackets in the strings, as many as the depth limit
  // allows and more, after each escaped quote (read as the string's end, they would be nesting).
  std::string padding;
  while (padding.size() < 60000) padding += "ab\\\"" + std::string(70, '[') + "cd\\";
  for (nlohmann::json& entry : json["entries"]) entry["frames"] = std::vector<std::string>(4, padding);
  // Blanks first, a whole chunk of them, and as many more as put an escaped quote's backslash last in the second chunk
  // (the reader hands the parser what it read to tell the format, the first two chunks, as one).
  const std::string dumped = json.dump();
  size_t escape = 0;
  bool in_string = false;
  for (size_t i = 0; i < dumped.size() && i < (size_t{1} << 20); ++i) {
    if (in_string && dumped[i] == '\\') {
      if (dumped[i + 1] == '"') escape = i;  // the escape of a quote: read as its end, it would close the string
      ++i;
    } else if (dumped[i] == '"') {
      in_string = !in_string;
    }
  }
  ASSERT_EQ(dumped[escape + 1], '"');
  const std::string blanks((size_t{2} << 20) - 1 - escape, ' ');
  const std::string text = blanks + dumped + "\n";
  ASSERT_GT(text.size(), size_t{3} << 20);
  const FrDump from_file = ReadFlightRecorderDump(write("_dump_0.json", text));
  const FrDump in_memory = ParseFlightRecorderDump(text, (dir / "_dump_0.json").string(), 0u);
  ASSERT_EQ(from_file.entries.size(), json["entries"].size());
  ASSERT_EQ(from_file.entries.size(), in_memory.entries.size());
  for (size_t i = 0; i < from_file.entries.size(); ++i) {
    EXPECT_EQ(from_file.entries[i].record_id, in_memory.entries[i].record_id);
    EXPECT_EQ(from_file.entries[i].profiling_name, in_memory.entries[i].profiling_name);
    EXPECT_EQ(from_file.entries[i].input_sizes, in_memory.entries[i].input_sizes);
  }
  EXPECT_EQ(from_file.version, in_memory.version);
  EXPECT_EQ(from_file.pg_config.size(), in_memory.pg_config.size());
  // Nesting past the limit, in the last entry (megabytes in).
  json["entries"].back()["deep"] = nlohmann::json::parse(std::string(300, '[') + std::string(300, ']'));
  const std::string deep = blanks + json.dump();  // the same first megabyte: the escape again ends the second chunk
  const auto error_of = [](const auto& read) {
    try {
      read();
    } catch (const ScenarioError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  const std::string path = write("_dump_1.json", deep);
  const std::string want = error_of([&] { ParseFlightRecorderDump(deep, path, 1u); });
  EXPECT_NE(want.find("JSON nested deeper than"), std::string::npos) << want;
  EXPECT_EQ(error_of([&] { ReadFlightRecorderDump(path); }), want);
  fs::remove_all(dir);
}

// A dump read with `how` as text: every field, or the error.
std::string DumpText(std::string_view bytes, FrPickleRead how) {
  std::string out;
  try {
    const FrDump dump = ParseFlightRecorderDump(bytes, "_dump_3", 3u, how);
    out = fmt::format("rank {} version {} lib {} bare {} partial {} world {}\n", dump.rank, dump.version,
                      dump.comm_lib_version, dump.bare_list, dump.partial.value_or("-"), dump.world_ranks.size());
    for (const auto& [name, group] : dump.pg_config) out += fmt::format("pg {} {} {}\n", name, group.desc, group.ranks);
    for (const auto& [id, status] : dump.pg_status) {
      out += fmt::format("status {} {} {} {}\n", id, status.last_enqueued, status.last_started, status.last_completed);
    }
    for (const FrEntry& e : dump.entries) {
      out +=
          fmt::format("entry {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}\n", e.record_id, e.pg_id, e.pg_name,
                      e.pg_desc, e.collective_seq_id, e.p2p_seq_id, e.op_id, e.profiling_name, e.time_created_ns,
                      e.state, e.timeout_ms, e.is_p2p, e.input_sizes, e.output_sizes, e.input_dtypes, e.output_dtypes);
    }
  } catch (const ScenarioError& error) {
    out = std::string("error: ") + error.what();
  }
  return out;
}

// A pickle dump is read entry by entry (each converted as the pickle machine adds it to the list): on the real dumps,
// whole and cut at every byte, it reads as the tree built first does, entries, tables and errors alike (an incomplete
// last entry of a cut dump dropped, a cut in the top level an error).
TEST(FlightRecorderFormats, APickleDumpReadEntryByEntryIsTheWholeTreesRead) {
  for (const std::string& path :
       {kReal + "/_dump_3", kVersioned + "/2.2/pickle/_dump_3", kVersioned + "/bare_list/pickle/_dump_3"}) {
    ASSERT_TRUE(fs::exists(path)) << path;
    const std::string bytes = ReadText(path);
    const std::string whole = DumpText(bytes, FrPickleRead::kWhole);
    ASSERT_EQ(DumpText(bytes, FrPickleRead::kStreamed), whole) << path;
    ASSERT_NE(whole.find("entry "), std::string::npos) << path;
    for (size_t cut = 1; cut < bytes.size(); ++cut) {
      const std::string_view part(bytes.data(), cut);
      ASSERT_EQ(DumpText(part, FrPickleRead::kStreamed), DumpText(part, FrPickleRead::kWhole))
          << path << " cut at " << cut;
    }
  }
}

// A str that is not UTF-8 under a key the stream drops ('thread_id'): the whole tree fails on it (cut there, as
// partial), and so does the stream, which builds every value (the skip of dropped values reads their structure only;
// fuzz_pickle found the two differ).
TEST(FlightRecorderFormats, ABadStrUnderADroppedKeyReadsAsTheWholeTreeDoes) {
  const std::string entry = Bytes({'}', '('}) + Str("process_group") + Str("0") + Str("default_pg") + Bytes({0x86}) +
                            Str("collective_seq_id") + Bytes({'K', 1}) + Str("profiling_name") +
                            Str("nccl:all_reduce") + Str("state") + Str("scheduled") + Str("thread_id") +
                            Str("\xff\xfe") + Str("is_p2p") + Bytes({0x89, 'u'});
  const std::string bytes = Bytes({0x80, 2, '}', '('}) + Str("version") + Str("2.4") + Str("rank") + Bytes({'K', 3}) +
                            Str("pg_config") + Bytes({'}'}) + Str("entries") + Bytes({']', '('}) + entry + entry +
                            Bytes({'e', 'u', '.'});
  const std::string whole = DumpText(bytes, FrPickleRead::kWhole);
  EXPECT_NE(whole.find("not valid UTF-8"), std::string::npos) << whole;
  EXPECT_EQ(DumpText(bytes, FrPickleRead::kStreamed), whole);
}

// Hand-made layouts the stream cannot take as Python's pickler lays a dump out (a top-level value popped and another
// opened, entries in a tuple or a dict) read as the whole tree does: the entries of a tuple, the error of a dict, the
// top level that is really there (one of them aborted on an assertion, another lost its 7 entries).
TEST(FlightRecorderFormats, HandMadePickleLayoutsReadAsTheWholeTreeDoes) {
  const auto entry = [](int seq) {
    return Bytes({'}', '('}) + Str("process_group") + Str("0") + Str("default_pg") + Bytes({0x86}) +
           Str("collective_seq_id") + Bytes({'K', seq}) + Str("profiling_name") + Str("nccl:all_reduce") +
           Str("state") + Str("scheduled") + Str("is_p2p") + Bytes({0x89, 'u'});
  };
  const auto bare_entry = [](int seq) {
    return Bytes({'}', '('}) + Str("pg_id") + Bytes({'K', 0}) + Str("seq_id") + Bytes({'K', seq}) +
           Str("profiling_name") + Str("nccl:all_reduce") + Str("state") + Str("scheduled") + Bytes({'u'});
  };
  const auto dict_dump = [](const std::string& entries) {
    return Bytes({'}', '('}) + Str("version") + Str("2.4") + Str("rank") + Bytes({'K', 3}) + Str("pg_config") +
           Bytes({'}'}) + Str("entries") + entries + Bytes({'u', '.'});
  };
  const std::string two = entry(1) + entry(2);
  const std::vector<std::pair<std::string, std::string>> layouts = {
      {"a list", Bytes({0x80, 2}) + dict_dump(Bytes({']', '('}) + two + Bytes({'e'}))},
      {"a tuple", Bytes({0x80, 2}) + dict_dump(Bytes({'('}) + two + Bytes({'t'}))},
      {"a dict", Bytes({0x80, 2}) + dict_dump(Bytes({'}'}))},
      {"a list popped, then the dict", Bytes({0x80, 2, ']', '0'}) + dict_dump(Bytes({']', '('}) + two + Bytes({'e'}))},
      {"a dict popped, then the bare list",
       Bytes({0x80, 2, '}', '0', ']', '('}) + bare_entry(1) + bare_entry(2) + Bytes({'e', '.'})},
  };
  for (const auto& [layout, bytes] : layouts) {
    const std::string whole = DumpText(bytes, FrPickleRead::kWhole);
    EXPECT_EQ(DumpText(bytes, FrPickleRead::kStreamed), whole) << layout;
    if (layout == "a dict") {
      EXPECT_NE(whole.find("entries: expected a list, found a dict"), std::string::npos) << whole;
    } else {
      EXPECT_NE(whole.find("entry 1 "), std::string::npos) << layout << ": " << whole;
    }
  }
}

TEST(FlightRecorderFormats, UnknownKeysAreIgnored) {
  FrDump plain, extended;
  ASSERT_EQ(ParseEdited([](nlohmann::json&) {}, &plain), "");
  ASSERT_EQ(ParseEdited(
                [](nlohmann::json& j) {
                  j["a_future_key"] = {{"nested", {1, 2, 3}}};
                  j["nccl_comm_state"] = {{"comm0", {{"k", "v"}}}};
                  j["pg_status"]["0"]["last_enqueued_numel_in"] = "7";
                  j["pg_config"]["0"]["backend"] = "nccl";
                  for (auto& e : j["entries"]) {
                    e["frames"] = nlohmann::json::array();
                    e["duration_ms"] = 1.5;
                    e["another_future_key"] = nullptr;
                  }
                },
                &extended),
            "");
  ASSERT_EQ(extended.entries.size(), plain.entries.size());
  for (size_t i = 0; i < plain.entries.size(); ++i) {
    EXPECT_EQ(extended.entries[i].collective_seq_id, plain.entries[i].collective_seq_id);
    EXPECT_EQ(extended.entries[i].pg_name, plain.entries[i].pg_name);
  }
  EXPECT_EQ(extended.pg_status.at(0).last_enqueued, plain.pg_status.at(0).last_enqueued);
}

TEST(FlightRecorderFormats, AWrongTypeNamesTheFieldExpectedAndFound) {
  const auto expect = [](const std::string& message, const std::string& want) {
    EXPECT_NE(message.find(want), std::string::npos) << message;
  };
  expect(ParseEdited([](nlohmann::json& j) { j["pg_status"]["0"]["last_enqueued_collective"] = "abc"; }),
         "_dump_0.json: pg_status[0].last_enqueued_collective: expected an int (or a str of one), found the str "
         "'abc'");
  expect(ParseEdited([](nlohmann::json& j) { j["pg_status"]["0"]["last_completed_collective"] = {1}; }),
         "_dump_0.json: pg_status[0].last_completed_collective: expected an int, found a list");
  expect(ParseEdited([](nlohmann::json& j) { j["entries"][0]["collective_seq_id"] = "27"; }),
         "_dump_0.json: entries[0].collective_seq_id: expected an int, found a str");
  expect(ParseEdited([](nlohmann::json& j) { j["entries"][0]["profiling_name"] = 5; }),
         "_dump_0.json: entries[0].profiling_name: expected a str, found an int");
  expect(ParseEdited([](nlohmann::json& j) { j["version"] = 2.1; }), "_dump_0.json: version: expected a str");
}

// dump_json leaves `entries` out when there are none (if (!entries.empty()) ...).
TEST(FlightRecorderFormats, AJsonDumpWithoutEntriesIsARankThatRecordedNothing) {
  FrDump dump;
  ASSERT_EQ(ParseEdited([](nlohmann::json& j) { j.erase("entries"); }, &dump), "");
  EXPECT_TRUE(dump.entries.empty());
  EXPECT_FALSE(dump.pg_status.empty());
  EXPECT_FALSE(dump.pg_config.empty());
}

// pg_status values as dump_json writes them: std::to_string of the sequence numbers, -1 included.
TEST(FlightRecorderFormats, PgStatusStringsHoldingIntsAreRead) {
  const std::string text =
      R"({"version":"2.10","comm_lib_version":"2.21.5","pg_config":{"0":{"name":"0","desc":"default_pg",)"
      R"("ranks":"[0, 1]"}},"pg_status":{"0":{"last_completed_collective":"-1","last_enqueued_collective":"12",)"
      R"("last_started_collective":"-1"}}})";
  const FrDump dump = ParseFlightRecorderDump(text, "rank_1.json", 1u);
  EXPECT_EQ(dump.pg_status.at(0).last_enqueued, 12);
  EXPECT_EQ(dump.pg_status.at(0).last_started, -1);
  EXPECT_EQ(dump.pg_status.at(0).last_completed, -1);
  EXPECT_EQ(dump.pg_config.at("0").ranks, (std::vector<uint32_t>{0, 1}));
  EXPECT_TRUE(dump.entries.empty());
}

}  // namespace
}  // namespace petrsim
