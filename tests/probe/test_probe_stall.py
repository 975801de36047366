#!/usr/bin/python3
"""A plain spin in a Dataset's __getitem__ (no mmdet resample loop) is caught by the probe's stall
watcher: the trace holds a `stall` event with the index in flight and the Python stack sampled in
the worker, naming the spinning line; the getitem is written as an open load when the worker is
terminated; `petrsim diagnose` prints that file:line beside the collective the other rank waits
in. With stop_stalls the worker is stopped as the livelock watchdog stops one, and the job fails
within seconds.

tests/probe/stall_job.py under torchrun, 2 ranks, 2 forked DataLoader workers each, Gloo; on rank
1 the getitem of index 6 (batch 3, slot 0) never returns (the line marked SPIN). Stall bound 1 s.
- default (the probe installed by the script's first lines): rank 0 waits in iteration 3's
  all_reduce until the process group's 5 s timeout, torchrun terminates rank 1, whose probe
  terminates its workers; checked: one stall event on rank 1 (worker, batch 3, slot 0, index 6,
  sampled >= 1 s after the getitem began, its innermost frame stall_job.py:SPIN in __getitem__,
  every line "file:line in func"), none on rank 0; the open load (completed=false) of that
  getitem; `petrsim diagnose` names rank 1 missing from seq 4 and prints the frame, and its JSON
  says cause kind "stall" with the stack;
- `-m petrsim_probe --stop-stalls`: the job fails, every rank's process has exited within 10 s
  of the moment the stuck getitem began; the job's output carries the StallError naming rank,
  worker, batch, slot, index and the frame; a watchdog event; diagnose as above.

  python3 tests/probe/test_probe_stall.py --petrsim build/petrsim [--keep]
"""

import os
import re

import probe_testlib as lib
from probe_testlib import Failure, wire

SPIN_RANK, SPIN_INDEX, SPIN_BATCH, SPIN_SLOT = 1, 6, 3, 0
STOP_WITHIN_S = 10.0


def spin_line():
    with open(lib.STALL_JOB) as f:
        for number, line in enumerate(f, 1):
            if "SPIN:" in line:
                return number
    raise Failure("{}: no line marked SPIN".format(lib.STALL_JOB))


def check_stall(traces, line):
    """The one stall event of the spinning rank; none elsewhere. Returns it."""
    frame = re.compile(r"^.+:\d+ in \S.*$")
    found = []
    for rank, (_, events) in traces.items():
        stalls = [e for e in events if e["kind"] == wire.STALL]
        if rank != SPIN_RANK and stalls:
            raise Failure("rank {}: stall events recorded, none expected: {}".format(rank, stalls))
        found += stalls if rank == SPIN_RANK else []
    if len(found) != 1:
        raise Failure("rank {}: {} stall events, expected 1: {}".format(SPIN_RANK, len(found), found))
    stall = found[0]
    got = (stall["iteration"], stall["slot"], stall["index"], stall["loader"])
    if got != (SPIN_BATCH, SPIN_SLOT, SPIN_INDEX, 0) or stall["worker"] not in (0, 1):
        raise Failure("stall event: (batch, slot, index, loader) {} worker {}, expected {} of "
                      "worker 0 or 1".format(got, stall["worker"],
                                              (SPIN_BATCH, SPIN_SLOT, SPIN_INDEX, 0)))
    waited = (stall["end_ns"] - stall["start_ns"]) / 1e9
    if not 1.0 <= waited <= 5.0:
        raise Failure("the stack was sampled {:.2f} s after the getitem began; the bound is 1 s"
                      .format(waited))
    lines = stall["text"].split("\n")
    bad = [entry for entry in lines if not frame.match(entry)]
    if bad or not lines:
        raise Failure("stall stack: lines not `file:line in func`: {!r}".format(bad or lines))
    want = "stall_job.py:{} in __getitem__".format(line)
    if not lines[-1].endswith(want):
        raise Failure("stall stack: innermost frame {!r}, expected ...{}\n{}".format(
            lines[-1], want, stall["text"]))
    if any("petrsim_probe" in entry for entry in lines):
        raise Failure("stall stack shows the probe's own frames:\n" + stall["text"])
    return stall


def check_open_load(traces, stall):
    events = traces[SPIN_RANK][1]
    loads = [e for e in events if e["kind"] == wire.LOAD and e["iteration"] == SPIN_BATCH
             and e["slot"] == SPIN_SLOT and e["worker"] == stall["worker"] and e["loader"] == 0]
    if [e["completed"] for e in loads] != [False]:
        raise Failure("rank {}: the getitem in flight (batch {}, slot {}) should be one load with "
                      "completed=false; recorded: {}".format(SPIN_RANK, SPIN_BATCH, SPIN_SLOT, loads))
    load = loads[0]
    if load["index"] != SPIN_INDEX or load["start_ns"] != stall["start_ns"]:
        raise Failure("open load {} does not match the stall {}".format(load, stall))


