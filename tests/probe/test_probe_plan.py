#!/usr/bin/python3
"""The probe's recorded collectives equal `petrsim plan` on the scenario: op, numel, dtype, seq.

The reference job runs under torchrun with the probe installed by its one line (`--trace-dir`).
Its collectives are those of real PyTorch: the sampler's seed broadcast, DistributedDataParallel's
construction (parameter count allgather, shape broadcast, module state broadcast), its gradient
bucket all_reduces (one bucket in iteration 0, the bucket rebuild's two broadcasts in iteration 1,
the rebuilt buckets after), the loss's scalar all_reduces and a logger reduce every 10 iterations.
For every rank, the probe's collective events, ordered by sequence number, must be exactly the
plan's list (`petrsim plan --iterations N --json`, N the job's iterations): same count, and each
with the same process group, seq, op, numel, dtype and iteration; all completed. DDP's gradient
buckets are asynchronous, recorded when the probe first sees them complete (no done-callback):
each must end after it starts and no later than the iteration it belongs to (the backward pass
that waited for it is in that iteration), so a probe that saw them only at the next batch fails.

  python3 tests/probe/test_probe_plan.py --petrsim build/petrsim [--keep]
"""

import os

import probe_testlib as lib
from probe_testlib import Failure, wire


def body(args, tmp):
    iterations = lib.job_iterations()
    plan = lib.petrsim_json(args, "plan", lib.SCENARIO, "--iterations", str(iterations), "--json")
    want = [(c["process_group"], c["seq"], c["op"].lower(), c["numel"], c["dtype"],
             c["iteration"]) for c in plan["collectives"]]
    trace_dir = os.path.join(tmp, "traces")
    code, output, _ = lib.launch(tmp, ["--trace-dir", trace_dir], nproc=2)
    if code != 0:
        raise Failure("the job failed (exit {}):\n{}".format(code, output[-3000:]))
    traces = lib.read_traces(trace_dir, 2)
    for rank, (_, events) in traces.items():
        calls = sorted((e for e in events if e["kind"] == wire.COLLECTIVE),
                       key=lambda e: (e["process_group"], e["seq"]))
        pending = [e for e in calls if not e["completed"]]
        if pending:
            raise Failure("rank {}: {} collectives recorded as never completed in a job that "
                          "completed".format(rank, len(pending)))
        iteration_end = {e["iteration"]: e["end_ns"] for e in events
                         if e["kind"] == wire.ITERATION}
        buckets = [e for e in calls if e["worker"] == -2]
        if not buckets:
            raise Failure("rank {}: no DDP gradient bucket (an asynchronous collective, worker "
                          "-2) recorded".format(rank))
        for e in buckets:
            end = iteration_end.get(e["iteration"])
            if not e["start_ns"] <= e["end_ns"] or end is None or e["end_ns"] > end:
                raise Failure("rank {}: DDP bucket seq {} of iteration {}: start {} end {}, "
                              "the iteration ends at {}: expected start <= end <= the "
                              "iteration's end".format(rank, e["seq"], e["iteration"],
                                                       e["start_ns"], e["end_ns"], end))
        got = [(e["process_group"], e["seq"], lib.OP_NAMES[e["op"]], e["numel"],
                lib.DTYPE_NAMES[e["dtype"]], e["iteration"]) for e in calls]
        if got != want:
            lines = []
            for i in range(max(len(got), len(want))):
                g = got[i] if i < len(got) else None
                w = want[i] if i < len(want) else None
                if g != w:
                    lines.append("#{}: probe {} plan {}".format(i, g, w))
            raise Failure("rank {}: {} recorded collectives, the plan has {}; first differences "
                          "(group, seq, op, numel, dtype, iteration):\n  {}".format(
                              rank, len(got), len(want), "\n  ".join(lines[:12])))
    print("  {} collectives per rank equal petrsim plan (startup {}, {} iterations); DDP's "
          "buckets end within their iteration".format(
              len(want), sum(1 for c in plan["collectives"] if c["section"] == "startup"),
              iterations))


if __name__ == "__main__":
    lib.run_test("probe collectives == petrsim plan", body)
