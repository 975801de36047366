#!/usr/bin/python3
"""The probe's hand-written wire format (probe/petrsim_probe/wire.py) against model/trace.proto, and
its encoding of the stall event and the loader field.

- every TraceEventKind value of trace.proto is wire.py's constant of the same name (upper case),
  and every TraceEvent field number is the name wire.py decodes it as;
- a stall event with every field set (the loader too) decodes to what was encoded; fields equal
  to their defaults are left out (loader 0, index -1); a negative index is a 10-byte varint;
- `petrsim export` reads a rank file of those events written as the probe writes it (a header,
  then length-delimited events), the stall as a slice carrying its stack.
Standard library only (no torch, no run of a job).

  python3 tests/probe/test_probe_wire.py --petrsim build/petrsim [--keep]
"""

import json
import os
import re

import probe_testlib as lib
from probe_testlib import Failure, wire

PROTO = os.path.join(lib.REPO, "model", "trace.proto")


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
    print("  trace.proto and wire.py agree ({} kinds, {} fields); the stall event round-trips; "
          "petrsim export reads it".format(len(kinds), len(fields)))


if __name__ == "__main__":
    lib.run_test("probe: wire format vs trace.proto, the stall event", body)
