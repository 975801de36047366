"""The petrsim trace wire format (proto/trace.proto), written by hand: no protobuf package needed.

A rank file is a stream of length-delimited messages (a base-128 varint byte count, then the
message), a TraceHeader first and TraceEvents after it. proto2 semantics as trace.proto states
them: a field equal to its default is left out, except TraceEvent's kind, start_ns and end_ns,
which are always written. Negative int32/int64 values are written as 10-byte varints (their
64-bit two's complement), as protobuf does. decode_* are the inverse, used by the tests and by
`scenario_bytes` to take the scenario out of a petrsim trace header.
"""

# TraceEventKind (proto/trace.proto), value for value.
LOAD, DATA_WAIT, COMPUTE, COLLECTIVE, CHECKPOINT, ITERATION = 0, 1, 2, 3, 4, 5
LIVELOCK, WATCHDOG, RANK_DIED, DESYNC, TRUNCATED = 6, 7, 8, 9, 10
SAMPLER_DRAW, GETITEM_ATTEMPT, BATCH_READY, PROCESS_EXIT, STALL = 11, 12, 13, 14, 15
DDP_LAYOUT = 16

# Collective.Op and Collective.Dtype (proto/scenario.proto).
OPS = {"allreduce": 0, "broadcast": 1, "reduce": 2, "allgather": 3, "reduce_scatter": 4,
       "alltoall": 5, "barrier": 6}
DTYPES = {"float32": 0, "float16": 1, "bfloat16": 2, "float64": 3, "int32": 4, "int64": 5,
          "uint8": 6}

TRACE_FORMAT_VERSION = 1

_WIRE_VARINT, _WIRE_LEN = 0, 2


def _tag(field, wire):
    return varint((field << 3) | wire)


def varint(value):
    """The base-128 varint of a non-negative integer, or of a negative one as 64-bit."""
    if value < 0:
        value += 1 << 64
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# Tags, precomputed (the hot path writes many events).
_T = {f: _tag(f, _WIRE_VARINT) for f in range(1, 24)}
_L = {f: _tag(f, _WIRE_LEN) for f in range(1, 24)}
_SMALL = [bytes((v,)) for v in range(128)]


def _v(value):
    if 0 <= value < 128:
        return _SMALL[value]
    return varint(value)


def encode_event(kind, start_ns, end_ns, worker=-1, iteration=0, slot=0, index=-1,
                 final_index=-1, attempts=0, process_group="", seq=0, op=0, numel=0,
                 completed=True, text="", records_dropped=0, dtype=0, started_ns=-1, group=-1,
                 gt_count=0, accepted=False, loader=0, ddp_layout=b""):
    """One serialized TraceEvent (without its length prefix). ddp_layout: a serialized DdpLayout
    (encode_ddp_layout)."""
    T = _T
    parts = [T[1], _v(kind), T[3], _v(start_ns), T[4], _v(end_ns)]
    if worker != -1:
        parts += (T[2], _v(worker))
    if iteration:
        parts += (T[5], _v(iteration))
    if slot:
        parts += (T[6], _v(slot))
    if index != -1:
        parts += (T[7], _v(index))
    if final_index != -1:
        parts += (T[8], _v(final_index))
    if attempts:
        parts += (T[9], _v(attempts))
    if process_group:
        b = process_group.encode()
        parts += (_L[10], _v(len(b)), b)
    if seq:
        parts += (T[11], _v(seq))
    if op:
        parts += (T[12], _v(op))
    if numel:
        parts += (T[13], _v(numel))
    if not completed:
        parts += (T[14], _SMALL[0])
    if text:
        b = text.encode("utf-8", "replace")
        parts += (_L[15], _v(len(b)), b)
    if records_dropped:
        parts += (T[16], _v(records_dropped))
    if dtype:
        parts += (T[17], _v(dtype))
    if started_ns != -1:
        parts += (T[18], _v(started_ns))
    if group != -1:
        parts += (T[19], _v(group))
    if gt_count:
        parts += (T[20], _v(gt_count))
    if accepted:
        parts += (T[21], _SMALL[1])
    if loader:
        parts += (T[22], _v(loader))
    if ddp_layout:
        parts += (_L[23], _v(len(ddp_layout)), ddp_layout)
    return b"".join(parts)


