#!/usr/bin/python3
"""A small training job with StreamPETR's data semantics, for the probe's tests.

What it is (written for these tests from the facts in docs/reference/streampetr.md; no mmdet3d code):
- two sub-datasets, "train" and "val", of scenes given as GT counts per frame (boxes left after
  the filters); each scene cut into seq_split_num=2 chunks of ceil(n/2) frames, one sequence
  group flag per chunk, consecutive from 0 within each sub-dataset;
- `Custom3DDataset` has mmdet3d's protocol: __getitem__ loops over prepare_train_data (which runs
  the pipeline, then returns None for a frame without GT when filter_empty_gt) and _rand_another
  (np.random.choice over the frames whose flag equals the frame's own); the pipeline draws from
  numpy's global RNG as StreamPETR's ResizeCropFlipRotImage then GlobalRotScaleTransImage do;
  `StreamDataset` is the user's subclass (prev_exists, as StreamPETR adds it);
- `ConcatDataset` as mmdet's: the sub-datasets' flags concatenated WITHOUT offset;
- `InfiniteGroupEachSampleInBatchSampler` as StreamPETR's: the seed synced from rank 0 (one int32
  broadcast), one infinite stream of torch.randperm(G) permutations, global slot rank*B+b taking
  stream elements s, s+W*B, ..., each slot playing its group's indices in ascending order;
- a DataLoader with workers (worker_init_fn seeding numpy with num_workers*rank+worker_id+seed)
  and prefetch, a small MLP under DistributedDataParallel over Gloo, two reduce_mean(num_total_pos)
  all_reduces and mmdet's _parse_losses all_reduces in the loss, a logger reduce(MAX) every
  LOG_INTERVAL iterations, and mmcv-style log lines.
`--plant` empties the second chunk of val scene PLANT_SCENE: its pool has no frame with GT.

The same job as a petrsim scenario: `--write-scenario [--plant] [--world-size N]` prints it (2
ranks unless --world-size); tests/probe/reference_job.pbtxt and reference_job_planted.pbtxt are
its output for 2 ranks, checked in (the tests check they are current).

Run (ranks from torchrun's RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT):
  torchrun --nproc_per_node 2 --redirects 2 --tee 2 tests/probe/reference_job.py --trace-dir T
  torchrun ... -m petrsim_probe --trace-dir T -- tests/probe/reference_job.py
"""

import argparse
import datetime
import math
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

SEED = 0  # the training script's --seed
SAMPLES_PER_GPU = 2
WORKERS_PER_GPU = 2
PREFETCH_FACTOR = 2
ITERATIONS = 30
LOG_INTERVAL = 10
SEQ_SPLIT_NUM = 2
PLANT_SUBDATASET, PLANT_SCENE = "val", 2  # --plant: the second chunk of this scene has no GT
HIDDEN = 640  # the MLP's width (the DDP gradient buckets follow from it)


def scene_table():
    """{sub-dataset: [(scene name, [GT count per frame])]}: the job's data, fixed."""
    rng = random.Random(20240611)
    table = {}
    for name, lengths in (("train", [8, 9, 7, 8, 10, 8, 9, 8]), ("val", [8, 7, 9, 8])):
        scenes = []
        for s, n in enumerate(lengths):
            counts = [0 if rng.random() < 0.2 else rng.randint(1, 5) for _ in range(n)]
            first = int(math.ceil(n / SEQ_SPLIT_NUM))
            for lo, hi in ((0, first), (first, n)):  # no chunk without GT, unless planted
                if not any(counts[lo:hi]):
                    counts[lo] = 1
            scenes.append(("{}-{:03d}".format(name, s), counts))
        table[name] = scenes
    return table


def planted(table):
    counts = table[PLANT_SUBDATASET][PLANT_SCENE][1]
    first = int(math.ceil(len(counts) / SEQ_SPLIT_NUM))
    for i in range(first, len(counts)):
        counts[i] = 0
    return table


# ------------------------------------------------------------------------------------------------
# The scenario describing this job.

def model_tensors():
    return [("0.weight", [HIDDEN, 16]), ("0.bias", [HIDDEN]), ("2.weight", [HIDDEN, HIDDEN]),
            ("2.bias", [HIDDEN]), ("4.weight", [8, HIDDEN]), ("4.bias", [8])]


PER_ITERATION = [("reduce_mean(num_total_pos), decoder layer 0", "float32"),
                 ("reduce_mean(num_total_pos), decoder layer 1", "float32"),
                 ("_parse_losses: log_vars length", "int64"),
                 ("_parse_losses: loss_cls", "float32"),
                 ("_parse_losses: loss_bbox", "float32"),
                 ("_parse_losses: loss", "float32")]


