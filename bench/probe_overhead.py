#!/usr/bin/python3
"""What petrsim_probe costs a training step: the reference job with and without it.

Runs tests/probe/reference_job.py under torchrun (2 ranks, Gloo, CPU) for ITERATIONS iterations,
without the probe, with the probe installed by its one line, and (as a control that nothing leaks
in) with the probe not installed but importable; REPEATS runs each, the order of the modes
reversed every other repeat (ABBA). The step time is rank 0's mean iteration time from the job's
mmcv-style log lines (`time:` per 10 iterations), the first 10 iterations (worker start, DDP's
bucket rebuild) left out. Prints each run, the medians, and the paired differences: each repeat's
run of a mode against the run without the probe beside it (the machine's load drifts between
repeats more than between neighbours), with their median and a bootstrap interval of it. The
reference job's step is ~15 ms and keeps two cores busy: runs need to be long (--iterations 2000)
for the interval to be narrower than the cost. `--step-sleep-ms` adds idle time per step (a real
detector's step is far longer: StreamPETR ~0.5 s).

The CPU seconds of each whole job (torchrun, ranks, workers; from wait4) are printed too.
`--micro N`: per-call costs instead (see micro()).

  python3 bench/probe_overhead.py [--iterations 200] [--repeats 3] [--step-sleep-ms 0]
                                  [--no-control] [--baseline-probe DIR] [--micro N]
"""

