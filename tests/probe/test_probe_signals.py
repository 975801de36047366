#!/usr/bin/python3
"""A killed rank leaves a readable prefix; SIGTERM dumps what is buffered and what is open.

The reference job runs under torchrun with the probe (its one line, `--trace-dir`), long enough
(many iterations, 20 ms of sleep per step) to be signalled mid-run, once rank 0 has logged its
10th iteration:
1. SIGKILL of rank 1's main process. Its rank_1.pbtrace is what it had flushed (once per batch)
   plus what its orphaned workers append: every message whole, the header first, at least the
   iterations the file held when the rank was killed, and no process_exit of its main process.
   `petrsim diagnose --json` (the C++ reader) reads the directory without error, no rank
   without a file or cut short, and counts exactly the events the probe's decoder reads.
2. SIGSTOP of rank 1, then SIGTERM of rank 0 once it is blocked in a collective rank 1 never
   joins (inside Gloo's C++ wait, where Python's signal handler cannot run: the probe's signal
   thread dumps). Rank 0's trace must end with process_exit "killed by SIGTERM ..." and hold
   the collective it was blocked in with completed=false: on the default group, with a sequence
   number above every completed one. `petrsim diagnose --json` names that collective (group and
   seq) as the stuck one, rank 0 waiting in it.
3. SIGTERM of torchrun, which forwards SIGTERM to every rank: each rank's trace ends with its
   process_exit saying SIGTERM; a collective open then is recorded completed=false above every
   completed one of its group; diagnose reads the traces and counts the same events.

  python3 tests/probe/test_probe_signals.py --petrsim build/petrsim [--keep]
"""

import json
import os
import signal
import time

import probe_testlib as lib
from probe_testlib import Failure, wire

LONG_JOB = ["--iterations", "100000", "--step-sleep-ms", "20"]
START_TIMEOUT_S = 30.0  # the job's start (torch imports, process group, workers) on 2 busy cores
RUNNING_ITERATIONS = 10  # signalled once the job has run this many iterations


def read_prefix(path):
    """(header, events) of a rank file that may be cut short; a cut is a failure."""
    try:
        header, events, error = wire.read_rank_file(path)
    except wire.DecodeError as e:
        raise Failure("{}: not a readable trace: {}".format(path, e))
    if error:
        raise Failure("{}: not a whole-message prefix: {}".format(path, error))
    return header, events


def iterations_in(path):
    try:
        _, events, _ = wire.read_rank_file(path)
    except (OSError, wire.DecodeError):
        return 0
    return sum(1 for e in events if e["kind"] == wire.ITERATION)


def wait_running(job, nproc):
    """Waits until the job has run RUNNING_ITERATIONS iterations (rank 0's mmcv-style log line:
    the ranks run in lockstep); returns the ranks' pids. (Not from the traces: a test of them
    must not depend on them to know when to signal.)"""
    deadline = time.monotonic() + START_TIMEOUT_S
    line = "Iter [{}/".format(RUNNING_ITERATIONS)
    while time.monotonic() < deadline:
        if job.wait(0.2) is not None:
            raise Failure("{} ended (exit {}) before it could be signalled:\n{}".format(
                job.name, job.code, job.output()[-3000:]))
        if line in job.output():
            pids = job.rank_pids()
            if sorted(pids) == list(range(nproc)):
                return pids
    raise Failure("{}: the job did not reach iteration {} within {} s:\n{}".format(
        job.name, RUNNING_ITERATIONS, START_TIMEOUT_S, job.output()[-3000:]))


