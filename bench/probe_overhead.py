#!/usr/bin/python3
"""What petrsim_probe costs a training step: the reference job with and without it.

Runs tests/probe/reference_job.py under torchrun (2 ranks, Gloo, CPU) for ITERATIONS iterations,
alternating without the probe, with the probe installed by its one line, and (as a control that
nothing leaks in) with the probe not installed but importable; REPEATS runs each. The step time is
rank 0's mean iteration time from the job's mmcv-style log lines (`time:` per 10 iterations), the
first 10 iterations (worker start, DDP's bucket rebuild) left out. Prints each run and the
median overhead in percent. `--step-sleep-ms` adds compute per step: the reference job's own step
is a few milliseconds, far shorter than a real detector's (StreamPETR: ~0.5 s), so the fixed
per-iteration cost of the probe weighs more here than in a real job.

  python3 bench/probe_overhead.py [--iterations 200] [--repeats 3] [--step-sleep-ms 0]
"""

import argparse
import os
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


def run(mode, iterations, step_sleep_ms, tmp):
    exe = shutil.which("torchrun")
    command = ([exe] if exe else [sys.executable, "-m", "torch.distributed.run"]) + [
        "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
        "--redirects", "2", "--tee", "2", "--max_restarts", "0", "--log_dir",
        os.path.join(tmp, "logs_{}".format(mode)), JOB, "--iterations", str(iterations),
        "--step-sleep-ms", str(step_sleep_ms)]
    if mode == "probe":
        command += ["--trace-dir", os.path.join(tmp, "traces")]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if mode != "off":
        env["PYTHONPATH"] = os.path.join(REPO, "probe")
    out = subprocess.run(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, timeout=600).stdout.decode(errors="replace")
    times = [float(t) for t in re.findall(r"Iter \[\d+/\d+\].*?time: ([0-9.]+)", out)]
    if len(times) < 2:
        raise SystemExit("probe_overhead: the {} run printed no iteration times:\n{}".format(
            mode, out[-2000:]))
    return statistics.mean(times[1:]) * 1e3  # ms per step, without the first 10 iterations


def micro(count):
    """Per-call costs in one process (1-rank Gloo group, a 1-worker-free DataLoader): what the
    probe adds to one blocking scalar all_reduce and to one __getitem__ with its sampler draw."""
    import time
    code = r'''
import os, sys, time, datetime, torch, torch.distributed as dist
sys.path.insert(0, os.path.join(sys.argv[1], "probe"))
if sys.argv[3] == "probe":
    import petrsim_probe; petrsim_probe.install(sys.argv[4])
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[5])
dist.init_process_group("gloo", rank=0, world_size=1)
n = int(sys.argv[2]); t = torch.ones(1)
for _ in range(200): dist.all_reduce(t)
start = time.perf_counter()
for _ in range(n): dist.all_reduce(t)
collective_us = (time.perf_counter() - start) / n * 1e6
class D(torch.utils.data.Dataset):
    flag = None
    def __len__(self): return 1 << 30
    def prepare_train_data(self, i): return dict(gt_labels_3d=torch.ones(3))
    def __getitem__(self, i): return self.prepare_train_data(i)
loader = torch.utils.data.DataLoader(D(), batch_size=2, num_workers=0, collate_fn=lambda b: b)
it = iter(loader)
for _ in range(200): next(it)
start = time.perf_counter()
for _ in range(n): next(it)
batch_us = (time.perf_counter() - start) / n * 1e6
print(collective_us, batch_us)
dist.destroy_process_group()
'''
    tmp = tempfile.mkdtemp(prefix="petrsim_probe_micro_")
    try:
        out = {}
        for mode in ("off", "probe"):
            r = subprocess.run([sys.executable, "-c", code, REPO, str(count), mode,
                                os.path.join(tmp, "traces"), str(free_port())],
                               stdout=subprocess.PIPE, check=True, timeout=600,
                               env=dict(os.environ, OMP_NUM_THREADS="1"))
            out[mode] = [float(x) for x in r.stdout.split()]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    (c0, b0), (c1, b1) = out["off"], out["probe"]
    print("micro: blocking scalar all_reduce {:.1f} us -> {:.1f} us (+{:.1f} us); a batch of 2 "
          "getitems in the main process {:.1f} us -> {:.1f} us (+{:.1f} us)".format(
              c0, c1, c1 - c0, b0, b1, b1 - b0))
    return c1 - c0, b1 - b0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--micro", type=int, default=0, metavar="N",
                        help="only the per-call costs, over N calls each")
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--step-sleep-ms", type=float, default=0.0)
    args = parser.parse_args()
    if args.micro:
        micro(args.micro)
        return 0
    if args.iterations < 20 or args.iterations % 10:
        raise SystemExit("probe_overhead: --iterations must be a multiple of 10, >= 20")
    tmp = tempfile.mkdtemp(prefix="petrsim_probe_bench_")
    results = {"off": [], "importable": [], "probe": []}
    try:
        for repeat in range(args.repeats):
            for mode in results:
                ms = run(mode, args.iterations, args.step_sleep_ms, tmp)
                results[mode].append(ms)
                print("run {} {:<10} {:8.3f} ms/step".format(repeat, mode, ms), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    off = statistics.median(results["off"])
    for mode in ("importable", "probe"):
        ms = statistics.median(results[mode])
        print("{:<10} median {:8.3f} ms/step vs {:8.3f} without: {:+.2f}%".format(
            mode, ms, off, (ms - off) / off * 100))
    return 0


if __name__ == "__main__":
    sys.exit(main())