def _string(field, text):
    b = text.encode("utf-8", "replace")
    return _L[field] + _v(len(b)) + b


def _packed(field, values):
    body = b"".join(_v(v) for v in values)
    return _L[field] + _v(len(body)) + body


def encode_ddp_tensor(name, kind, shape, dtype, requires_grad=True, persistent=True,
                      state_dict_aliases=0):
    """One serialized DdpTensor (proto/scenario.proto). kind: 0 parameter, 1 buffer;
    requires_grad is written for parameters only, persistent for buffers only (where false)."""
    parts = []
    if name:
        parts.append(_string(1, name))
    if kind:
        parts += (_T[2], _v(kind))
    if shape:
        parts.append(_packed(3, shape))
    if dtype:
        parts += (_T[4], _v(dtype))
    if kind == 0 and not requires_grad:
        parts += (_T[5], _SMALL[0])
    if kind == 1 and not persistent:
        parts += (_T[6], _SMALL[0])
    if state_dict_aliases:
        parts += (_T[8], _v(state_dict_aliases))
    return b"".join(parts)


def encode_ddp_bucket(parameters, numel, dtype):
    """One serialized DdpLayout.Bucket: parameter positions, elements, dtype."""
    parts = []
    if parameters:
        parts.append(_packed(1, parameters))
    if numel:
        parts += (_T[2], _v(numel))
    if dtype:
        parts += (_T[3], _v(dtype))
    return b"".join(parts)


def encode_ddp_layout(ddp=0, rebuilt=False, process_group="", bucket_cap_bytes=0,
                      first_bucket_bytes=0, find_unused_parameters=False, broadcast_buffers=True,
                      module_class="", tensors=(), buckets=(), grad_ready_order=(),
                      static_graph=False, path="", world_size=0, ready_order_recorded=False,
                      comm_hook=""):
    """One serialized DdpLayout (proto/trace.proto). tensors: encode_ddp_tensor results;
    buckets: encode_ddp_bucket results; comm_hook: the job's own communication hook."""
    parts = []
    if ddp:
        parts += (_T[1], _v(ddp))
    if rebuilt:
        parts += (_T[2], _SMALL[1])
    if process_group:
        parts.append(_string(3, process_group))
    if bucket_cap_bytes:
        parts += (_T[4], _v(bucket_cap_bytes))
    if first_bucket_bytes:
        parts += (_T[5], _v(first_bucket_bytes))
    if find_unused_parameters:
        parts += (_T[6], _SMALL[1])
    if not broadcast_buffers:
        parts += (_T[7], _SMALL[0])
    if module_class:
        parts.append(_string(8, module_class))
    for t in tensors:
        parts += (_L[9], _v(len(t)), t)
    for b in buckets:
        parts += (_L[10], _v(len(b)), b)
    if grad_ready_order:
        parts.append(_packed(11, grad_ready_order))
    if static_graph:
        parts += (_T[12], _SMALL[1])
    if path:
        parts.append(_string(13, path))
    if world_size:
        parts += (_T[14], _v(world_size))
    if ready_order_recorded:
        parts += (_T[15], _SMALL[1])
    if comm_hook:
        parts.append(_string(16, comm_hook))
    return b"".join(parts)


