#!/usr/bin/python3
"""Writes the fixtures of the pickle reader's record streaming tests (tests/data/pickle_stream/).

Run with Debian's interpreter, from anywhere (plain pickle.dumps, no other module):
    /usr/bin/python3 scripts/make_pickle_stream_fixtures.py
or, for a big file to measure memory with (not committed):
    /usr/bin/python3 scripts/make_pickle_stream_fixtures.py --entries 200000 --out /tmp/fr_200k.pkl

Every file is Flight-Recorder-shaped, as PyTorch's dump_nccl_trace writes it:
  synthetic_fr_p{2,3,4,5}.pkl  {'version': '2.4', 'pg_config': {...}, 'pg_status': {...},
                      'entries': [entry, ...]} in protocols 2-5, with 2100 entries in protocol 2 and
                      1100 in the others (pickle writes a list's items in APPENDS batches of 1000)
  synthetic_fr_top_list_p2.pkl the entries alone, a bare top-level list of 1100 entry dicts
  synthetic_fr_shared_p2.pkl   an FR dict whose entries list holds the same dict objects more than once
                     ([e0, e1, e0, e2, e1, e2]): Python memoizes each and writes BINGET for the repeats
  synthetic_fr_small_p2.pkl    an FR dict of 12 entries, cut at every offset by the salvage tests
  synthetic_fr_small_p4.pkl    the same in protocol 4 (FRAME and MEMOIZE)
An entry: record_id, pg_id, process_group (a tuple), collective_seq_id, profiling_name and state
(strings shared between entries, so memoized and fetched again), input_sizes (a list of lists),
input_dtypes, duration_ms (a float or None), retired (a bool), frames (a list of frame dicts).
"""

import argparse
import os
import pickle
import random

NAMES = ["nccl:all_reduce", "nccl:all_gather", "nccl:broadcast", "nccl:reduce_scatter"]
STATES = ["completed", "scheduled", "started"]


def entry(rng, i):
    n_frames = rng.randint(0, 3)
    return {
        "record_id": i,
        "pg_id": i % 3,
        "process_group": (str(i % 3), "default_pg" if i % 3 == 0 else "tp"),
        "collective_seq_id": i // 2,
        "profiling_name": NAMES[i % len(NAMES)],
        "state": STATES[rng.randrange(len(STATES))],
        "input_sizes": [[rng.randint(1, 4096), 8]] * rng.randint(1, 2),
        "input_dtypes": ["Float"],
        "duration_ms": None if i % 5 == 0 else rng.random() * 10,
        "retired": i % 2 == 0,
        "frames": [{"name": "step", "filename": "train.py", "line": 10 + k} for k in range(n_frames)],
    }


def dump(entries):
    return {
        "version": "2.4",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
        "pg_status": {"0": {"last_enqueued_collective": len(entries) - 1}},
        "entries": entries,
    }


def write(path, value, protocol):
    with open(path, "wb") as f:
        f.write(pickle.dumps(value, protocol=protocol))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=0)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if args.entries:
        rng = random.Random(1)
        write(args.out, dump([entry(rng, i) for i in range(args.entries)]), 2)
        return
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "pickle_stream")
    os.makedirs(out, exist_ok=True)
    for protocol in (2, 3, 4, 5):
        rng = random.Random(protocol)
        write(os.path.join(out, f"synthetic_fr_p{protocol}.pkl"), dump([entry(rng, i) for i in range(2100 if protocol == 2 else 1100)]), protocol)
    rng = random.Random(7)
    write(os.path.join(out, "synthetic_fr_top_list_p2.pkl"), [entry(rng, i) for i in range(1100)], 2)
    shared = [entry(rng, i) for i in range(3)]
    write(os.path.join(out, "synthetic_fr_shared_p2.pkl"), dump([shared[0], shared[1], shared[0], shared[2], shared[1], shared[2]]), 2)
    for protocol in (2, 4):
        rng = random.Random(11)
        write(os.path.join(out, f"synthetic_fr_small_p{protocol}.pkl"), dump([entry(rng, i) for i in range(12)]), protocol)


if __name__ == "__main__":
    main()
