// petrsim's own trace files (docs/design.md, "Formats"; proto/trace.proto): the format, and what the
// writers (trace/directory_writer.h, trace/rank_writer.h) and the readers (trace/reader.h,
// trace/wire_decoder.h) share.
//
// Format: "<dir>/rank_<r>.pbtrace" for every rank r in [0, world_size), each a stream of
// length-delimited protobuf messages (varint byte count, then the message; what
// google::protobuf::util::SerializeDelimitedToOstream writes): one TraceHeader, then one
// TraceEvent per record of that rank in the order Record() received them. An event always has
// kind, start_ns and end_ns; its other fields only where they differ from their declared
// default. If the writer reached its record limit, each rank that lost records ends with one
// TraceEvent of kind `truncated` saying how many.
#pragma once

#include <cstdint>
#include <string>

#include "proto/scenario.pb.h"
#include "proto/trace.pb.h"
#include "trace/trace_sink.h"

namespace petrsim {

inline constexpr uint32_t kTraceFormatVersion = 1;

// "<directory>/rank_<rank>.pbtrace".
std::string RankTracePath(const std::string& directory, uint32_t rank);

// Whether events of `kind` are TraceSink records: all but the writer's `truncated` and the
// probe's `ddp_layout`, which readers of records skip.
inline bool HasTraceKind(TraceEventKind kind) {
  return kind != TraceEventKind::truncated && kind != TraceEventKind::ddp_layout;
}

// The PyTorch release petrsim_probe names in a header's build id ("petrsim_probe 0.1.0 (torch
// 1.13.1)" -> "1.13.1"), as printed; "" when the id names none (petrsim's own writers).
std::string ProbeTorchRelease(const TraceHeader& header);

// A record as a trace event (defaults left out) and back. The record's string_views point
// into `event`, which must outlive it. An event without a TraceKind (HasTraceKind) must not be
// converted.
TraceEvent ToTraceEvent(const TraceRecord& record);
TraceRecord ToTraceRecord(const TraceEvent& event, uint32_t rank);

// The header of a trace file: the format version, the scenario and where it came from, the
// seed, the world size, the backend ("sim", "gloo", "nccl"; the clock is "virtual" for "sim",
// "steady" otherwise) and the build. `rank` is set for one rank's own file (RankTraceWriter).
TraceHeader MakeTraceHeader(const Scenario& scenario, const std::string& scenario_path, uint32_t world_size,
                            const std::string& backend, const std::string& build_id);

// Appends `value` as a base-128 varint (the length prefix of every message).
void AppendVarint(std::string& out, uint64_t value);

// Fills `event` (cleared first) with the record's fields that differ from TraceEvent's defaults.
void FillTraceEvent(const TraceRecord& record, TraceEvent& event);

}  // namespace petrsim