def process_gone(pid):
    """True once pid has exited (gone, or a zombie its parent has not reaped yet)."""
    try:
        with open("/proc/{}/stat".format(pid)) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def wait_gone(pid, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process_gone(pid):
            return
        time.sleep(0.05)
    raise Failure("{} (pid {}) still runs {} s after its signal".format(what, pid, timeout_s))


def diagnose(args, trace_dir, traces_events):
    """petrsim diagnose --json on the directory: read without error, the same event count."""
    code, out, err = lib.petrsim(args, "diagnose", trace_dir, "--json", expect=(0, 1))
    import json
    try:
        report = json.loads(out)
    except ValueError as e:
        raise Failure("petrsim diagnose --json: not JSON ({}): {}{}".format(e, out[:500], err))
    if ".pbtrace" in err:
        raise Failure("petrsim diagnose complains about a trace file: " + err)
    if report.get("format") != "petrsim" or report.get("ranks_without_file") or \
            report.get("partial"):
        raise Failure("petrsim diagnose: format {}, ranks without file {}, partial {}".format(
            report.get("format"), report.get("ranks_without_file"), report.get("partial")))
    total = sum(len(events) for events in traces_events)
    if report.get("events") != total:
        raise Failure("petrsim diagnose read {} events, the probe's decoder {}: the C++ reader "
                      "does not read the whole prefix".format(report.get("events"), total))
    return report


def main_exit(rank, events):
    """The rank's main-process process_exit, which must be its main process's last event."""
    main = [e for e in events if e["worker"] in (-1, -2)]
    exits = [e for e in main if e["kind"] == wire.PROCESS_EXIT]
    if len(exits) != 1:
        raise Failure("rank {}: {} process_exit events of its main process, expected 1".format(
            rank, len(exits)))
    if main[-1] is not exits[0]:
        raise Failure("rank {}: events of the main process after its process_exit".format(rank))
    return exits[0]


def open_collectives(rank, events):
    """The collectives recorded completed=false; each must be above every completed one of its
    group (it is the one the rank was in, not an old one lost and re-found)."""
    calls = [e for e in events if e["kind"] == wire.COLLECTIVE]
    pending = [e for e in calls if not e["completed"]]
    for p in pending:
        done = [e["seq"] for e in calls if e["completed"] and
                e["process_group"] == p["process_group"]]
        if done and p["seq"] <= max(done):
            raise Failure("rank {}: open collective {} seq {} is not above the completed ones "
                          "(up to seq {})".format(rank, p["process_group"], p["seq"], max(done)))
    return pending


def sigkill_rank(args, tmp):
    trace_dir = os.path.join(tmp, "kill_traces")
    job = lib.start_job(tmp, LONG_JOB + ["--trace-dir", trace_dir], name="sigkill")
    try:
        pids = wait_running(job, 2)
        path = os.path.join(trace_dir, "rank_1.pbtrace")
        os.kill(pids[1], signal.SIGKILL)
        before = iterations_in(path)  # (what the file held at the kill, or a little more)
        if job.wait(40) is None:
            raise Failure("torchrun did not end within 40 s of rank 1's SIGKILL")
    finally:
        output = job.stop()
    if job.code == 0:
        raise Failure("torchrun exited 0 after a rank was killed:\n" + output[-2000:])
    traces = []
    for r in range(2):
        header, events = read_prefix(os.path.join(trace_dir, "rank_{}.pbtrace".format(r)))
        if header["rank"] != r or header["world_size"] != 2:
            raise Failure("rank_{}.pbtrace: header says rank {} of {}".format(
                r, header["rank"], header["world_size"]))
        traces.append(events)
    killed = traces[1]
    iterations = sum(1 for e in killed if e["kind"] == wire.ITERATION)
    if iterations < max(before, RUNNING_ITERATIONS - 1):
        raise Failure("rank_1.pbtrace holds {} iterations after the kill, {} before it".format(
            iterations, before))
    if any(e["kind"] == wire.PROCESS_EXIT and e["worker"] == -1 for e in killed):
        raise Failure("rank 1 was SIGKILLed, yet its trace records its main process's exit")
    diagnose(args, trace_dir, traces)
    print("  SIGKILL of rank 1 after {} iterations: its trace, {} events ({} iterations), is "
          "whole messages; petrsim diagnose reads every one".format(before, len(killed),
                                                                     iterations))


def sigterm_blocked_rank(args, tmp):
    trace_dir = os.path.join(tmp, "blocked_traces")
    job = lib.start_job(tmp, LONG_JOB + ["--trace-dir", trace_dir], name="blocked")
    try:
        pids = wait_running(job, 2)
        os.kill(pids[1], signal.SIGSTOP)
        time.sleep(1.5)  # rank 0 runs into a collective rank 1 never joins (a step: ~25 ms)
        os.kill(pids[0], signal.SIGTERM)
        wait_gone(pids[0], 10, "rank 0")
    finally:
        job.stop()
    _, events = read_prefix(os.path.join(trace_dir, "rank_0.pbtrace"))
    _, other = read_prefix(os.path.join(trace_dir, "rank_1.pbtrace"))
    exit_event = main_exit(0, events)
    if "SIGTERM" not in exit_event["text"]:
        raise Failure("rank 0's process_exit says {!r}, not SIGTERM".format(exit_event["text"]))
    pending = open_collectives(0, events)
    if not pending or any(p["process_group"] != "default_pg" for p in pending):
        raise Failure("rank 0 was blocked in a collective of the default group; its trace holds "
                      "{} open collectives: {}".format(
                          len(pending), [(p["process_group"], p["seq"]) for p in pending]))
    stuck = min(pending, key=lambda p: p["seq"])  # DDP's buckets: more than one may be open
    report = diagnose(args, trace_dir, [events, other])
    groups = [g for g in report.get("groups") or [] if g.get("pg_id") == "default_pg"]
    if len(groups) != 1 or groups[0].get("seq") != stuck["seq"] or \
            groups[0].get("waiting_ranks") != [0] or groups[0].get("missing_ranks") != [1]:
        raise Failure("petrsim diagnose's stuck collectives {} are not rank 0's open one "
                      "(default_pg seq {}, rank 0 waiting, rank 1 missing)".format(
                          report.get("groups"), stuck["seq"]))
    print("  SIGTERM of rank 0 blocked in default_pg seq {} (rank 1 stopped): process_exit {!r}, "
          "the collective completed=false; petrsim diagnose names it".format(
              stuck["seq"], exit_event["text"]))


def sigterm_torchrun(args, tmp):
    trace_dir = os.path.join(tmp, "term_traces")
    job = lib.start_job(tmp, LONG_JOB + ["--trace-dir", trace_dir], name="sigterm")
    try:
        wait_running(job, 2)
        os.kill(job.process.pid, signal.SIGTERM)
        if job.wait(25) is None:
            raise Failure("torchrun did not end within 25 s of its SIGTERM")
    finally:
        output = job.stop()
    traces = []
    summary = []
    for r in range(2):
        _, events = read_prefix(os.path.join(trace_dir, "rank_{}.pbtrace".format(r)))
        traces.append(events)
        exit_event = main_exit(r, events)
        if "SIGTERM" not in exit_event["text"]:
            raise Failure("rank {}: process_exit says {!r}, not SIGTERM\n{}".format(
                r, exit_event["text"], output[-2000:]))
        pending = open_collectives(r, events)
        summary.append("rank {}: {!r}, {} open collective(s)".format(
            r, exit_event["text"], len(pending)))
    diagnose(args, trace_dir, traces)
    print("  SIGTERM of torchrun: " + "; ".join(summary))


def body(args, tmp):
    sigkill_rank(args, tmp)
    sigterm_blocked_rank(args, tmp)
    sigterm_torchrun(args, tmp)


if __name__ == "__main__":
    lib.run_test("a killed rank leaves a readable prefix; SIGTERM dumps the open collective", body)
