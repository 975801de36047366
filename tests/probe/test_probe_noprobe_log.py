#!/usr/bin/python3
"""Without the probe the planted job hangs until its (short) timeout, and `petrsim diagnose` on its
log says what it says on the probe's traces of the same job.

Two runs of the planted reference job under torchrun: without the probe (process group timeout
5 s: rank 0 times out in its all_reduce, Gloo's `Timed out waiting 5000ms`, and torchrun tears
the job down), and with it (watchdog bounds 50 loads, 1 s; scenario embedded). Checked:
- without the probe the job fails only after the timeout (>= 5 s after the last iteration line),
  with Gloo's timeout in the log and no probe output;
- `petrsim diagnose LOG --scenario reference_job_planted.pbtxt --json`: the suspect (missing)
  ranks are the rank the probe's traces' diagnosis names, the scenario cross-check's first hit
  is that rank, batch and pool (dataset indices first..last), and its verdict is consistent with
  a sampler livelock on that rank.

  python3 tests/probe/test_probe_noprobe_log.py --petrsim build/petrsim [--keep]
"""

import os
import re

import probe_testlib as lib
from probe_testlib import Failure

TIMEOUT_S = 5


def body(args, tmp):
    code, log, seconds = lib.launch(tmp, ["--plant", "--pg-timeout-s", str(TIMEOUT_S)], nproc=2,
                                    name="noprobe")
    if code == 0:
        raise Failure("the planted job without the probe exited 0")
    if "petrsim_probe" in log:
        raise Failure("the run without the probe printed probe output")
    if not re.search(r"Timed out waiting {}ms".format(TIMEOUT_S * 1000), log):
        raise Failure("no Gloo timeout in the log of the run without the probe:\n" + log[-3000:])
    if seconds < TIMEOUT_S:
        raise Failure("the job without the probe ended after {:.1f} s, before its {} s timeout"
                      .format(seconds, TIMEOUT_S))
    log_path = os.path.join(tmp, "noprobe.log")

    sim_trace = lib.sim_trace_of(args, tmp, lib.PLANTED)
    trace_dir = os.path.join(tmp, "traces")
    code, _, _ = lib.launch(tmp, ["--plant", "--trace-dir", trace_dir, "--probe-scenario",
                                  sim_trace, "--livelock-attempts", "50", "--livelock-seconds",
                                  "1"], nproc=2, name="probe")
    if code == 0:
        raise Failure("the planted job with the probe exited 0")
    traced = lib.petrsim_json(args, "diagnose", trace_dir, "--json", expect=(0, 1))
    detail = traced.get("cause_detail") or {}
    if detail.get("kind") != "livelock":
        raise Failure("diagnose on the probe's traces names no livelock: {}".format(detail))
    probe_view = dict(rank=detail["rank"], batch=detail["batch"], first=detail["pool"]["first"],
                      last=detail["pool"]["last"])

    logged = lib.petrsim_json(args, "diagnose", log_path, "--scenario", lib.PLANTED, "--json",
                              expect=(0, 1))
    groups = logged.get("groups") or []
    missing = sorted({r for g in groups for r in g.get("missing_ranks", [])})
    if missing != [probe_view["rank"]]:
        raise Failure("diagnose on the log: missing ranks {}, the probe's traces say rank {}".format(
            missing, probe_view["rank"]))
    cross = logged.get("scenario") or {}
    hit = cross.get("check_first_hit") or {}
    log_view = dict(rank=hit.get("rank"), batch=hit.get("iteration"),
                    first=(hit.get("pool") or {}).get("first"),
                    last=(hit.get("pool") or {}).get("last"))
    if log_view != probe_view:
        raise Failure("diagnose on the log (with --scenario) names {}, on the probe's traces {}"
                      .format(log_view, probe_view))
    if not cross.get("consistent_with_livelock"):
        raise Failure("diagnose on the log names the same rank and pool as on the probe's traces, "
                      "but its verdict is not `consistent`: {} (log: {})".format(
                          cross.get("verdict"), cross.get("log")))
    print("  without the probe: failed after {:.1f} s (timeout {} s); diagnose on the log and on "
          "the probe's traces: rank {}, batch {}, pool {}..{}".format(
              seconds, TIMEOUT_S, probe_view["rank"], probe_view["batch"], probe_view["first"],
              probe_view["last"]))


if __name__ == "__main__":
    lib.run_test("without the probe: hang, and diagnose on the log == on the probe's traces", body)
