#!/usr/bin/env python3
"""Writes a SYNTHETIC JSON form of a Flight Recorder case: each real 2.9 pickle of
tests/data/flight_recorder/nvrx/<case> (a copy of ../shared/fixtures) loaded and passed through
Python's json.dump as it is. This is NOT what PyTorch writes. PyTorch's JSON writer (dump_json in
torch/csrc/distributed/c10d/FlightRecorder.cpp / FlightRecorderDetail.hpp, pytorch/pytorch)
writes the pg_status values with std::to_string (getPgStatusJson returns a
std::map<std::string, std::map<std::string, std::string>>), so they are decimal strings, where
these files have the pickle's ints; it writes time_discovered_*_ns as 0 where these have null;
it sorts the keys (nlohmann::json objects), and no release wrote a JSON dump of version "2.9"
with nccl_version (2.7's get_dump_json writes nccl_version, 2.10's dump_json comm_lib_version).
The writer's own layout is in ../flight_recorder_json/<version>/json, written by
make_versioned.py from the writer's source.

What these files test: that a JSON dump holding the pickle's types (ints in pg_status) reads to
the same diagnosis as the pickles, and they seed the fuzzer's corpus. Run once from the project
root; the output is committed:
    python3 tests/data/flight_recorder_json/make_synthetic_json.py lock_gil_2nd
writes tests/data/flight_recorder_json/synthetic_<case>/_dump_N.json.
"""
import json
import os
import pickle
import sys

case = sys.argv[1]
source = os.path.join("tests", "data", "flight_recorder", "nvrx", case)
target = os.path.join("tests", "data", "flight_recorder_json", "synthetic_" + case)
os.makedirs(target, exist_ok=True)
for name in sorted(os.listdir(source)):
    if not name.startswith("_dump_"):
        continue
    with open(os.path.join(source, name), "rb") as f:
        dump = pickle.load(f)
    with open(os.path.join(target, name + ".json"), "w") as f:
        json.dump(dump, f, indent=1, sort_keys=False)
        f.write("\n")
