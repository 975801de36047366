#!/usr/bin/python3
"""Asynchronous collectives (`async_op=True`) are recorded without a done-callback: the probe
polls their Work where the main thread passes through it, and what never completes is written
completed=false when the probe ends.

Two ranks, started directly (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set), Gloo, the probe
installed by its one line. Each rank: an async all_reduce it waits for, then a blocking one (seq
2, whose wrapper polls first: seq 1 must be recorded before it and end before it starts); two
async broadcasts it waits for, then a backward pass (a poll point) and the time T after it, then
0.3 s of sleep and a barrier (seq 5): the broadcasts must end by T, so a probe that saw them only
at the barrier fails. Rank 0 then issues an all_reduce rank 1 never joins (seq 6) and uninstalls
the probe: seq 6 must be written completed=false; rank 1 has no seq 6.

  python3 tests/probe/test_probe_async.py --petrsim build/petrsim [--keep]
"""

import os
import sys

import probe_testlib as lib
from probe_testlib import Failure, wire

RANK_CODE = r'''
import os, sys, time
sys.path.insert(0, sys.argv[1])
import petrsim_probe
petrsim_probe.install(sys.argv[2])
import torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
work = dist.all_reduce(torch.ones(4), async_op=True)  # seq 1
work.wait()
dist.all_reduce(torch.ones(1))  # seq 2
works = [dist.broadcast(torch.ones(3, dtype=torch.float64), src=0, async_op=True)
         for _ in range(2)]  # seq 3, 4
for w in works:
    w.wait()
x = torch.ones(2, requires_grad=True)
(x * 2).sum().backward()
after_backward = time.monotonic_ns()
time.sleep(0.3)
dist.barrier()  # seq 5
done_marker = os.path.join(sys.argv[3], "rank0_done")
if rank == 0:
    stuck = dist.all_reduce(torch.ones(2), async_op=True)  # seq 6: rank 1 never joins
    petrsim_probe.uninstall()
    open(done_marker, "w").close()
else:
    petrsim_probe.uninstall()
    deadline = time.monotonic() + 30
    while not os.path.exists(done_marker) and time.monotonic() < deadline:
        time.sleep(0.05)
print("AFTER_BACKWARD", after_backward, flush=True)
os._exit(0)
'''


def body(args, tmp):
    trace_dir = os.path.join(tmp, "traces")
    outputs = []
    results = lib.run_ranks([sys.executable, "-c", RANK_CODE, lib.PROBE_DIR, trace_dir, tmp], 2,
                            os.environ, 90, "the async job")
    for rank, (code, out) in enumerate(results):
        if code != 0 or "AFTER_BACKWARD" not in out:
            raise Failure("rank {} failed (exit {}):\n{}".format(rank, code, out[-3000:]))
        outputs.append(int(out.split("AFTER_BACKWARD")[1].split()[0]))
    traces = lib.read_traces(trace_dir, 2)
    for rank, (_, events) in traces.items():
        calls = [e for e in events if e["kind"] == wire.COLLECTIVE]
        by_seq = {}
        for position, e in enumerate(calls):
            if e["process_group"] != "default_pg":
                raise Failure("rank {}: collective in group {!r}, expected default_pg".format(
                    rank, e["process_group"]))
            if e["seq"] in by_seq:
                raise Failure("rank {}: seq {} recorded twice".format(rank, e["seq"]))
            by_seq[e["seq"]] = (position, e)
        want = {1: ("allreduce", 4, "float32"), 2: ("allreduce", 1, "float32"),
                3: ("broadcast", 3, "float64"), 4: ("broadcast", 3, "float64"),
                5: ("barrier", 0, "float32")}
        if rank == 0:
            want[6] = ("allreduce", 2, "float32")
        if sorted(by_seq) != sorted(want):
            raise Failure("rank {}: recorded seqs {}, expected {}".format(
                rank, sorted(by_seq), sorted(want)))
        for seq, (op, numel, dtype) in want.items():
            e = by_seq[seq][1]
            got = (lib.OP_NAMES[e["op"]], e["numel"], lib.DTYPE_NAMES[e["dtype"]])
            if got != (op, numel, dtype):
                raise Failure("rank {}: seq {}: (op, numel, dtype) {}, expected {}".format(
                    rank, seq, got, (op, numel, dtype)))
            if not e["start_ns"] <= e["end_ns"]:
                raise Failure("rank {}: seq {} ends before it starts".format(rank, seq))
            should_complete = seq != 6
            if e["completed"] != should_complete:
                raise Failure("rank {}: seq {}: completed={}, expected {}".format(
                    rank, seq, e["completed"], should_complete))
        first, second = by_seq[1], by_seq[2]
        if not (first[0] < second[0] and first[1]["end_ns"] <= second[1]["start_ns"]):
            raise Failure("rank {}: the async all_reduce (seq 1) must be recorded before the "
                          "blocking one after it and end before it starts (end {}, next start "
                          "{})".format(rank, first[1]["end_ns"], second[1]["start_ns"]))
        for seq in (3, 4):
            end = by_seq[seq][1]["end_ns"]
            if end > outputs[rank]:
                raise Failure("rank {}: async broadcast seq {} recorded as ending at {}, after "
                              "the backward pass that followed its wait returned ({}): the "
                              "backward poll did not see it".format(rank, seq, end,
                                                                    outputs[rank]))
    print("  async collectives recorded at the next poll point (collective, backward); the one "
          "never joined written completed=false")


if __name__ == "__main__":
    lib.run_test("probe: asynchronous collectives", body)
