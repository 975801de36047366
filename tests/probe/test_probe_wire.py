#!/usr/bin/python3
"""The probe's hand-written wire format (probe/petrsim_probe/wire.py) against proto/trace.proto, and
its encoding of the stall event and the loader field.

- every TraceEventKind value of trace.proto is wire.py's constant of the same name (upper case),
  and every TraceEvent field number is the name wire.py decodes it as;
- a stall event with every field set (the loader too) decodes to what was encoded; fields equal
  to their defaults are left out (loader 0, index -1); a negative index is a 10-byte varint;
- `petrsim export` reads a rank file of those events written as the probe writes it (a header,
  then length-delimited events), the stall as a slice carrying its stack;
- a ddp_layout event (DdpLayout with its tensors and buckets; DdpLayout's field numbers are
  trace.proto's) decodes to what was encoded, and `petrsim export` / `petrsim diagnose` read a
  trace holding it; `petrsim import probe-trace` turns it into plan.ddp.
Standard library only (no torch, no run of a job).

  python3 tests/probe/test_probe_wire.py --petrsim build/petrsim [--keep]
"""

import json
import os
import re

import probe_testlib as lib
from probe_testlib import Failure, wire

PROTO = os.path.join(lib.REPO, "proto", "trace.proto")


def proto_kinds_and_fields():
    with open(PROTO) as f:
        text = re.sub(r"//[^\n]*", "", f.read())
    enum = re.search(r"enum TraceEventKind \{(.*?)\}", text, re.S).group(1)
    kinds = {name: int(value) for name, value in re.findall(r"(\w+)\s*=\s*(\d+)\s*;", enum)}
    message = re.search(r"message TraceEvent \{(.*?)\n\}", text, re.S).group(1)
    fields = {int(number): name for name, number in
              re.findall(r"optional\s+[\w.]+\s+(\w+)\s*=\s*(\d+)", message)}
    return kinds, fields


def body(args, tmp):
    kinds, fields = proto_kinds_and_fields()
    for name, value in kinds.items():
        if getattr(wire, name.upper(), None) != value:
            raise Failure("trace.proto's TraceEventKind {} = {}; wire.{} is {}".format(
                name, value, name.upper(), getattr(wire, name.upper(), None)))
    if wire._EVENT_FIELDS != fields:
        raise Failure("trace.proto's TraceEvent fields {} != wire.py's {}".format(
            fields, wire._EVENT_FIELDS))
    if wire.STALL != 15:
        raise Failure("wire.STALL is {}, trace.proto says 15".format(wire.STALL))

    stack = "/usr/lib/python3.11/multiprocessing/process.py:108 in run\n/job/data.py:41 in __getitem__"
    stall = dict(kind=wire.STALL, start_ns=1000, end_ns=2_000_001_000, worker=1, iteration=7, slot=1,
                 index=13, final_index=22, attempts=3, text=stack, loader=2)
    message = wire.encode_event(**stall)
    decoded = wire.decode_event(message)
    for key, value in stall.items():
        if decoded[key] != value:
            raise Failure("stall event: {} decoded as {!r}, encoded {!r}".format(
                key, decoded[key], value))
    numbers = [field for field, _ in wire.fields(message)]
    if numbers != [1, 3, 4, 2, 5, 6, 7, 8, 9, 15, 22]:
        raise Failure("stall event: fields written {}".format(numbers))
    bare = wire.encode_event(wire.STALL, 5, 6, loader=0, index=-1)
    if [field for field, _ in wire.fields(bare)] != [1, 3, 4]:
        raise Failure("defaults not left out: fields {}".format(wire.fields(bare)))
    negative = wire.encode_event(wire.LOAD, 0, 0, index=-2)
    if len(negative) != 6 + 1 + 10 or wire.decode_event(negative)["index"] != -2:
        raise Failure("index -2: {} bytes, decoded {}".format(
            len(negative), wire.decode_event(negative)["index"]))

    trace_dir = os.path.join(tmp, "traces")
    os.makedirs(trace_dir)
    load = dict(kind=wire.LOAD, start_ns=1000, end_ns=3_000_000_000, worker=1, iteration=7,
                slot=1, index=13, attempts=3, completed=False, loader=2)
    with open(os.path.join(trace_dir, "rank_0.pbtrace"), "wb") as f:
        f.write(wire.delimited(wire.encode_header(0, 1, "gloo", "test", clock="steady")))
        f.write(wire.delimited(message))
        f.write(wire.delimited(wire.encode_event(**load)))
    out = os.path.join(tmp, "export.json")
    lib.petrsim(args, "export", trace_dir, "--perfetto", out)
    with open(out) as f:
        exported = json.load(f)
    events = exported["traceEvents"] if isinstance(exported, dict) else exported
    stalls = [e for e in events if e.get("cat") == "stall"]
    if len(stalls) != 1 or stalls[0].get("ph") != "X" or stalls[0]["args"].get("stack") != stack:
        raise Failure("petrsim export of the probe's stall: {}".format(stalls))
    check_ddp_layout(args, tmp)
    print("  trace.proto and wire.py agree ({} kinds, {} fields); the stall event round-trips; "
          "petrsim export reads it; the ddp_layout event round-trips and is imported".format(
              len(kinds), len(fields)))


