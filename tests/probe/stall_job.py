#!/usr/bin/python3
"""A small job for the probe's stall and DataLoader tests: no mmdet protocol, a plain Dataset.

Each rank iterates a DataLoader over `SpinDataset` (item i is the tensor [i]) for --iterations
batches of 2, one all_reduce of the batch per iteration (Gloo); with --second-loader it then runs
a second DataLoader over another dataset (batches of 3, like a validation pass, one all_reduce
each) and goes back to the first for --more-iterations batches. On rank --spin-rank, the getitem
of index --spin-index never returns: a plain loop in __getitem__ (the line marked SPIN), no
resample loop. --start-method / --second-start-method: the DataLoaders' multiprocessing context
(fork, spawn, forkserver). The dataset classes are at module level, so spawn can pickle them.

The probe is installed by the script's first lines, as the docs say (when --trace-dir is given;
else run it under `-m petrsim_probe`): a spawned worker or fork server imports this script again,
and must not open the rank's trace there.

  torchrun --nproc_per_node 2 --redirects 2 --tee 2 tests/probe/stall_job.py --trace-dir T ...
"""

import argparse
import datetime
import itertools
import os
import sys


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace-dir", help="install petrsim_probe recording here")
    parser.add_argument("--livelock-seconds", type=float)
    parser.add_argument("--stop-stalls", action="store_true")
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--more-iterations", type=int, default=2)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--spin-rank", type=int, default=-1)
    parser.add_argument("--spin-index", type=int, default=-1)
    parser.add_argument("--start-method", default="fork")
    parser.add_argument("--second-loader", action="store_true")
    parser.add_argument("--second-start-method", default="fork")
    parser.add_argument("--pg-timeout-s", type=float, default=60.0)
    return parser.parse_args(argv)


if __name__ in ("__main__", "__mp_main__"):  # (__mp_main__: a spawned process importing it)
    ARGS = parse_args()
    if ARGS.trace_dir:
        try:
            import petrsim_probe
        except ImportError:
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
                os.path.dirname(os.path.abspath(__file__)))), "probe"))
            import petrsim_probe
        petrsim_probe.install(ARGS.trace_dir, livelock_seconds=ARGS.livelock_seconds,
                              stop_stalls=ARGS.stop_stalls or None)

import torch  # noqa: E402


class SpinDataset(torch.utils.data.Dataset):
    """Item i is the tensor [i]; item `spin_index` never returns."""

    def __init__(self, size, spin_index=-1):
        self.size, self.spin_index = size, spin_index

    def __len__(self):
        return self.size

    def __getitem__(self, i):
        if i == self.spin_index:
            x = 0
            while True: x += 1  # noqa: E701 SPIN: the stall tests look for this line
        return torch.tensor([float(i)])


def main(args):
    import torch.distributed as dist

    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.pg_timeout_s))
    spin = args.spin_index if rank == args.spin_rank else -1
    first = torch.utils.data.DataLoader(SpinDataset(args.size, spin), batch_size=2, num_workers=2,
                                        multiprocessing_context=args.start_method)

    def train(iterations):
        for batch in itertools.islice(first, iterations):
            dist.all_reduce(batch.sum())

    train(args.iterations)
    if args.second_loader:
        second = torch.utils.data.DataLoader(SpinDataset(9), batch_size=3, num_workers=1,
                                             multiprocessing_context=args.second_start_method)
        for batch in second:
            dist.all_reduce(batch.sum())
        train(args.more_iterations)
    dist.barrier()
    if rank == 0:
        print("STALL_JOB_DONE", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(ARGS))
