#!/usr/bin/python3
"""Golden sample streams for petrsim's `sample`, computed with the real torch and numpy.

This script plays the data path of a StreamPETR training job as docs/reference/streampetr.md
describes it (sequence flags per sub-dataset, mmdet ConcatDataset flags without offset,
InfiniteGroupEachSampleInBatchSampler over torch.randperm, DataLoader worker k mod W with numpy
seeded by worker_init_fn, mmdet3d's resample loop with np.random.choice over the frame's chunk)
for a few small datasets, and writes every (iteration, rank, slot) row to
tests/golden/sample_streams.json. data/sample_stream_test.cc checks petrsim against it.

The random draws are the real library calls: torch.randperm with a seeded torch.Generator and
the global np.random after np.random.seed (one saved state per worker, swapped in and out as the
worker processes its batches). The loop structure is written here from the reference text.
A pool with no frame with GT would loop forever in Python; the script records a "livelock" row
instead, as petrsim does, and then follows the DataLoader: the stuck worker loads nothing more,
the main process never consumes that batch, and nothing past the prefetch window
(prefetch_factor * num_workers batches) is dispatched. This DataLoader bookkeeping is written
here from docs/reference/streampetr.md, section 6, like petrsim's; the draws are the real ones.

Regenerate: /usr/bin/python3 scripts/gen_sample_golden.py
"""

import itertools
import json
import math
import os

import numpy as np
import torch

from gen_rng_golden import grid_mask_forward, streampetr_load


def sequence_flags(scene_lengths, split):
    """_set_sequence_group_flag for one sub-dataset: chunk ids, consecutive from 0."""
    flags = []
    current = 0
    for n in scene_lengths:
        bounds = list(range(0, n, math.ceil(n / split))) + [n]
        assert len(bounds) - 1 == split, "mmdet3d asserts every scene yields split chunks"
        for begin, end in zip(bounds[:-1], bounds[1:]):
            flags.extend([current] * (end - begin))
            current += 1
    return flags


def build(case):
    """Concatenated dataset: gt count, sub-dataset, local flag and global offset per index."""
    gt, sub_of, local_flag, offsets = [], [], [], []
    for s, scenes in enumerate(case["subdatasets"]):
        offsets.append(len(gt))
        flags = sequence_flags([len(scene) for scene in scenes], case["seq_split_num"])
        for scene in scenes:
            gt.extend(scene)
        sub_of.extend([s] * len(flags))
        local_flag.extend(flags)
    return gt, sub_of, local_flag, offsets


def infinite_group_stream(groups_num, seed):
    g = torch.Generator()
    g.manual_seed(seed)
    while True:
        yield from torch.randperm(groups_num, generator=g).tolist()


def rank_batches(flag, world_size, batch_size, rank, seed, iterations):
    """InfiniteGroupEachSampleInBatchSampler.__iter__ for one rank."""
    flag = np.array(flag, dtype=np.int64)
    groups_num = len(np.bincount(flag))
    assert groups_num >= world_size * batch_size
    members = {g: np.where(flag == g)[0].tolist() for g in range(groups_num)}
    streams = [itertools.islice(infinite_group_stream(groups_num, seed),
                                rank * batch_size + b, None, world_size * batch_size)
               for b in range(batch_size)]
    buffers = [[] for _ in range(batch_size)]
    groups = [None] * batch_size
    for _ in range(iterations):
        batch = []
        for b in range(batch_size):
            if not buffers[b]:
                groups[b] = next(streams[b])
                buffers[b] = list(members[groups[b]])
            batch.append((buffers[b].pop(0), groups[b]))
        yield batch


def run(case):
    gt, sub_of, local_flag, offsets = build(case)
    world_size, batch_size = case["world_size"], case["samples_per_gpu"]
    workers, seed, policy = case["workers_per_gpu"], case["seed"], case["policy"]
    uniforms = case["uniforms_per_attempt"]
    reference = case.get("pipeline") == "reference"  # StreamPETR's train pipeline draws
    rows = []
    for rank in range(world_size):
        states = []
        for w in range(max(1, workers)):
            np.random.seed(seed if workers == 0 else workers * rank + w + seed)
            states.append(np.random.get_state())
        stuck = [False] * max(1, workers)
        blocked_at = None  # the first batch the main process never gets
        in_flight = case["prefetch_factor"] * workers
        for k, batch in enumerate(rank_batches(local_flag, world_size, batch_size, rank, seed,
                                               case["iterations"])):
            # While the main process waits for batch blocked_at, nothing at or after
            # blocked_at + prefetch_factor * num_workers is dispatched.
            if blocked_at is not None and k >= blocked_at + in_flight:
                break
            w = k % max(1, workers)
            np.random.set_state(states[w])
            for b, (index, group) in enumerate(batch):
                row = {"iteration": k, "rank": rank, "slot": b, "worker": w, "index": index,
                       "group": group, "final_index": -1, "attempts": 0}
                if stuck[w]:
                    row["status"] = "blocked"
                else:
                    idx, attempts = index, 0
                    while True:  # Custom3DDataset.__getitem__ in train mode
                        attempts += 1
                        if reference:
                            streampetr_load()
                        for _ in range(uniforms):  # augmentations drawing from np.random
                            np.random.uniform(0.0, 1.0)
                        if gt[idx] > 0:
                            break
                        s = sub_of[idx]
                        if policy == "global":
                            pool = np.arange(len(gt))
                        elif policy == "in_subdataset":  # np.random.choice(len(self)) in the sub-dataset
                            size = sum(1 for i in range(len(gt)) if sub_of[i] == s)
                            pool = np.arange(size) + offsets[s]
                        else:  # in_group: _rand_another inside the sub-dataset
                            sub_flags = np.array(
                                [f for i, f in enumerate(local_flag) if sub_of[i] == s])
                            local = idx - offsets[s]
                            pool = np.where(sub_flags == sub_flags[local])[0] + offsets[s]
                        if all(gt[i] == 0 for i in pool):
                            break  # Python would spin forever here
                        idx = int(np.random.choice(pool))
                    row["final_index"], row["attempts"] = idx, attempts
                    if gt[idx] == 0:
                        row["status"] = "livelock"
                        stuck[w] = True
                        if blocked_at is None:
                            blocked_at = k
                    else:
                        row["status"] = "ok" if attempts == 1 else "resampled"
                row["consumed"] = blocked_at is None or k < blocked_at
                rows.append(row)
            if reference and workers == 0 and blocked_at is None:
                grid_mask_forward()  # the main process's forward, before its next load
            states[w] = np.random.get_state()
    return rows