def check_ddp_layout(args, tmp):
    with open(PROTO) as f:
        text = re.sub(r"//[^\n]*", "", f.read())
    message = re.search(r"message DdpLayout \{(.*?)\n\}", text, re.S).group(1)
    numbers = {name: int(number) for name, number in
               re.findall(r"(?:optional|repeated)\s+[\w.]+\s+(\w+)\s*=\s*(\d+)", message)}
    want = dict(ddp=1, rebuilt=2, process_group=3, bucket_cap_bytes=4, first_bucket_bytes=5,
                find_unused_parameters=6, broadcast_buffers=7, module_class=8, tensors=9,
                buckets=10, grad_ready_order=11, static_graph=12, path=13, world_size=14,
                ready_order_recorded=15, comm_hook=16, parameters=1, numel=2, dtype=3)
    if numbers != want:
        raise Failure("trace.proto's DdpLayout fields {} != wire.py's {}".format(numbers, want))
    tensors = [wire.encode_ddp_tensor("fc.weight", 0, [8, 16], 0),
               wire.encode_ddp_tensor("emb.weight", 0, [4], 3, requires_grad=False,
                                      state_dict_aliases=2),
               wire.encode_ddp_tensor("fc.bias", 0, [8], 0),
               wire.encode_ddp_tensor("steps", 1, [], 5, persistent=False)]
    # The two parameters that require grad (fc.weight, fc.bias) ready in reverse: a valid order;
    # a first bucket of 2 MiB (not the default).
    layout = dict(ddp=1, rebuilt=False, process_group="pg_7", bucket_cap_bytes=262144,
                  first_bucket_bytes=2097152, find_unused_parameters=True,
                  broadcast_buffers=False, module_class="Net", tensors=tensors,
                  buckets=[wire.encode_ddp_bucket([1, 0], 136, 0)], grad_ready_order=[1, 0],
                  static_graph=False, path="hook", world_size=2, ready_order_recorded=True,
                  comm_hook="fp16_compress_hook")
    message = wire.encode_event(wire.DDP_LAYOUT, 7, 7, ddp_layout=wire.encode_ddp_layout(**layout))
    event = wire.decode_event(message)
    decoded = wire.decode_ddp_layout(event["ddp_layout"])
    for key, value in layout.items():
        if key in ("tensors", "buckets"):
            continue
        if decoded[key] != value:
            raise Failure("ddp_layout: {} decoded as {!r}, encoded {!r}".format(
                key, decoded[key], value))
    got = [(t["name"], t["kind"], t["shape"], t["dtype"], t["requires_grad"], t["persistent"],
            t["state_dict_aliases"]) for t in decoded["tensors"]]
    if got != [("fc.weight", 0, [8, 16], 0, True, True, 0),
               ("emb.weight", 0, [4], 3, False, True, 2), ("fc.bias", 0, [8], 0, True, True, 0),
               ("steps", 1, [], 5, True, False, 0)]:
        raise Failure("ddp_layout tensors decoded as {}".format(got))
    if decoded["buckets"] != [dict(parameters=[1, 0], numel=136, dtype=0)]:
        raise Failure("ddp_layout buckets decoded as {}".format(decoded["buckets"]))
    trace_dir = os.path.join(tmp, "layout_traces")
    os.makedirs(trace_dir)
    for rank in range(2):
        with open(os.path.join(trace_dir, "rank_{}.pbtrace".format(rank)), "wb") as f:
            f.write(wire.delimited(wire.encode_header(rank, 2, "gloo",
                                                      "petrsim_probe test (torch 2.1.0)")))
            f.write(wire.delimited(message))
    lib.petrsim(args, "export", trace_dir, "--perfetto", os.path.join(tmp, "layout.json"))
    lib.petrsim(args, "diagnose", trace_dir)
    out = os.path.join(tmp, "layout.pbtxt")
    _, printed, _ = lib.petrsim(args, "import", "probe-trace", trace_dir, "-o", out)
    with open(out) as f:
        scenario = f.read()
    for needle in ('name: "emb.weight"', "state_dict_aliases: 2", "persistent: false",
                   'process_group: "pg_7"', "bucket_cap_mb: 0.25", "first_bucket_mb: 2\n",
                   "find_unused_parameters: true", "broadcast_buffers: false",
                   "grad_ready_order: 1\n", "grad_ready_order: 0\n", 'torch_version: "2.1"',
                   "world_size: 2"):
        if needle not in scenario:
            raise Failure("petrsim import probe-trace of the hand-written trace: no {!r} in\n{}"
                          .format(needle, scenario))
    if "communication hook on DDP 1 (fp16_compress_hook)" not in printed:
        raise Failure("petrsim import probe-trace: no note on the job's comm hook in\n{}"
                      .format(printed))


if __name__ == "__main__":
    lib.run_test("probe: wire format vs trace.proto, the stall event", body)