def encode_header(rank, world_size, backend, build_id, scenario=b"", scenario_path="", seed=0,
                  clock="steady"):
    """One serialized TraceHeader. `scenario` is a serialized petrsim.Scenario (embedded as is)."""
    parts = [_T[1], _v(TRACE_FORMAT_VERSION)]
    if scenario:
        parts += (_L[2], _v(len(scenario)), scenario)
    for field, text in ((3, scenario_path),):
        if text:
            b = text.encode()
            parts += (_L[field], _v(len(b)), b)
    if seed:
        parts += (_T[4], _v(seed))
    if rank:
        parts += (_T[5], _v(rank))
    if world_size:
        parts += (_T[6], _v(world_size))
    for field, text in ((7, backend), (8, build_id), (9, clock)):
        if text:
            b = text.encode()
            parts += (_L[field], _v(len(b)), b)
    return b"".join(parts)


def delimited(message):
    """The message with its length prefix, as one rank file holds it."""
    return _v(len(message)) + message


# ------------------------------------------------------------------------------------------------
# Decoding (tests, and the scenario of a petrsim trace header).

class DecodeError(ValueError):
    pass


def read_varint(data, pos):
    result = shift = 0
    while True:
        if pos >= len(data):
            raise DecodeError("varint cut short at byte {}".format(pos))
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise DecodeError("varint longer than 10 bytes at byte {}".format(pos))


def fields(message):
    """(field number, value) pairs of one message: ints for varints, bytes for length-delimited."""
    pos = 0
    out = []
    while pos < len(message):
        key, pos = read_varint(message, pos)
        field, wire = key >> 3, key & 7
        if wire == _WIRE_VARINT:
            value, pos = read_varint(message, pos)
        elif wire == _WIRE_LEN:
            size, pos = read_varint(message, pos)
            if pos + size > len(message):
                raise DecodeError("field {} cut short".format(field))
            value = bytes(message[pos:pos + size])
            pos += size
        elif wire == 1:
            value = bytes(message[pos:pos + 8])
            pos += 8
        elif wire == 5:
            value = bytes(message[pos:pos + 4])
            pos += 4
        else:
            raise DecodeError("unknown wire type {} of field {}".format(wire, field))
        out.append((field, value))
    return out


def _signed(value):
    return value - (1 << 64) if value >= 1 << 63 else value


_EVENT_DEFAULTS = dict(kind=0, worker=-1, start_ns=0, end_ns=0, iteration=0, slot=0, index=-1,
                       final_index=-1, attempts=0, process_group="", seq=0, op=0, numel=0,
                       completed=True, text="", records_dropped=0, dtype=0, started_ns=-1,
                       group=-1, gt_count=0, accepted=False, loader=0, ddp_layout=b"")
_EVENT_FIELDS = {1: "kind", 2: "worker", 3: "start_ns", 4: "end_ns", 5: "iteration", 6: "slot",
                 7: "index", 8: "final_index", 9: "attempts", 10: "process_group", 11: "seq",
                 12: "op", 13: "numel", 14: "completed", 15: "text", 16: "records_dropped",
                 17: "dtype", 18: "started_ns", 19: "group", 20: "gt_count", 21: "accepted",
                 22: "loader", 23: "ddp_layout"}
_SIGNED = {"worker", "start_ns", "end_ns", "index", "final_index", "started_ns", "group"}


def decode_event(message):
    event = dict(_EVENT_DEFAULTS)
    for field, value in fields(message):
        name = _EVENT_FIELDS.get(field)
        if name is None:
            continue
        if isinstance(value, bytes) != (name in ("process_group", "text", "ddp_layout")):
            raise DecodeError("TraceEvent field {} ({}) has the wrong wire type".format(
                field, name))
        if name == "ddp_layout":
            event[name] = value  # decode_ddp_layout reads it
            continue
        if name in ("process_group", "text"):
            value = value.decode("utf-8", "replace")
        elif name in ("completed", "accepted"):
            value = bool(value)
        elif name in _SIGNED:
            value = _signed(value)
        event[name] = value
    return event


