#!/usr/bin/python3
"""`petrsim diagnose` of probe traces where the missing rank was killed (issue 28, points 1 and 2).

Two ranks' traces, written with the probe's own encoder (probe/petrsim_probe/wire.py) as the probe
writes them: rank 0 pends in default_pg seq 5; rank 1 completed seq 1..4 and its trace ends with
the probe's process_exit "killed by SIGTERM" (what its SIGTERM handler records). The diagnosis must
say rank 1 was killed, not that it "recorded neither a spinning worker nor a death"; with
--scenario, the release the probe's header names (torch 1.13.1) is the one used, and said.
Standard library only (no run of a job).

  python3 tests/probe/test_probe_killed_rank.py --petrsim build/petrsim
"""

import os

import probe_testlib as lib
from probe_testlib import Failure, wire


def write_rank(trace_dir, rank, pending_seq, killed_at_ns):
    build_id = "petrsim_probe 0.1 (torch 1.13.1)"
    with open(os.path.join(trace_dir, "rank_{}.pbtrace".format(rank)), "wb") as f:
        f.write(wire.delimited(wire.encode_header(rank, 2, "nccl", build_id, clock="steady")))
        t = 10_000_000_000
        for seq in range(1, 5):
            f.write(wire.delimited(wire.encode_event(
                wire.COLLECTIVE, t, t + 1000, process_group="default_pg", seq=seq, numel=1)))
            t += 1_000_000
        if pending_seq:
            f.write(wire.delimited(wire.encode_event(
                wire.COLLECTIVE, t, t + 1_800_000_000_000, process_group="default_pg", seq=pending_seq,
                numel=1, completed=False)))
        if killed_at_ns:
            f.write(wire.delimited(wire.encode_event(
                wire.PROCESS_EXIT, killed_at_ns, killed_at_ns, text="killed by SIGTERM")))


def body(args, tmp):
    trace_dir = os.path.join(tmp, "traces")
    os.makedirs(trace_dir)
    write_rank(trace_dir, 0, 5, 0)
    write_rank(trace_dir, 1, 0, 1_810_010_000_000)
    _, out, _ = lib.petrsim(args, "diagnose", trace_dir, expect=(1,))
    want = "cause: rank 1 never reached it: it was killed by SIGTERM at 1800.010 s (times from the job's first " \
           "recorded event)"
    if want not in out:
        raise Failure("diagnose does not say rank 1 was killed:\n" + out)
    if "neither a spinning worker nor a death" in out:
        raise Failure("diagnose says the killed rank recorded no death:\n" + out)
    scenario = os.path.join(lib.REPO, "scenarios", "tiny.pbtxt")
    _, out, _ = lib.petrsim(args, "diagnose", trace_dir, "--scenario", scenario, expect=(1,))
    want = "release: the recordings say PyTorch 1.13.1 ({}: header build_id \"petrsim_probe 0.1 " \
           "(torch 1.13.1)\"), the scenario sets none (1.9 assumed, the reference job's): PyTorch 1.13 is used" \
           .format(os.path.join(trace_dir, "rank_0.pbtrace"))
    if want not in out:
        raise Failure("diagnose --scenario does not use the probe's release:\n" + out)
    print("  a killed rank is reported as killed; the probe's torch release is the one used")


if __name__ == "__main__":
    lib.run_test("probe traces: a rank killed by SIGTERM, the release from the header", body)
