#!/usr/bin/python3
"""Every DataLoader is recorded, and workers started by forkserver or spawn are.

tests/probe/stall_job.py under torchrun, 2 ranks over Gloo, the probe installed by the script's
first lines (so the fork server and each spawned worker import the script again, with the install
line, and must not open the rank's trace there): a first DataLoader (2 forkserver workers,
batches of 2 over items 0..63) for 4 iterations, a second (1 spawn worker, batches of 3 over items
0..8) run through once, then the first again for 2 iterations. Checked on every rank:
- the header is whole and the first events are there (nothing truncated the file);
- loader 0: for batches 0..3 the sampler draws and completed loads of slots 0 and 1, indices
  2b and 2b+1, from workers 0 and 1, and a batch_ready from a worker for each; the second pass
  (a new iterator) continues the batch numbers: batches 4 and 5 load indices 0..3;
- loader 1 (the events' `loader` field): draws, loads by worker 0 and batch_ready for batches
  0..2, slots 0..2, indices 3b..3b+2, and 3 data waits;
- the training iterations are loader 0's only: iteration events 0..5, once each;
- `petrsim diagnose` finds no stuck collective (exit 0).

  python3 tests/probe/test_probe_loaders.py --petrsim build/petrsim [--keep]
"""

import os

import probe_testlib as lib
from probe_testlib import Failure, wire


def by_key(events, kind, loader):
    out = {}
    for e in events:
        if e["kind"] == kind and e["loader"] == loader:
            out.setdefault((e["iteration"], e["slot"]), []).append(e)
    return out


def check_batches(rank, events, loader, batches, per_batch, workers, first_index=None):
    """Draws, completed worker loads and batch_ready for `batches` of `loader`: slot s of batch b
    has index first_index(b) + s."""
    first_index = first_index or (lambda b: per_batch * b)
    draws = by_key(events, wire.SAMPLER_DRAW, loader)
    loads = by_key(events, wire.LOAD, loader)
    ready = {e["iteration"] for e in events if e["kind"] == wire.BATCH_READY
             and e["loader"] == loader and e["worker"] >= 0}
    for b in batches:
        for s in range(per_batch):
            index = first_index(b) + s
            if not any(e["index"] == index for e in draws.get((b, s), [])):
                raise Failure("rank {} loader {}: no sampler draw of index {} for batch {} slot {}"
                              .format(rank, loader, index, b, s))
            matching = [e for e in loads.get((b, s), []) if e["index"] == index]
            if not matching:
                raise Failure("rank {} loader {}: no load of index {} for batch {} slot {}; loads "
                              "there: {}".format(rank, loader, index, b, s, loads.get((b, s))))
            for e in matching:
                if not e["completed"] or e["worker"] not in workers or e["final_index"] != index:
                    raise Failure("rank {} loader {}: load {} (expected completed, worker in {}, "
                                  "final index {})".format(rank, loader, e, workers, index))
        if b not in ready:
            raise Failure("rank {} loader {}: no batch_ready from a worker for batch {}".format(
                rank, loader, b))


def body(args, tmp):
    trace_dir = os.path.join(tmp, "traces")
    code, output, seconds = lib.launch(
        tmp, ["--trace-dir", trace_dir, "--start-method", "forkserver", "--second-loader",
              "--second-start-method", "spawn", "--iterations", "4", "--more-iterations", "2"],
        name="loaders", script=lib.STALL_JOB, timeout_s=90)
    if code != 0 or "STALL_JOB_DONE" not in output:
        raise Failure("the job failed (exit {}):\n{}".format(code, output[-3000:]))
    traces = lib.read_traces(trace_dir, 2)
    for rank, (header, events) in traces.items():
        if header["backend"] != "gloo" or not events:
            raise Failure("rank {}: header {} with {} events".format(rank, header, len(events)))
        startup = [e for e in events if e["kind"] == wire.COLLECTIVE]
        if not startup or startup[0]["seq"] != 1:
            raise Failure("rank {}: the first collective recorded is not seq 1 (the file was "
                          "truncated?): {}".format(rank, startup[:1]))
        check_batches(rank, events, 0, range(4), 2, (0, 1))
        check_batches(rank, events, 0, (4, 5), 2, (0, 1), first_index=lambda b: 2 * (b - 4))
        check_batches(rank, events, 1, range(3), 3, (0,))
        waits = [e for e in events if e["kind"] == wire.DATA_WAIT and e["loader"] == 1]
        if sorted(e["iteration"] for e in waits) != [0, 1, 2]:
            raise Failure("rank {}: loader 1's data waits {}".format(
                rank, [e["iteration"] for e in waits]))
        iterations = sorted(e["iteration"] for e in events if e["kind"] == wire.ITERATION)
        if iterations != list(range(6)):
            raise Failure("rank {}: iteration events {}, expected 0..5 (loader 0's batches only)"
                          .format(rank, iterations))
    _, text, _ = lib.petrsim(args, "diagnose", trace_dir, expect=(0,))
    if "no stuck collective" not in text:
        raise Failure("petrsim diagnose on a job that completed:\n" + text)
    print("  forkserver and spawn workers recorded; loader 0 batches 0..5, loader 1 batches 0..2; "
          "iterations 0..5 ({:.0f} s job)".format(seconds))


if __name__ == "__main__":
    lib.run_test("probe: every DataLoader, forkserver and spawn workers", body)
