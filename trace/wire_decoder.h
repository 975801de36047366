// A TraceEvent decoder that allocates nothing: the wire format read as protobuf's parser reads it
// (tags of at most 5 bytes wrapping in 32 bits, lengths below 2^31, groups skipped 100 deep,
// unknown fields skipped), with the field numbers protoc generated for proto/trace.proto.
#pragma once

#include <cstdint>
#include <string_view>

#include "proto/scenario.pb.h"
#include "proto/trace.pb.h"

namespace petrsim {

// A TraceEvent decoded without protobuf's message objects: the fields by value, the strings as
// views into the reader's buffer (valid during the callback only). The fast path of readers
// that stream long traces (diagnose reads 100 million events in seconds).
struct TraceEventView {
  TraceEventKind kind = TraceEventKind::load;
  int32_t worker = -1;
  int64_t start_ns = 0, end_ns = 0;
  uint64_t iteration = 0;
  uint32_t slot = 0;
  int64_t index = -1, final_index = -1;
  uint64_t attempts = 0;
  std::string_view process_group;
  uint64_t seq = 0;
  Collective::Op op = Collective::allreduce;
  uint64_t numel = 0;
  bool completed = true;
  std::string_view text;
  uint64_t records_dropped = 0;
  Collective::Dtype dtype = Collective::float32;
  int64_t started_ns = -1;
  int64_t group = -1;
  uint32_t gt_count = 0;
  bool accepted = false;
  uint32_t loader = 0;
  // The serialized DdpLayout of a ddp_layout event (probe/petrsim_probe/wire.py writes it),
  // undecoded: DdpLayout::ParseFromArray reads it where needed.
  std::string_view ddp_layout;
};

// Reads a base-128 varint at p (advanced past it) within [p, end); false on a malformed or cut
// value (more than 10 bytes, or the end reached first).
bool ReadVarint(const uint8_t*& p, const uint8_t* end, uint64_t& value);

// Decodes one TraceEvent's bytes [p, end) into `e` as protobuf's parser would (unknown fields
// skipped, unknown enum values left at the default, tags and lengths read with protobuf's
// limits); false if they do not parse. The field numbers are the generated constants.
bool DecodeTraceEvent(const uint8_t* p, const uint8_t* end, TraceEventView& e);

}  // namespace petrsim
