// The allocation-free TraceEvent decoder; see wire_decoder.h.
#include "trace/wire_decoder.h"

#include "base/assert.h"

namespace petrsim {

bool ReadVarint(const uint8_t*& p, const uint8_t* end, uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (p >= end) return false;
    const uint8_t byte = *p++;
    value |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

namespace {

// A tag as protobuf's parser reads it: at most 5 bytes, summed in 32-bit arithmetic (so a
// 5-byte tag wider than 32 bits wraps, and a longer one is an error).
bool ReadTag(const uint8_t*& p, const uint8_t* end, uint32_t& tag) {
  tag = 0;
  for (int i = 0; i < 5; ++i) {
    if (p >= end) return false;
    const uint8_t byte = *p++;
    tag += static_cast<uint32_t>(byte & 0x7fu) << (7 * i);
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// A length: a varint32 (at most 5 bytes) below 2^31, as protobuf's ReadSize reads it, of bytes
// that are there.
bool ReadLength(const uint8_t*& p, const uint8_t* end, uint64_t& n) {
  const uint8_t* const before = p;
  return ReadVarint(p, end, n) && p - before <= 5 && n < (uint64_t{1} << 31) && n <= static_cast<uint64_t>(end - p);
}

// Skips the rest of group `field` (its start tag already read); false if it does not end.
bool SkipGroup(const uint8_t*& p, const uint8_t* end, uint64_t field, int depth) {
  if (depth > 100) return false;
  while (p < end) {
    uint32_t tag = 0;
    if (!ReadTag(p, end, tag)) return false;
    const uint64_t inner = tag >> 3;
    const unsigned wire = static_cast<unsigned>(tag & 7);
    if (inner == 0) return false;
    if (wire == 4) return inner == field;
    if (wire == 0) {
      uint64_t v = 0;
      if (!ReadVarint(p, end, v)) return false;
    } else if (wire == 1) {
      if (end - p < 8) return false;
      p += 8;
    } else if (wire == 5) {
      if (end - p < 4) return false;
      p += 4;
    } else if (wire == 2) {
      uint64_t n = 0;
      if (!ReadLength(p, end, n)) return false;
      p += n;
    } else if (wire == 3) {
      if (!SkipGroup(p, end, inner, depth + 1)) return false;
    } else {
      return false;
    }
  }
  return false;
}

// Sets the varint field `field` of `e` to `v`. protobuf reads an enum as int32 (the low 32
// bits) and keeps values it does not know aside, leaving the default: so does this. A field of
// a later format is skipped.
void SetVarintField(uint64_t field, uint64_t v, TraceEventView& e) {
  switch (field) {
    case TraceEvent::kKindFieldNumber:
      if (TraceEventKind_IsValid(static_cast<int32_t>(v)))
        e.kind = static_cast<TraceEventKind>(static_cast<int32_t>(v));
      break;
    case TraceEvent::kWorkerFieldNumber:
      e.worker = static_cast<int32_t>(v);
      break;
    case TraceEvent::kStartNsFieldNumber:
      e.start_ns = static_cast<int64_t>(v);
      break;
    case TraceEvent::kEndNsFieldNumber:
      e.end_ns = static_cast<int64_t>(v);
      break;
    case TraceEvent::kIterationFieldNumber:
      e.iteration = v;
      break;
    case TraceEvent::kSlotFieldNumber:
      e.slot = static_cast<uint32_t>(v);
      break;
    case TraceEvent::kIndexFieldNumber:
      e.index = static_cast<int64_t>(v);
      break;
    case TraceEvent::kFinalIndexFieldNumber:
      e.final_index = static_cast<int64_t>(v);
      break;
    case TraceEvent::kAttemptsFieldNumber:
      e.attempts = v;
      break;
    case TraceEvent::kSeqFieldNumber:
      e.seq = v;
      break;
    case TraceEvent::kOpFieldNumber:
      if (Collective::Op_IsValid(static_cast<int32_t>(v))) e.op = static_cast<Collective::Op>(static_cast<int32_t>(v));
      break;
    case TraceEvent::kNumelFieldNumber:
      e.numel = v;
      break;
    case TraceEvent::kCompletedFieldNumber:
      e.completed = v != 0;
      break;
    case TraceEvent::kRecordsDroppedFieldNumber:
      e.records_dropped = v;
      break;
    case TraceEvent::kDtypeFieldNumber:
      if (Collective::Dtype_IsValid(static_cast<int32_t>(v)))
        e.dtype = static_cast<Collective::Dtype>(static_cast<int32_t>(v));
      break;
    case TraceEvent::kStartedNsFieldNumber:
      e.started_ns = static_cast<int64_t>(v);
      break;
    case TraceEvent::kGroupFieldNumber:
      e.group = static_cast<int64_t>(v);
      break;
    case TraceEvent::kGtCountFieldNumber:
      e.gt_count = static_cast<uint32_t>(v);
      break;
    case TraceEvent::kAcceptedFieldNumber:
      e.accepted = v != 0;
      break;
    case TraceEvent::kLoaderFieldNumber:
      e.loader = static_cast<uint32_t>(v);
      break;
    default:
      break;  // a field of a later format: skipped
  }
}

}  // namespace

bool DecodeTraceEvent(const uint8_t* p, const uint8_t* end, TraceEventView& e) {
  e = TraceEventView{};
  while (p < end) {
    uint32_t tag = 0;
    if (!ReadTag(p, end, tag)) return false;
    const uint64_t field = tag >> 3;
    const unsigned wire = static_cast<unsigned>(tag & 7);
    if (field == 0) return false;
    if (wire == 0) {
      uint64_t v = 0;
      if (!ReadVarint(p, end, v)) return false;
      SetVarintField(field, v, e);
    } else if (wire == 2) {
      uint64_t n = 0;
      if (!ReadLength(p, end, n)) return false;
      const std::string_view bytes(reinterpret_cast<const char*>(p), n);
      if (field == TraceEvent::kProcessGroupFieldNumber) e.process_group = bytes;
      if (field == TraceEvent::kTextFieldNumber) e.text = bytes;
      if (field == TraceEvent::kDdpLayoutFieldNumber) e.ddp_layout = bytes;
      p += n;
    } else if (wire == 1) {
      if (end - p < 8) return false;
      p += 8;
    } else if (wire == 5) {
      if (end - p < 4) return false;
      p += 4;
    } else if (wire == 3) {
      // A group (no TraceEvent field is one): skipped to its matching end, as protobuf skips an
      // unknown group, nesting at most 100 deep like protobuf's recursion limit.
      if (!SkipGroup(p, end, field, 1)) return false;
    } else {
      return false;  // an end-group without its start, or wire types 6 and 7
    }
  }
  // An event accepted holds only values its enums name (SetVarintField keeps the default for
  // others): the readers switch on them.
  PETRSIM_ASSERT(e.kind >= TraceEventKind_MIN && e.kind <= TraceEventKind_MAX);
  PETRSIM_ASSERT(e.op >= Collective::Op_MIN && e.op <= Collective::Op_MAX);
  PETRSIM_ASSERT(e.dtype >= Collective::Dtype_MIN && e.dtype <= Collective::Dtype_MAX);
  return true;
}

}  // namespace petrsim