def scenario_text(plant, world_size=2):
    table = scene_table()
    if plant:
        table = planted(table)
    flags = (" --plant" if plant else "") + \
        (" --world-size {}".format(world_size) if world_size != 2 else "")
    out = ["# Written by tests/probe/reference_job.py --write-scenario{}: the probe's reference job "
           "(do not edit;".format(flags),
           "# regenerate). {}".format(
               "Planted: sub-dataset '{}', scene {}: its second chunk has no frame with GT."
               .format(PLANT_SUBDATASET, PLANT_SCENE) if plant else "No pool without GT."),
           'name: "probe_reference_job{}"'.format("_planted" if plant else ""),
           "dataset {"]
    for name, scenes in table.items():
        out.append('  subdatasets {{ name: "{}" explicit {{'.format(name))
        for scene, counts in scenes:
            out.append('    scenes {{ name: "{}" gt_counts: [{}] }}'.format(
                scene, ", ".join(str(c) for c in counts)))
        out.append("  } }")
    out.append("}")
    out.append("filters { filter_empty_gt: true }")
    out.append("grouping {{ seq_mode: true seq_split_num: {} }}".format(SEQ_SPLIT_NUM))
    out.append("sampler { kind: infinite_group_each_sample_in_batch }")
    out.append("resample { policy: in_group }")
    out.append("pipeline { ops { resize_crop_flip_rot_image {} } "
               "ops { global_rot_scale_trans_image {} } grid_mask { use: false } }")
    out.append("job {{ world_size: {} samples_per_gpu: {} workers_per_gpu: {} prefetch_factor: {} "
               "iterations: {} seed: {} }}".format(world_size, SAMPLES_PER_GPU, WORKERS_PER_GPU,
                                                   PREFETCH_FACTOR, ITERATIONS, SEED))
    out.append("plan {")
    out.append("  custom {")
    out.append('    startup { name: "sync_random_seed broadcast" op: broadcast numel: 1 '
               'dtype: int32 }')
    for step, dtype in PER_ITERATION:
        out.append('    per_iteration {{ name: "{}" op: allreduce numel: 1 dtype: {} }}'.format(
            step, dtype))
    out.append('    periodic {{ collective {{ name: "logger reduce(MAX)" op: reduce reduce_op: max '
               'numel: 1 dtype: int32 }} every_iterations: {} }}'.format(LOG_INTERVAL))
    out.append("  }")
    out.append("  ddp {")
    for tname, shape in model_tensors():
        out.append('    tensors {{ name: "{}" shape: [{}] }}'.format(
            tname, ", ".join(str(s) for s in shape)))
    out.append("    broadcast_buffers: false")
    out.append("  }")
    out.append("}")
    out.append('comm { backend: gloo timeout_ms: 60000 torch_version: "1.13" }')
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------------
# The job.

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace-dir", help="install petrsim_probe recording here (the one-line way)")
    parser.add_argument("--probe-scenario", help="petrsim_probe.install(scenario=...)")
    parser.add_argument("--livelock-attempts", type=int)
    parser.add_argument("--livelock-seconds", type=float)
    parser.add_argument("--plant", action="store_true", help="empty one pool (the job hangs)")
    parser.add_argument("--iterations", type=int, default=ITERATIONS)
    parser.add_argument("--pg-timeout-s", type=float, default=60.0,
                        help="the process group's collective timeout")
    parser.add_argument("--step-sleep-ms", type=float, default=0.0,
                        help="extra compute time per step (the overhead benchmark)")
    parser.add_argument("--write-scenario", action="store_true",
                        help="print the petrsim scenario of this job and exit")
    parser.add_argument("--world-size", type=int, default=2,
                        help="with --write-scenario: the ranks the job runs on (2 to 8; the job "
                             "itself takes them from torchrun)")
    args = parser.parse_args(argv)
    if args.write_scenario:
        if not 1 <= args.world_size <= 8:  # the sampler needs 16 groups >= world_size * 2
            parser.error("--world-size: expected 1 to 8, got {}".format(args.world_size))
        sys.stdout.write(scenario_text(args.plant, args.world_size))
        return 0

    if args.trace_dir:
        try:  # the one on PYTHONPATH (the tests' and the benchmark's), else this checkout's
            import petrsim_probe
        except ImportError:
            sys.path.insert(0, os.path.join(REPO, "probe"))
            import petrsim_probe
        petrsim_probe.install(args.trace_dir, scenario=args.probe_scenario,
                              livelock_attempts=args.livelock_attempts,
                              livelock_seconds=args.livelock_seconds)
    return train(args)