def _unpacked(value):
    """A repeated varint field's values: packed (bytes) or one unpacked value (int)."""
    if isinstance(value, int):
        return [value]
    out, pos = [], 0
    while pos < len(value):
        v, pos = read_varint(value, pos)
        out.append(v)
    return out


def decode_ddp_tensor(message):
    t = dict(name="", kind=0, shape=[], dtype=0, requires_grad=True, persistent=True,
             state_dict_aliases=0)
    for field, value in fields(message):
        if field == 1:
            t["name"] = value.decode("utf-8", "replace")
        elif field == 2:
            t["kind"] = value
        elif field == 3:
            t["shape"] += _unpacked(value)
        elif field == 4:
            t["dtype"] = value
        elif field == 5:
            t["requires_grad"] = bool(value)
        elif field == 6:
            t["persistent"] = bool(value)
        elif field == 8:
            t["state_dict_aliases"] = value
    return t


def decode_ddp_layout(message):
    """A DdpLayout's fields as a dict (tensors and buckets as dicts)."""
    layout = dict(ddp=0, rebuilt=False, process_group="", bucket_cap_bytes=0,
                  first_bucket_bytes=0, find_unused_parameters=False, broadcast_buffers=True,
                  module_class="", tensors=[], buckets=[], grad_ready_order=[],
                  static_graph=False, path="", world_size=0, ready_order_recorded=False,
                  comm_hook="")
    names = {1: "ddp", 2: "rebuilt", 3: "process_group", 4: "bucket_cap_bytes",
             5: "first_bucket_bytes", 6: "find_unused_parameters", 7: "broadcast_buffers",
             8: "module_class", 12: "static_graph", 13: "path", 14: "world_size",
             15: "ready_order_recorded", 16: "comm_hook"}
    for field, value in fields(message):
        if field == 9:
            layout["tensors"].append(decode_ddp_tensor(value))
        elif field == 10:
            bucket = dict(parameters=[], numel=0, dtype=0)
            for f, v in fields(value):
                if f == 1:
                    bucket["parameters"] += _unpacked(v)
                elif f == 2:
                    bucket["numel"] = v
                elif f == 3:
                    bucket["dtype"] = v
            layout["buckets"].append(bucket)
        elif field == 11:
            layout["grad_ready_order"] += _unpacked(value)
        elif field in names:
            name = names[field]
            if name in ("process_group", "module_class", "path", "comm_hook"):
                value = value.decode("utf-8", "replace")
            elif isinstance(layout[name], bool):
                value = bool(value)
            layout[name] = value
    return layout


def decode_header(message):
    header = dict(format_version=0, scenario=b"", scenario_path="", seed=0, rank=0,
                  world_size=0, backend="", build_id="", clock="")
    names = {1: "format_version", 2: "scenario", 3: "scenario_path", 4: "seed", 5: "rank",
             6: "world_size", 7: "backend", 8: "build_id", 9: "clock"}
    for field, value in fields(message):
        name = names.get(field)
        if name is None:
            continue
        if name in ("scenario_path", "backend", "build_id", "clock"):
            value = value.decode("utf-8", "replace")
        header[name] = value
    return header


def read_rank_file(path):
    """(header dict, [event dicts], error or None): a file cut short is read up to the cut."""
    with open(path, "rb") as f:
        data = f.read()
    messages = []
    pos = 0
    error = None
    while pos < len(data):
        try:
            size, body = read_varint(data, pos)
        except DecodeError as e:
            error = "{}: {}".format(path, e)
            break
        if body + size > len(data):
            error = "{}: message at byte {} cut short".format(path, pos)
            break
        messages.append(data[body:body + size])
        pos = body + size
    if not messages:
        raise DecodeError("{}: empty: expected a TraceHeader first".format(path))
    header = decode_header(messages[0])
    if header["format_version"] == 0:
        raise DecodeError("{}: not a petrsim trace: its first message has no format_version"
                          .format(path))
    return header, [decode_event(m) for m in messages[1:]], error
