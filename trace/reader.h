// Reading petrsim trace files (trace/trace_event.h's format): whole, or streamed event by event
// through protobuf's parser or the allocation-free wire decoder (trace/wire_decoder.h). Both share
// one framing (chunked reads, length prefixes, the header's version check, partial reading).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "proto/trace.pb.h"
#include "trace/trace_event.h"
#include "trace/wire_decoder.h"

namespace petrsim {

// Streams the file like ForEachTraceEvent, decoding each event into a TraceEventView (unknown
// fields are skipped, as protobuf would). Same errors, partial reading and header checks.
TraceHeader ScanTraceEvents(const std::string& path, const std::function<void(const TraceEventView&)>& on_event,
                            std::string* partial_error);

// One rank's trace file, read whole.
struct RankTrace {
  TraceHeader header;
  std::vector<TraceEvent> events;
};

// Reads a file written by TraceDirectoryWriter. Throws ScenarioError naming the file and, for
// a truncated or corrupt file, the byte offset and index of the bad message (0: the header);
// also for a missing header or a format_version this build does not know.
RankTrace ReadRankTrace(const std::string& path);
// The same, but a file cut short or corrupt after its header is read up to the bad message:
// `*partial_error` gets the error (file, byte offset) and the events before it are returned.
RankTrace ReadRankTrace(const std::string& path, std::string* partial_error);
// Streams the file: calls `on_event` for every event in order (the event is reused: copy what
// you keep) and returns the header; errors as ReadRankTrace (the header's version is checked
// before any event is delivered).
TraceHeader ForEachTraceEvent(const std::string& path, const std::function<void(const TraceEvent&)>& on_event,
                              std::string* partial_error);

}  // namespace petrsim