def train(args):
    import numpy as np
    import torch
    import torch.distributed as dist
    from torch import nn

    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])

    class Custom3DDataset(torch.utils.data.Dataset):
        """mmdet3d's Custom3DDataset protocol (train mode)."""

        def __init__(self, name, scenes, filter_empty_gt=True):
            self.name = name
            self.ann_file = "data/{}.pkl".format(name)  # (no file is read: the data is fixed)
            self.filter_empty_gt = filter_empty_gt
            self.data_infos = []
            for s, (scene, counts) in enumerate(scenes):
                for f, count in enumerate(counts):
                    self.data_infos.append(dict(scene=s, frame=f, gt=count,
                                                first=f == 0, scene_len=len(counts)))
            self._set_group_flag()

        def _set_group_flag(self):
            self.flag = np.zeros(len(self), dtype=np.int64)

        def __len__(self):
            return len(self.data_infos)

        def get_data_info(self, index):
            info = self.data_infos[index]
            # GT labels after the filters: `gt` boxes of class 0..9; the pipeline keeps them.
            labels = np.array([(index + k) % 10 for k in range(info["gt"])], dtype=np.int64)
            return dict(sample_idx=index, gt_labels_3d=labels)

        def pipeline(self, results):
            # StreamPETR's ResizeCropFlipRotImage (training) then GlobalRotScaleTransImage: the
            # numpy calls each makes, in order (their values only move the fake image here).
            resize = np.random.uniform(0.38, 0.55)
            crop_h = int((1 - np.random.uniform(0.0, 0.0)) * 900 * resize) - 320
            crop_w = int(np.random.uniform(0, max(0, int(1600 * resize) - 800)))
            flip = bool(np.random.choice([0, 1]))
            rotate = np.random.uniform(0.0, 0.0)
            rot_angle = np.random.uniform(-0.3925, 0.3925)
            scale = np.random.uniform(0.95, 1.05)
            trans = np.random.normal(scale=np.array([0.0, 0.0, 0.0]), size=3).T
            base = np.full(16, float(results["sample_idx"] % 7), dtype=np.float32)
            base[0] += resize + crop_h * 1e-3 + crop_w * 1e-3 + flip + rotate
            base[1] += rot_angle * scale + float(trans.sum())
            results["img"] = torch.from_numpy(base)
            results["gt_labels_3d"] = torch.from_numpy(results["gt_labels_3d"])
            return results

        def prepare_train_data(self, index):
            input_dict = self.get_data_info(index)
            if input_dict is None:
                return None
            example = self.pipeline(input_dict)
            if self.filter_empty_gt and (example is None or
                                         not (example["gt_labels_3d"] != -1).any()):
                return None
            return example

        def _rand_another(self, idx):
            pool = np.where(self.flag == self.flag[idx])[0]
            return np.random.choice(pool)

        def __getitem__(self, idx):
            while True:
                data = self.prepare_train_data(idx)
                if data is None:
                    idx = self._rand_another(idx)
                    continue
                return data

    class StreamDataset(Custom3DDataset):
        """The user's subclass: sequence groups (seq_split_num chunks per scene), prev_exists."""

        def _set_group_flag(self):
            flags = []
            group = -1
            for info in self.data_infos:
                chunk = int(math.ceil(info["scene_len"] / SEQ_SPLIT_NUM))
                if info["frame"] % chunk == 0:
                    group += 1
                flags.append(group)
            self.flag = np.array(flags, dtype=np.int64)

        def prepare_train_data(self, index):
            data = super().prepare_train_data(index)
            if data is not None:
                data["prev_exists"] = not (index == 0 or self.flag[index - 1] != self.flag[index])
            return data

    class ConcatDataset(torch.utils.data.ConcatDataset):
        """mmdet's ConcatDataset: the flags concatenated, without offset."""

        def __init__(self, datasets):
            super().__init__(datasets)
            self.flag = np.concatenate([d.flag for d in datasets])

    def sync_random_seed(seed):
        value = torch.tensor(seed if rank == 0 else 0, dtype=torch.int32)
        dist.broadcast(value, src=0)
        return int(value.item())

    class InfiniteGroupEachSampleInBatchSampler(torch.utils.data.Sampler):
        def __init__(self, dataset, batch_size, world_size, rank, seed):
            self.batch_size, self.world_size, self.rank = batch_size, world_size, rank
            self.seed = sync_random_seed(seed)
            self.size = len(dataset)
            self.flag = dataset.flag
            self.groups_num = int(self.flag.max()) + 1
            self.global_batch_size = batch_size * world_size
            assert self.groups_num >= self.global_batch_size
            self.group_idx_to_sample_idxs = {
                g: np.where(self.flag == g)[0].tolist() for g in range(self.groups_num)}
            self.group_indices_per_global_sample_idx = [
                self._group_indices_per_global_sample_idx(rank * batch_size + b)
                for b in range(batch_size)]
            self.buffer_per_local_sample = [[] for _ in range(batch_size)]

        def _infinite_group_indices(self):
            g = torch.Generator()
            g.manual_seed(self.seed)
            while True:
                yield from torch.randperm(self.groups_num, generator=g).tolist()

        def _group_indices_per_global_sample_idx(self, global_sample_idx):
            import itertools
            yield from itertools.islice(self._infinite_group_indices(), global_sample_idx, None,
                                        self.global_batch_size)

        def __iter__(self):
            while True:
                batch = []
                for b in range(self.batch_size):
                    while len(self.buffer_per_local_sample[b]) == 0:
                        group = next(self.group_indices_per_global_sample_idx[b])
                        self.buffer_per_local_sample[b] = list(self.group_idx_to_sample_idxs[group])
                    batch.append(self.buffer_per_local_sample[b].pop(0))
                yield batch

        def __len__(self):
            return self.size

    def worker_init_fn(worker_id):
        worker_seed = WORKERS_PER_GPU * rank + worker_id + SEED
        np.random.seed(worker_seed)
        random.seed(worker_seed)

    def collate(samples):
        return dict(img=torch.stack([s["img"] for s in samples]),
                    gt=[s["gt_labels_3d"] for s in samples])

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.pg_timeout_s))
    if rank == 0:
        print("Set random seed to {}, deterministic: False".format(SEED), flush=True)
        print("gpu_ids = range(0, {})".format(world_size), flush=True)
    table = scene_table()
    if args.plant:
        table = planted(table)
    dataset = ConcatDataset([StreamDataset(name, scenes) for name, scenes in table.items()])
    sampler = InfiniteGroupEachSampleInBatchSampler(dataset, SAMPLES_PER_GPU, world_size, rank,
                                                    SEED)
    loader = torch.utils.data.DataLoader(dataset, batch_sampler=sampler,
                                         num_workers=WORKERS_PER_GPU,
                                         prefetch_factor=PREFETCH_FACTOR, collate_fn=collate,
                                         worker_init_fn=worker_init_fn, pin_memory=False)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
                          nn.Linear(HIDDEN, 8))
    ddp = nn.parallel.DistributedDataParallel(model, broadcast_buffers=False)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=1e-3)

    def reduce_mean(tensor):
        tensor = tensor.clone()
        dist.all_reduce(tensor.div_(world_size), op=dist.ReduceOp.SUM)
        return tensor

    def parse_losses(losses):
        log_vars = dict(losses)
        log_vars["loss"] = sum(losses.values())
        log_var_length = torch.tensor(len(log_vars))
        dist.all_reduce(log_var_length)
        for name, value in log_vars.items():
            value = value.data.clone()
            dist.all_reduce(value.div_(world_size))
            log_vars[name] = value.item()
        return log_vars

    iterator = iter(loader)
    start = time.time()
    data_time = 0.0
    for it in range(args.iterations):
        t0 = time.time()
        batch = next(iterator)
        data_time += time.time() - t0
        out = ddp(batch["img"])
        num_pos = torch.tensor(float(sum(len(g) for g in batch["gt"])))
        losses = {}
        for layer in range(2):
            norm = torch.clamp(reduce_mean(num_pos), min=1.0).item()
            losses.setdefault("loss_cls", 0)
            losses["loss_cls"] = losses["loss_cls"] + out[:, layer].pow(2).sum() / norm
        losses["loss_bbox"] = out[:, 2:].abs().mean()
        total = losses["loss_cls"] + losses["loss_bbox"]
        parse_losses(losses)
        optimizer.zero_grad()
        total.backward()
        optimizer.step()
        if args.step_sleep_ms > 0:
            time.sleep(args.step_sleep_ms / 1000.0)
        if (it + 1) % LOG_INTERVAL == 0:
            mem = torch.tensor([0], dtype=torch.int)
            dist.reduce(mem, 0, op=dist.ReduceOp.MAX)
            if rank == 0:
                elapsed = time.time() - start
                print("Iter [{}/{}]\tlr: 1.000e-03, eta: 0:00:00, time: {:.3f}, data_time: {:.3f}, "
                      "memory: 0, loss: {:.4f}".format(it + 1, args.iterations,
                                                       elapsed / LOG_INTERVAL,
                                                       data_time / LOG_INTERVAL, total.item()),
                      flush=True)
                start, data_time = time.time(), 0.0
    del iterator
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
