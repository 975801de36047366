#!/usr/bin/python3
"""With an empty pool planted, the probe's watchdog stops the job within 10 s naming the pool that
`petrsim check` predicts; `petrsim diagnose` on its traces names the same rank and pool, and
`petrsim replay --against sim` reproduces the hang from them.

The planted reference job (tests/probe/reference_job.py --plant: the second chunk of val scene 2
has no frame with GT) runs under torchrun with the probe installed by its one line
(`--trace-dir`), the scenario embedded in the headers (from a petrsim simulator trace of
reference_job_planted.pbtxt) and watchdog bounds of 50 loads and 1 s. Checked:
- `petrsim check --json` predicts the livelock (rank, batch, slot, worker, index, pool);
- the job fails (not hangs), every rank's process has exited within 10 s of the moment the stuck
  getitem began (the probe's livelock event; CLOCK_MONOTONIC, shared by the processes of a host);
- the job's output carries the probe's error naming that rank, worker, batch, slot, index,
  sampler group and pool (dataset indices first..last);
- `petrsim diagnose --json` on the traces: cause livelock on that rank, that worker and batch,
  that pool; the stuck collective is the seq check predicts;
- `petrsim replay --against sim --json`: reproduced.

  python3 tests/probe/test_probe_livelock.py --petrsim build/petrsim [--keep]
"""

import os
import re
import time

import probe_testlib as lib
from probe_testlib import Failure, wire

STOP_WITHIN_S = 10.0


def body(args, tmp):
    check = lib.petrsim_json(args, "check", lib.PLANTED, "--json", expect=(1,))
    pools = check["livelock_pools"]
    if len(pools) != 1:
        raise Failure("petrsim check predicts {} livelock pools, expected 1".format(len(pools)))
    pool = pools[0]
    hit = pool["first_hit"]
    predicted_seq = check.get("first_hit_collective_seq")
    sim_trace = lib.sim_trace_of(args, tmp, lib.PLANTED)
    trace_dir = os.path.join(tmp, "traces")
    code, output, seconds = lib.launch(
        tmp, ["--plant", "--trace-dir", trace_dir, "--probe-scenario", sim_trace,
              "--livelock-attempts", "50", "--livelock-seconds", "1"], nproc=2, name="planted")
    ended_ns = time.monotonic_ns()
    if code == 0:
        raise Failure("the planted job exited 0: the watchdog did not stop it\n" + output[-3000:])

    traces = lib.read_traces(trace_dir, 2)
    livelocks = [(r, e) for r, (_, events) in traces.items() for e in events
                 if e["kind"] == wire.LIVELOCK]
    first = [(r, e) for r, e in livelocks if e["iteration"] == hit["iteration"]
             and r == hit["rank"] and e["slot"] == hit["slot"]]
    if not first:
        raise Failure("no livelock event for rank {} batch {} slot {} (check's first hit); "
                      "recorded: {}".format(hit["rank"], hit["iteration"], hit["slot"],
                                            [(r, e["iteration"], e["slot"]) for r, e in livelocks]))
    rank, event = first[0]
    if event["worker"] != hit["worker"] or event["index"] != hit["index"]:
        raise Failure("livelock event: worker {} index {}, check says worker {} index {}".format(
            event["worker"], event["index"], hit["worker"], hit["index"]))
    began_ns = event["start_ns"]
    exits = {}
    for r, (_, events) in traces.items():
        ends = [e["end_ns"] for e in events if e["kind"] == wire.PROCESS_EXIT and e["worker"] == -1]
        if not ends:
            raise Failure("rank {}: no process_exit recorded".format(r))
        exits[r] = max(ends)
    stopped_s = (max(exits.values()) - began_ns) / 1e9
    job_end_s = (ended_ns - began_ns) / 1e9
    if stopped_s > STOP_WITHIN_S or job_end_s > STOP_WITHIN_S:
        raise Failure("the job stopped {:.1f} s (torchrun ended {:.1f} s) after the stuck getitem "
                      "began: more than {} s".format(stopped_s, job_end_s, STOP_WITHIN_S))

    message = re.search(r"LivelockError: (petrsim_probe: sampler livelock: [^\n]*)", output)
    if message is None:
        raise Failure("the job's output holds no probe livelock error:\n" + output[-3000:])
    text = message.group(1)
    wanted = ["rank {} DataLoader worker {}, batch {} (slot {}, index {})".format(
                  hit["rank"], hit["worker"], hit["iteration"], hit["slot"], hit["index"]),
              "sampler group {} of sub-dataset {} '{}', dataset indices {}..{}, {} frames".format(
                  pool["group"], pool["subdataset"], pool["subdataset_name"], pool["first_frame"],
                  pool["last_frame"], pool["frames"])]
    for part in wanted:
        if part not in text:
            raise Failure("the probe's error does not say `{}`:\n  {}".format(part, text))

    diagnosis = lib.petrsim_json(args, "diagnose", trace_dir, "--json", expect=(0, 1))
    detail = diagnosis.get("cause_detail") or {}
    got = dict(kind=detail.get("kind"), rank=detail.get("rank"), worker=detail.get("worker"),
               batch=detail.get("batch"), slot=detail.get("slot"), index=detail.get("index"),
               group=detail.get("group"), subdataset=detail.get("subdataset"),
               first=(detail.get("pool") or {}).get("first"),
               last=(detail.get("pool") or {}).get("last"))
    want = dict(kind="livelock", rank=hit["rank"], worker=hit["worker"], batch=hit["iteration"],
                slot=hit["slot"], index=hit["index"], group=pool["group"],
                subdataset=pool["subdataset"], first=pool["first_frame"], last=pool["last_frame"])
    if got != want:
        raise Failure("petrsim diagnose on the probe's traces: {} != check's {}".format(got, want))
    groups = diagnosis.get("groups") or []
    if predicted_seq is not None and not any(g.get("seq") == predicted_seq for g in groups):
        raise Failure("petrsim diagnose's stuck collectives {} do not include check's seq {}".format(
            [(g.get("pg_id"), g.get("seq")) for g in groups], predicted_seq))

    replay = lib.petrsim_json(args, "replay", trace_dir, "--against", "sim", "--json",
                              expect=(0, 1))
    if not replay.get("reproduced"):
        raise Failure("petrsim replay --against sim did not reproduce the hang: {}".format(replay))
    if replay["replayed"].get("stuck_ranks") != [hit["rank"]]:
        raise Failure("replay's stuck ranks {} != [{}]".format(replay["replayed"].get("stuck_ranks"),
                                                               hit["rank"]))
    print("  stopped {:.1f} s after the stuck getitem began (torchrun ended after {:.1f} s); pool "
          "{}..{} named by check, the probe, diagnose; replay reproduced (seq {})".format(
              stopped_s, job_end_s, pool["first_frame"], pool["last_frame"],
              replay["replayed"]["collective"]["seq"]))


if __name__ == "__main__":
    lib.run_test("probe livelock watchdog vs petrsim check/diagnose/replay", body)
