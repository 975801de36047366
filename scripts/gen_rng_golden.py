"""Generate golden RNG vectors for petrsim's C++ unit tests.

The C++ code reimplements torch's CPU RNG (torch.randperm, DistributedSampler,
StreamPETR's InfiniteGroupEachSampleInBatchSampler stream) and numpy's legacy
MT19937 RandomState (np.random.seed / np.random.choice / np.random.uniform).
This script calls the REAL torch and numpy functions and writes their outputs
to tests/golden/rng_golden.json so the C++ tests can prove bit-exactness.

Regenerate (from the repository root) with:

    /usr/bin/python3 scripts/gen_rng_golden.py

(Debian's python3-torch and python3-numpy are visible only to /usr/bin/python3.)
Output is deterministic: running it twice gives byte-identical JSON.
"""

import itertools
import json
import os

import numpy as np
import torch
from torch.utils.data.distributed import DistributedSampler

OUT_PATH = os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)),
                 "..", "tests", "golden", "rng_golden.json"))


# ---------------------------------------------------------------------------
# 1. torch.randperm
# ---------------------------------------------------------------------------
def gen_torch_randperm():
    cases = []
    specs = [(s, n)
             for s in (0, 1, 42, 2147483647, 123456789)
             for n in (1, 2, 3, 7, 10, 16, 100, 1400)]
    for seed, n in specs:
        g = torch.Generator()
        g.manual_seed(seed)
        perms = [torch.randperm(n, generator=g).tolist() for _ in range(3)]
        cases.append({"seed": seed, "n": n, "perms": perms})
    # Large cases: only ONE perm each, to keep the file under ~400 KB.
    for seed, n in ((0, 1700), (7, 5000)):
        g = torch.Generator()
        g.manual_seed(seed)
        perms = [torch.randperm(n, generator=g).tolist()]
        cases.append({"seed": seed, "n": n, "perms": perms})
    return cases


# ---------------------------------------------------------------------------
# 2. np.random.choice on the GLOBAL legacy RandomState
# ---------------------------------------------------------------------------
CHOICE_POOLS = [1, 2, 3, 5, 7, 19, 20, 21, 1, 100, 1023, 1024, 1025,
                34149, 6019, 40, 17, 3, 1, 65537] * 5


def gen_numpy_choice():
    cases = []
    for seed in (0, 1, 5, 17, 4294967295, 31):
        np.random.seed(seed)
        draws = []
        for n in CHOICE_POOLS:
            draws.append(int(np.random.choice(np.arange(n))))
        cases.append({"seed": seed, "pool_sizes": list(CHOICE_POOLS),
                      "draws": draws})
    return cases


# ---------------------------------------------------------------------------
# 3. np.random.uniform interleaved with np.random.choice
# ---------------------------------------------------------------------------
def gen_numpy_choice_with_uniform():
    cases = []
    for seed, k, n in ((3, 1, 20), (3, 2, 20), (9, 3, 7)):
        np.random.seed(seed)
        draws = []
        for _ in range(50):
            for _ in range(k):
                np.random.uniform(0.0, 1.0)  # discarded
            draws.append(int(np.random.choice(np.arange(n))))
        cases.append({"seed": seed, "uniforms_per_draw": k, "pool_size": n,
                      "draws": draws})
    return cases


# ---------------------------------------------------------------------------
# 3b. StreamPETR's train pipeline draws (the reference config's values), load by load
# ---------------------------------------------------------------------------
def streampetr_load():
    """The numpy calls of one __getitem__ attempt, as StreamPETR's transform_3d.py makes them:
    ResizeCropFlipRotImage._sample_augmentation (training), then GlobalRotScaleTransImage."""
    resize = np.random.uniform(0.38, 0.55)
    new_w, new_h = int(1600 * resize), int(900 * resize)
    int((1 - np.random.uniform(0.0, 0.0)) * new_h) - 256
    int(np.random.uniform(0, max(0, new_w - 704)))
    if True and np.random.choice([0, 1]):
        pass
    np.random.uniform(0.0, 0.0)
    np.random.uniform(-0.3925, 0.3925)
    np.random.uniform(0.95, 1.05)
    np.random.normal(scale=np.array([0, 0, 0], dtype=np.float32), size=3).T
    return resize