CASES = [
    {
        "name": "concat_in_group",
        "subdatasets": [
            [[1, 0, 0, 2, 1, 1], [0, 3, 0, 0, 1, 1, 1], [1, 1, 1, 1], [2, 0, 2, 2, 0]],
            [[1, 1, 0, 0, 0, 0], [0, 1, 1, 1]],
        ],
        "seq_split_num": 2, "policy": "in_group", "world_size": 2, "samples_per_gpu": 2,
        "workers_per_gpu": 2, "prefetch_factor": 2, "seed": 0, "iterations": 40,
        "uniforms_per_attempt": 0,
    },
    {
        "name": "global_with_pipeline_draws",
        "subdatasets": [
            [[0, 0, 0, 0], [1, 0, 2, 0, 1], [0, 0, 5, 5, 5, 5], [3, 3, 0], [1, 1, 1, 0]],
        ],
        "seq_split_num": 2, "policy": "global", "world_size": 3, "samples_per_gpu": 1,
        "workers_per_gpu": 3, "prefetch_factor": 2, "seed": 17, "iterations": 30,
        "uniforms_per_attempt": 2,
    },
    {
        "name": "concat_in_subdataset",
        "subdatasets": [
            [[1, 0, 0, 2, 1, 1], [0, 3, 0, 0, 1, 1, 1], [1, 1, 1, 1], [2, 0, 2, 2, 0]],
            [[1, 0, 0, 0, 0, 0], [0, 1, 1, 1]],
        ],
        "seq_split_num": 2, "policy": "in_subdataset", "world_size": 2, "samples_per_gpu": 2,
        "workers_per_gpu": 2, "prefetch_factor": 2, "seed": 3, "iterations": 40,
        "uniforms_per_attempt": 0,
    },
    {
        "name": "main_process_loading",
        "subdatasets": [
            [[1, 0, 0, 0, 1, 1], [0, 1, 1], [1, 1, 1, 1, 1], [0, 2, 0, 2]],
        ],
        "seq_split_num": 2, "policy": "in_group", "world_size": 1, "samples_per_gpu": 3,
        "workers_per_gpu": 0, "prefetch_factor": 2, "seed": 5, "iterations": 25,
        "uniforms_per_attempt": 0,
    },
    {
        "name": "reference_pipeline_workers",
        "subdatasets": [
            [[1, 0, 0, 2, 1, 1], [0, 3, 0, 0, 1, 1, 1], [1, 1, 1, 1], [2, 0, 2, 2, 0]],
            [[1, 1, 0, 0, 0, 0], [0, 1, 0, 1]],
        ],
        "seq_split_num": 2, "policy": "in_group", "world_size": 2, "samples_per_gpu": 2,
        "workers_per_gpu": 2, "prefetch_factor": 2, "seed": 1, "iterations": 40,
        "uniforms_per_attempt": 0, "pipeline": "reference",
    },
    {
        "name": "reference_pipeline_main_process",
        "subdatasets": [
            [[1, 0, 0, 0, 1, 1], [0, 1, 1], [1, 0, 1, 1, 1], [0, 2, 0, 2]],
        ],
        "seq_split_num": 2, "policy": "in_group", "world_size": 1, "samples_per_gpu": 3,
        "workers_per_gpu": 0, "prefetch_factor": 2, "seed": 5, "iterations": 25,
        "uniforms_per_attempt": 0, "pipeline": "reference",
    },
]


def main():
    out = {
        "versions": {"torch": torch.__version__, "numpy": np.__version__},
        "cases": [dict(case, rows=run(case)) for case in CASES],
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden",
                        "sample_streams.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