import argparse
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOB = os.path.join(REPO, "tests", "probe", "reference_job.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(mode, iterations, step_sleep_ms, tmp, probe_dirs):
    exe = shutil.which("torchrun")
    command = ([exe] if exe else [sys.executable, "-m", "torch.distributed.run"]) + [
        "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
        "--redirects", "2", "--tee", "2", "--max_restarts", "0", "--log_dir",
        os.path.join(tmp, "logs_{}".format(mode)), JOB, "--iterations", str(iterations),
        "--step-sleep-ms", str(step_sleep_ms)]
    if mode != "importable" and mode != "off":
        command += ["--trace-dir", os.path.join(tmp, "traces_" + mode)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if mode != "off":
        env["PYTHONPATH"] = probe_dirs.get(mode, probe_dirs["probe"])
    log_path = os.path.join(tmp, "out_{}.log".format(mode))
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log,
                                   stderr=subprocess.STDOUT)
        # wait4: the CPU time of torchrun and every process it (or its ranks) reaped: the ranks,
        # their DataLoader workers.
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
    with open(log_path, "rb") as log:
        out = log.read().decode(errors="replace")
    times = [float(t) for t in re.findall(r"Iter \[\d+/\d+\].*?time: ([0-9.]+)", out)]
    if len(times) < 2 or process.returncode != 0:
        raise SystemExit("probe_overhead: the {} run failed (exit {}) or printed no iteration "
                         "times:\n{}".format(mode, process.returncode, out[-2000:]))
    # ms per step, without the first 10 iterations; CPU seconds of the whole job
    return statistics.mean(times[1:]) * 1e3, usage.ru_utime + usage.ru_stime


def micro(count, probe_dir):
    """Per-call costs, measured with the probe installed in 2 ranks of a Gloo group (forked from
    one script, as torchrun's are separate processes; rank 0 reports), each interleaved with the
    same call unrecorded and taken as the best of many rounds (robust to other load on the
    machine): a blocking scalar all_reduce (the wrapper vs the function it wraps), a batch of 2
    getitems with its sampler draws loaded in the main process (the recorded DataLoader vs a
    second one), and a step of the reference job's MLP under DistributedDataParallel with one
    scalar all_reduce in it (DDP on the probe's recording ProcessGroup vs DDP on the real group).
    Two ranks, not one: with one rank a collective completes at once, and what the probe does
    around an asynchronous collective (DDP's gradient buckets) costs differently than when the
    other rank answers later."""
    code = r'''
import os, sys, time, torch, torch.distributed as dist, torch.multiprocessing as mp
from torch import nn
sys.path.insert(0, sys.argv[1])
import petrsim_probe

def rank_main(rank, n, trace_dir, port):
    petrsim_probe.install(trace_dir)
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank), WORLD_SIZE="2")
    dist.init_process_group("gloo", rank=rank, world_size=2)
    def best(f, calls, rounds=30):
        b = float("inf")
        for _ in range(rounds):
            dist.barrier()  # (unrecorded: the function the probe wraps)
            start = time.perf_counter()
            for _ in range(calls): f()
            b = min(b, time.perf_counter() - start)
        return b / calls * 1e6
    def pair(plain, recorded, calls):
        p = r = float("inf")
        for _ in range(3):  # interleaved, so that both see the same load
            p = min(p, best(plain, calls)); r = min(r, best(recorded, calls))
        return p, r
    t = torch.ones(1)
    original = dist.all_reduce.__wrapped__
    coll = pair(lambda: original(t), lambda: dist.all_reduce(t), max(1, n // 30))
    class D(torch.utils.data.Dataset):
        flag = None
        def __len__(self): return 1 << 30
        def prepare_train_data(self, i): return dict(gt_labels_3d=torch.ones(3))
        def __getitem__(self, i): return self.prepare_train_data(i)
    recorded_it = iter(torch.utils.data.DataLoader(D(), batch_size=2, num_workers=0,
                                                   collate_fn=lambda b: b))
    plain_it = iter(torch.utils.data.DataLoader(D(), batch_size=2, num_workers=0,
                                                collate_fn=lambda b: b))
    batch = pair(lambda: next(plain_it), lambda: next(recorded_it), max(1, n // 30))
    def mlp():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(16, 640), nn.ReLU(), nn.Linear(640, 640), nn.ReLU(),
                             nn.Linear(640, 8))
    DDP = nn.parallel.DistributedDataParallel
    recorded_ddp = DDP(mlp(), broadcast_buffers=False)
    plain_ddp = DDP.__new__(DDP)
    DDP.__init__.__wrapped__(plain_ddp, mlp(), broadcast_buffers=False)
    x = torch.ones(2, 16)
    backward = getattr(torch.autograd.backward, "__wrapped__", torch.autograd.backward)
    def plain_step():
        loss = plain_ddp(x).pow(2).sum()
        original(t)
        backward(loss)
    def recorded_step():
        loss = recorded_ddp(x).pow(2).sum()
        dist.all_reduce(t)
        loss.backward()
    for _ in range(20): plain_step(); recorded_step()
    ddp = pair(plain_step, recorded_step, max(1, n // 300))
    if rank == 0:
        print(*coll, *batch, *ddp, flush=True)
    original(t)  # both ranks done measuring
    petrsim_probe.uninstall()
    dist.destroy_process_group()

if __name__ == "__main__":
    mp.start_processes(rank_main, args=(int(sys.argv[2]), sys.argv[3], sys.argv[4]), nprocs=2,
                       start_method="fork")
'''
    tmp = tempfile.mkdtemp(prefix="petrsim_probe_micro_")
    try:
        r = subprocess.run([sys.executable, "-c", code, probe_dir, str(count),
                            os.path.join(tmp, "traces"), str(free_port())],
                           stdout=subprocess.PIPE, check=True, timeout=900,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
        c0, c1, b0, b1, d0, d1 = [float(x) for x in r.stdout.split()]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("micro ({}, 2 ranks): blocking scalar all_reduce {:.1f} -> {:.1f} us (+{:.1f}); a batch "
          "of 2 getitems in the main process {:.1f} -> {:.1f} us (+{:.1f}); a DDP step (forward, "
          "1 scalar all_reduce, backward: 2 gradient buckets) {:.0f} -> {:.0f} us (+{:.0f})"
          .format(probe_dir, c0, c1, c1 - c0, b0, b1, b1 - b0, d0, d1, d1 - d0), flush=True)
    return c1 - c0, b1 - b0, d1 - d0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--micro", type=int, default=0, metavar="N",
                        help="only the per-call costs, over N calls each")
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--step-sleep-ms", type=float, default=0.0)
    parser.add_argument("--no-control", action="store_true",
                        help="leave out the `importable` control runs (more repeats in the time)")
    parser.add_argument("--baseline-probe", metavar="DIR",
                        help="also run a second probe (DIR holds its petrsim_probe package, e.g. "
                             "an older version from `git show`), interleaved with the others")
    args = parser.parse_args()
    if args.micro:
        micro(args.micro, os.path.join(REPO, "probe"))
        if args.baseline_probe:
            micro(args.micro, os.path.abspath(args.baseline_probe))
        return 0
    if args.iterations < 20 or args.iterations % 10:
        raise SystemExit("probe_overhead: --iterations must be a multiple of 10, >= 20")
    tmp = tempfile.mkdtemp(prefix="petrsim_probe_bench_")
    probe_dirs = {"probe": os.path.join(REPO, "probe")}
    results = {"off": [], "importable": [], "probe": []}
    if args.no_control:
        del results["importable"]
    if args.baseline_probe:
        if not os.path.isfile(os.path.join(args.baseline_probe, "petrsim_probe", "__init__.py")):
            raise SystemExit("probe_overhead: --baseline-probe {}: no petrsim_probe/__init__.py "
                             "in it".format(args.baseline_probe))
        probe_dirs["baseline"] = os.path.abspath(args.baseline_probe)
        results["baseline"] = []
    print("load average before: {}".format(" ".join(open("/proc/loadavg").read().split()[:3])),
          flush=True)
    try:
        for repeat in range(args.repeats):
            order = list(results) if repeat % 2 == 0 else list(reversed(results))
            for mode in order:  # alternating order: neither mode always runs first
                ms, cpu = run(mode, args.iterations, args.step_sleep_ms, tmp, probe_dirs)
                results[mode].append((ms, cpu))
                print("run {} {:<10} {:8.3f} ms/step  {:6.2f} CPU s (all processes)".format(
                    repeat, mode, ms, cpu), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("load average after: {}".format(" ".join(open("/proc/loadavg").read().split()[:3])))
    off = statistics.median(ms for ms, _ in results["off"])
    off_cpu = statistics.median(cpu for _, cpu in results["off"])
    for mode in list(results)[1:]:
        ms = statistics.median(m for m, _ in results[mode])
        cpu = statistics.median(c for _, c in results[mode])
        print("{:<10} median {:8.3f} ms/step vs {:8.3f} without: {:+.2f}% ({:+.3f} ms/step); "
              "CPU {:.2f} s vs {:.2f} s ({:+.2f} ms per step over {} steps)".format(
                  mode, ms, off, (ms - off) / off * 100, ms - off, cpu, off_cpu,
                  (cpu - off_cpu) / args.iterations * 1e3, args.iterations))
    # Paired: each repeat's run of the mode against the run without the probe next to it (the
    # machine's load drifts between repeats more than within one).
    for mode in list(results)[1:]:
        diffs = sorted((m - o) / o * 100 for (m, _), (o, _) in zip(results[mode], results["off"]))
        print("{:<10} paired step-time difference over {} repeats: median {:+.2f}%, "
              "middle half {:+.2f}% .. {:+.2f}%, bootstrap 90% interval of the median "
              "{:+.2f}% .. {:+.2f}%; slower in {} of {}".format(
                  mode, len(diffs), statistics.median(diffs), quantile(diffs, 0.25),
                  quantile(diffs, 0.75), *bootstrap_median(diffs),
                  sum(d > 0 for d in diffs), len(diffs)))
    return 0


def quantile(sorted_values, q):
    """Linear interpolation between the closest ranks."""
    position = (len(sorted_values) - 1) * q
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def bootstrap_median(values, rounds=10000):
    """The 5th and 95th percentiles of the median of resamples (fixed seed: reproducible)."""
    rng = random.Random(12345)
    medians = sorted(statistics.median(rng.choices(values, k=len(values)))
                     for _ in range(rounds))
    return quantile(medians, 0.05), quantile(medians, 0.95)


if __name__ == "__main__":
    sys.exit(main())