def grid_mask_forward(h=256, prob=0.7, rotate=1):
    """GridMask.forward's numpy calls (models/utils/grid_mask.py), in training."""
    if np.random.rand() > prob:
        return
    d = np.random.randint(2, h)
    np.random.randint(d)
    np.random.randint(d)
    np.random.randint(rotate)


def words_used(previous, state):
    """32-bit outputs consumed between two get_state()s (at most 624 apart)."""
    prev_key, prev_pos = previous[1], previous[2]
    key, pos = state[1], state[2]
    if np.array_equal(prev_key, key):
        return int(pos - prev_pos)
    return int(624 - prev_pos + pos)  # the key was regenerated once


def gen_numpy_pipeline_loads():
    """Per load: outputs consumed, the legacy Gaussian cache after it, and the first uniform."""
    cases = []
    for seed in (0, 1, 2, 7, 123, 4294967295):
        np.random.seed(seed)
        loads = []
        state = np.random.get_state()
        for _ in range(24):
            resize = streampetr_load()
            after = np.random.get_state()
            loads.append({"words": words_used(state, after), "has_gauss": int(after[3]),
                          "cached_gauss": float(after[4]), "resize": float(resize)})
            state = after
        cases.append({"seed": seed, "loads": loads})
    return cases


def gen_numpy_grid_mask():
    """Outputs consumed by each GridMask forward after one load (workers_per_gpu: 0)."""
    cases = []
    for seed in (0, 5, 11):
        np.random.seed(seed)
        words = []
        state = np.random.get_state()
        for _ in range(30):
            streampetr_load()
            grid_mask_forward()
            after = np.random.get_state()
            words.append(words_used(state, after))
            state = after
        cases.append({"seed": seed, "words_per_load_and_forward": words})
    return cases


# ---------------------------------------------------------------------------
# 4. Raw MT19937 outputs
# ---------------------------------------------------------------------------
# Pure-Python reference MT19937 (Matsumoto & Nishimura, mt19937ar.c:
# init_genrand + genrand_int32). Allowed here as a cross-check only.
class _MT19937:
    N, M = 624, 397

    def __init__(self, seed):
        mt = [0] * self.N
        mt[0] = seed & 0xFFFFFFFF
        for i in range(1, self.N):
            mt[i] = (1812433253 * (mt[i - 1] ^ (mt[i - 1] >> 30)) + i) \
                & 0xFFFFFFFF
        self.mt = mt
        self.mti = self.N

    def genrand_int32(self):
        mt, N, M = self.mt, self.N, self.M
        if self.mti >= N:
            for kk in range(N):
                y = (mt[kk] & 0x80000000) | (mt[(kk + 1) % N] & 0x7FFFFFFF)
                mt[kk] = mt[(kk + M) % N] ^ (y >> 1) ^ \
                    (0x9908B0DF if y & 1 else 0)
            self.mti = 0
        y = mt[self.mti]
        self.mti += 1
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680
        y ^= (y << 15) & 0xEFC60000
        y ^= y >> 18
        return y & 0xFFFFFFFF