def check_diagnose(args, trace_dir, line):
    code, text, _ = lib.petrsim(args, "diagnose", trace_dir, expect=(1,))
    want = "stall_job.py:{} in __getitem__".format(line)
    stalled = text.find("\nstalled:")
    if stalled < 0 or want not in text[stalled:]:
        raise Failure("petrsim diagnose prints no stalled section with {}:\n{}".format(want, text))
    if not re.search(r"    > \S*" + re.escape(want), text):
        raise Failure("petrsim diagnose does not mark {} as the innermost frame:\n{}".format(
            want, text))
    if text.find("\nstuck:") > stalled:
        raise Failure("the stalled section should follow the stuck collective:\n" + text)
    diagnosis = lib.petrsim_json(args, "diagnose", trace_dir, "--json", expect=(1,))
    groups = diagnosis.get("groups") or []
    if not groups or groups[0].get("missing_ranks") != [SPIN_RANK]:
        raise Failure("diagnose: stuck collectives {}, expected rank {} missing".format(
            groups, SPIN_RANK))
    detail = diagnosis.get("cause_detail") or {}
    got = (detail.get("kind"), detail.get("rank"), detail.get("batch"), detail.get("slot"),
           detail.get("index"))
    if got != ("stall", SPIN_RANK, SPIN_BATCH, SPIN_SLOT, SPIN_INDEX):
        raise Failure("diagnose cause_detail {} != {}".format(
            got, ("stall", SPIN_RANK, SPIN_BATCH, SPIN_SLOT, SPIN_INDEX)))
    stack = detail.get("stack") or []
    if not stack or not stack[-1].endswith(want):
        raise Failure("diagnose --json: cause_detail.stack {} does not end in {}".format(stack, want))
    if want not in (diagnosis.get("cause") or ""):
        raise Failure("diagnose's cause does not name {}: {}".format(want, diagnosis.get("cause")))
    return groups[0]


def body(args, tmp):
    line = spin_line()
    spin = ["--spin-rank", str(SPIN_RANK), "--spin-index", str(SPIN_INDEX)]

    trace_dir = os.path.join(tmp, "traces")
    code, output, seconds = lib.launch(
        tmp, ["--trace-dir", trace_dir, "--livelock-seconds", "1", "--pg-timeout-s", "5"] + spin,
        name="spin", script=lib.STALL_JOB, timeout_s=60)
    if code == 0:
        raise Failure("the spinning job exited 0\n" + output[-3000:])
    traces = lib.read_traces(trace_dir, 2)
    stall = check_stall(traces, line)
    check_open_load(traces, stall)
    group = check_diagnose(args, trace_dir, line)
    print("  default: stall recorded {:.1f} s into the getitem, at stall_job.py:{}; open load "
          "written; diagnose: rank {} missing from {} seq {}, cause stall ({:.0f} s job)".format(
              (stall["end_ns"] - stall["start_ns"]) / 1e9, line, SPIN_RANK, group["pg_id"],
              group["seq"], seconds))

    trace_dir = os.path.join(tmp, "traces_stop")
    code, output, seconds = lib.launch(
        tmp, spin, probe_module_args=["--trace-dir", trace_dir, "--livelock-seconds", "1",
                                      "--stop-stalls"],
        name="stop", script=lib.STALL_JOB, timeout_s=60)
    if code == 0:
        raise Failure("the job with --stop-stalls exited 0\n" + output[-3000:])
    traces = lib.read_traces(trace_dir, 2)
    stall = check_stall(traces, line)
    check_open_load(traces, stall)
    exits = []
    for rank, (_, events) in traces.items():
        ends = [e["end_ns"] for e in events if e["kind"] == wire.PROCESS_EXIT and e["worker"] == -1]
        if not ends:
            raise Failure("rank {}: no process_exit recorded".format(rank))
        exits.append(max(ends))
    stopped_s = (max(exits) - stall["start_ns"]) / 1e9
    if stopped_s > STOP_WITHIN_S:
        raise Failure("with --stop-stalls the job stopped {:.1f} s after the stuck getitem began: "
                      "more than {} s".format(stopped_s, STOP_WITHIN_S))
    message = re.search(r"StallError: (petrsim_probe: stalled DataLoader getitem: [^\n]*)", output)
    if message is None:
        raise Failure("the job's output holds no StallError from the probe:\n" + output[-3000:])
    for part in ("rank {} DataLoader worker {}, batch {} (slot {}, index {})".format(
                     SPIN_RANK, stall["worker"], SPIN_BATCH, SPIN_SLOT, SPIN_INDEX),
                 "stall_job.py:{} in __getitem__".format(line), "Stopped (stop_stalls)"):
        if part not in message.group(1):
            raise Failure("the StallError does not say `{}`:\n  {}".format(part, message.group(1)))
    watchdogs = [e for e in traces[SPIN_RANK][1] if e["kind"] == wire.WATCHDOG]
    if len(watchdogs) != 1 or watchdogs[0]["index"] != SPIN_INDEX:
        raise Failure("rank {}: watchdog events {}, expected one for index {}".format(
            SPIN_RANK, watchdogs, SPIN_INDEX))
    check_diagnose(args, trace_dir, line)
    print("  --stop-stalls: stopped {:.1f} s after the stuck getitem began ({:.0f} s job); "
          "StallError, watchdog, open load, diagnose".format(stopped_s, seconds))


if __name__ == "__main__":
    lib.run_test("probe: a plain spin in __getitem__ caught as a stall", body)
