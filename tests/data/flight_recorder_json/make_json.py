#!/usr/bin/env python3
"""Writes the JSON form of a Flight Recorder case (PyTorch's JSON dump layout: the same keys as
the pickle, tuples as lists) from the pickles in tests/data/flight_recorder/nvrx (a copy of ../shared/fixtures), so the tests can check
that `petrsim diagnose` reads both formats to the same diagnosis. Run once from the project
root; the output is committed:
    python3 tests/data/flight_recorder_json/make_json.py lock_gil_2nd
"""
import json
import os
import pickle
import sys

case = sys.argv[1]
source = os.path.join("tests", "data", "flight_recorder", "nvrx", case)
target = os.path.join("tests", "data", "flight_recorder_json", case)
os.makedirs(target, exist_ok=True)
for name in sorted(os.listdir(source)):
    if not name.startswith("_dump_"):
        continue
    with open(os.path.join(source, name), "rb") as f:
        dump = pickle.load(f)
    with open(os.path.join(target, name + ".json"), "w") as f:
        json.dump(dump, f, indent=1, sort_keys=False)
        f.write("\n")