def gen_mt19937_first():
    cases = []
    for seed in (0, 1, 5489):
        mt = _MT19937(seed)
        ref = [mt.genrand_int32() for _ in range(16)]
        # Verified with numpy 1.24: for the full 32-bit range with
        # dtype=uint32, legacy RandomState.randint returns the raw
        # genrand_int32 outputs unchanged (rng == 0xFFFFFFFF short-circuit).
        rs = np.random.RandomState(seed)
        got = [int(v) for v in
               rs.randint(0, 2 ** 32, size=16, dtype=np.uint32)]
        assert got == ref, ("numpy randint(uint32) != raw MT19937", seed)
        # np.random.seed(seed) on the global state must agree as well.
        np.random.seed(seed)
        got_global = [int(v) for v in
                      np.random.randint(0, 2 ** 32, size=16, dtype=np.uint32)]
        assert got_global == ref, ("global np.random.seed mismatch", seed)
        cases.append({"seed": seed, "uint32": ref})
    # Known mt19937ar.c reference value: default seed 5489 -> 3499211612.
    assert cases[2]["uint32"][0] == 3499211612
    return cases


# ---------------------------------------------------------------------------
# 5. torch DistributedSampler
# ---------------------------------------------------------------------------
def gen_distributed_sampler():
    cases = []
    specs = [
        # (len, W, shuffle, drop_last, seed, epoch, truncate)
        (10, 3, True, False, 0, 0, False),
        (10, 3, True, True, 0, 1, False),
        (10, 3, False, False, 0, 0, False),
        (7, 4, True, False, 5, 2, False),
        (2, 5, True, False, 0, 0, False),  # padding larger than dataset
        (100, 8, True, False, 0, 3, False),
        (34149, 8, True, False, 0, 0, True),
    ]
    for length, world, shuffle, drop_last, seed, epoch, trunc in specs:
        dataset = list(range(length))
        per_rank, per_rank_len = [], []
        for rank in range(world):
            sampler = DistributedSampler(dataset, num_replicas=world,
                                         rank=rank, shuffle=shuffle,
                                         seed=seed, drop_last=drop_last)
            sampler.set_epoch(epoch)
            idx = [int(i) for i in iter(sampler)]
            per_rank_len.append(len(idx))
            per_rank.append(idx[:50] if trunc else idx)
        case = {"dataset_len": length, "num_replicas": world,
                "shuffle": shuffle, "drop_last": drop_last, "seed": seed,
                "epoch": epoch, "per_rank": per_rank, "truncated": trunc}
        if trunc:
            case["per_rank_len"] = per_rank_len
        cases.append(case)
    return cases


# ---------------------------------------------------------------------------
# 6. StreamPETR InfiniteGroupEachSampleInBatchSampler group stream
# ---------------------------------------------------------------------------
def _infinite_group_indices(seed, groups_num):
    g = torch.Generator()
    g.manual_seed(seed)
    while True:
        yield from torch.randperm(groups_num, generator=g).tolist()


def gen_infinite_group_stream():
    cases = []
    for seed, groups, world, batch in ((0, 1400, 8, 2), (3, 20, 2, 3),
                                       (0, 16, 8, 2)):
        global_batch = world * batch
        slot_groups = []
        for s in range(global_batch):
            it = itertools.islice(_infinite_group_indices(seed, groups),
                                  s, None, global_batch)
            slot_groups.append([int(x) for x in itertools.islice(it, 30)])
        cases.append({"seed": seed, "groups_num": groups, "world_size": world,
                      "batch_size": batch, "slot_groups": slot_groups})
    return cases


def main():
    out = {
        "versions": {"torch": torch.__version__, "numpy": np.__version__},
        "torch_randperm": gen_torch_randperm(),
        "numpy_choice": gen_numpy_choice(),
        "numpy_choice_with_uniform": gen_numpy_choice_with_uniform(),
        "numpy_pipeline_loads": gen_numpy_pipeline_loads(),
        "numpy_grid_mask": gen_numpy_grid_mask(),
        "mt19937_first": gen_mt19937_first(),
        "torch_distributed_sampler": gen_distributed_sampler(),
        "infinite_group_stream": gen_infinite_group_stream(),
    }
    os.makedirs(os.path.dirname(OUT_PATH), exist_ok=True)
    with open(OUT_PATH, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote %s (%d bytes)" % (OUT_PATH, os.path.getsize(OUT_PATH)))


if __name__ == "__main__":
    main()
