#!/usr/bin/python3
"""One training step of the real backend's scaled-down StreamPETR in Python PyTorch.

The Python side of the C++-vs-Python speed comparison of issue 6 ("Speed"): the same
architecture, sizes, losses, matching and optimizer as the C++ model in real/
(streampetr_model.cc, streampetr_modules.cc, position_embedding.cc, memory.cc, losses.cc,
hungarian.cc), written layer by layer from those sources, and the same step as bench/step_bench.cc
(which follows real/trainer.cc for one rank): memory PreUpdate by the ego motion, forward,
DetectionLoss per decoder layer and batch slot (Hungarian matching included), zero_grad,
backward, AdamW (lr 2e-3, weight decay 0.01), loss.item().

Run it with Debian's interpreter (python3-torch, torch 1.13), not a pyenv python3:
  /usr/bin/python3 bench/step_python.py [--threads N] [--warmup W] [--steps S] [--reps R]
                                        [--batch B] [--check DIR]
--threads 0 leaves torch's own thread count alone. --check DIR (written by `step_bench --dump DIR`)
loads the C++ model's initial parameters and buffers by name (every name and shape must match)
and the C++ inputs, runs 3 steps, compares the losses with the C++ ones, and then times the steps
on those inputs. The last line is "RESULT impl=python ... median_ms=...".

scipy is not in Debian's python3 here, so the matcher is a port of real/hungarian.cc (the same
shortest-augmenting-path Hungarian method) in pure Python; its share of the step is printed.
"""

import argparse
import math
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# ModelConfig defaults (real/streampetr_model.h).
CHANNELS = 32
HEADS = 4
FFN_CHANNELS = 64
DECODER_LAYERS = 2
QUERIES = 24
CLASSES = 10
DEPTH_BINS = 6
MEMORY_LEN = 12
TOPK = 6
IMAGE_HEIGHT, IMAGE_WIDTH = 32, 48
RANGE = (-51.2, -51.2, -5.0, 51.2, 51.2, 3.0)
BOX_TERMS = 10
MOTION_DIMS = 13
FOCAL_ALPHA = 0.25
FOCAL_GAMMA = 2.0


# ----------------------------------------------------------------------------------------------
# real/geometry.cc, real/position_embedding.cc


def lid_depth_bins(n, start, maximum):
    bin_ = (maximum - start) / (n * (n + 1))
    return [start + bin_ * i * (i + 1) for i in range(n)]


def frustum_coords(img2lidar, height, width, stride, depth_bins, range_):
    options = dict(dtype=img2lidar.dtype)
    u = (torch.arange(width, **options) + 0.5) * stride
    v = (torch.arange(height, **options) + 0.5) * stride
    d = torch.tensor(depth_bins, **options)
    depth = d.size(0)
    uu = u.view(1, width, 1).expand(height, width, depth)
    vv = v.view(height, 1, 1).expand(height, width, depth)
    dd = d.view(1, 1, depth).expand(height, width, depth)
    points = torch.stack([uu * dd, vv * dd, dd, torch.ones_like(dd)], -1)
    lidar = torch.einsum("nij,hwdj->nhwdi", img2lidar, points).narrow(-1, 0, 3)
    low = torch.tensor(range_[:3], **options)
    high = torch.tensor(range_[3:], **options)
    return (lidar - low) / (high - low)


def inverse_sigmoid(x, eps=1e-5):
    clamped = x.clamp(0, 1)
    return torch.log(clamped.clamp_min(eps) / (1 - clamped).clamp_min(eps))


class MotionLayerNorm(nn.Module):
    def __init__(self, channels, motion_dims):
        super().__init__()
        self.norm = nn.LayerNorm([channels], elementwise_affine=False)
        self.gamma = nn.Linear(motion_dims, channels)
        self.beta = nn.Linear(motion_dims, channels)
        with torch.no_grad():
            self.gamma.weight.zero_()
            self.gamma.bias.fill_(1)
            self.beta.weight.zero_()
            self.beta.bias.zero_()

    def forward(self, x, motion):
        return self.gamma(motion) * self.norm(x) + self.beta(motion)


# ----------------------------------------------------------------------------------------------
# real/streampetr_modules.cc


class Backbone(nn.Module):
    def __init__(self, channels):
        super().__init__()
        layers = []
        in_ = 3
        for out in (16, 32, 64, 128):
            layers += [nn.Conv2d(in_, out, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(out), nn.ReLU()]
            in_ = out
        self.stages = nn.Sequential(*layers)
        self.neck = nn.Conv2d(in_, channels, 1)

    def forward(self, images):
        return self.neck(self.stages(images))


class DecoderLayer(nn.Module):
    def __init__(self, channels, heads, ffn_channels):
        super().__init__()
        self.self_attention = nn.MultiheadAttention(channels, heads)
        self.cross_attention = nn.MultiheadAttention(channels, heads)
        self.ffn_in = nn.Linear(channels, ffn_channels)
        self.ffn_out = nn.Linear(ffn_channels, channels)
        self.norm1 = nn.LayerNorm([channels])
        self.norm2 = nn.LayerNorm([channels])
        self.norm3 = nn.LayerNorm([channels])

    def forward(self, query, query_pos, memory, memory_pos, memory_valid, tokens, tokens_pos):
        batch, queries = query.size(0), query.size(1)

        def t(x):  # attention takes [L, B, C]
            return x.transpose(0, 1)

        keys = torch.cat([query + query_pos, memory + memory_pos], 1)
        values = torch.cat([query, memory], 1)
        padding = torch.cat([torch.zeros(batch, queries, dtype=torch.bool), memory_valid.logical_not()], 1)
        x = query
        self_ = self.self_attention(t(query + query_pos), t(keys), t(values), key_padding_mask=padding)[0]
        x = self.norm1(x + t(self_))
        cross = self.cross_attention(t(x + query_pos), t(tokens + tokens_pos), t(tokens))[0]
        x = self.norm2(x + t(cross))
        x = self.norm3(x + self.ffn_out(torch.relu(self.ffn_in(x))))
        return x


# ----------------------------------------------------------------------------------------------
# real/memory.cc


class StreamingMemory:
    def __init__(self, batch, memory_len, channels, dtype=torch.float32):
        self.embeddings = torch.zeros(batch, memory_len, channels, dtype=dtype)
        self.points = torch.zeros(batch, memory_len, 3, dtype=dtype)
        self.age = torch.zeros(batch, memory_len, dtype=dtype)
        self.valid = torch.zeros(batch, memory_len, dtype=torch.bool)

    def pre_update(self, ego_motion, prev_exists, dt):
        batch, length = self.embeddings.size(0), self.embeddings.size(1)
        assert tuple(ego_motion.shape) == (batch, 4, 4)
        assert tuple(prev_exists.shape) == (batch,) and tuple(dt.shape) == (batch,)
        motion = ego_motion.to(self.points.dtype)
        rotation = motion.narrow(1, 0, 3).narrow(2, 0, 3)
        translation = motion.narrow(1, 0, 3).select(2, 3)
        self.points = torch.matmul(self.points, rotation.transpose(1, 2)) + translation.unsqueeze(1)
        self.age = self.age + dt.to(self.age.dtype).unsqueeze(1)
        keep = prev_exists.to(torch.bool).view(batch, 1)
        self.embeddings = self.embeddings * keep.unsqueeze(2).to(self.embeddings.dtype)
        self.points = self.points * keep.unsqueeze(2).to(self.points.dtype)
        self.age = self.age * keep.to(self.age.dtype)
        self.valid = self.valid.logical_and(keep.expand(batch, length))

    def post_update(self, embeddings, reference_points, scores, topk):
        batch, length = self.embeddings.size(0), self.embeddings.size(1)
        assert embeddings.dim() == 3 and embeddings.size(0) == batch and embeddings.size(2) == self.embeddings.size(2)
        assert 1 <= topk <= embeddings.size(1) and topk <= length
        index = scores.topk(topk, 1)[1]
        new_embeddings = embeddings.gather(1, index.unsqueeze(2).expand(batch, topk, embeddings.size(2)))
        new_points = reference_points.gather(1, index.unsqueeze(2).expand(batch, topk, 3))
        self.embeddings = torch.cat([new_embeddings.to(self.embeddings.dtype), self.embeddings], 1).narrow(1, 0, length)
        self.points = torch.cat([new_points.to(self.points.dtype), self.points], 1).narrow(1, 0, length)
        self.age = torch.cat([torch.zeros(batch, topk, dtype=self.age.dtype), self.age], 1).narrow(1, 0, length)
        self.valid = torch.cat([torch.ones(batch, topk, dtype=torch.bool), self.valid], 1).narrow(1, 0, length)


# ----------------------------------------------------------------------------------------------
# real/hungarian.cc (the same algorithm, pure Python) and real/losses.cc

MATCH_SECONDS = [0.0]  # time spent in linear_sum_assignment


def linear_sum_assignment(cost):
    """cost: a list of rows. Returns min(rows, cols) (row, col) pairs of least total cost."""
    rows = len(cost)
    cols = len(cost[0]) if rows else 0
    for row in cost:
        for x in row:
            if not math.isfinite(x):
                raise ValueError("linear_sum_assignment: a cost entry is not finite")
    if rows == 0 or cols == 0:
        return []
    transposed = rows > cols
    if transposed:
        cost = [list(c) for c in zip(*cost)]
    n, m = len(cost), len(cost[0])
    inf = math.inf
    u = [0.0] * (n + 1)
    v = [0.0] * (m + 1)
    p = [0] * (m + 1)
    way = [0] * (m + 1)
    for i in range(1, n + 1):
        p[0] = i
        j0 = 0
        minv = [inf] * (m + 1)
        used = [False] * (m + 1)
        while True:
            used[j0] = True
            i0 = p[j0]
            delta = inf
            j1 = 0
            row = cost[i0 - 1]
            ui0 = u[i0]
            for j in range(1, m + 1):
                if used[j]:
                    continue
                reduced = row[j - 1] - ui0 - v[j]
                if reduced < minv[j]:
                    minv[j] = reduced
                    way[j] = j0
                if minv[j] < delta:
                    delta = minv[j]
                    j1 = j
            for j in range(m + 1):
                if used[j]:
                    u[p[j]] += delta
                    v[j] -= delta
                else:
                    minv[j] -= delta
            j0 = j1
            if p[j0] == 0:
                break
        while True:  # augment along the path
            j1 = way[j0]
            p[j0] = p[j1]
            j0 = j1
            if j0 == 0:
                break
    pairs = []
    for j in range(1, m + 1):
        i = p[j]
        if i == 0:
            continue
        pairs.append((j - 1, i - 1) if transposed else (i - 1, j - 1))
    pairs.sort()
    return pairs


def sigmoid_focal_loss(logits, labels, avg_factor):
    classes = logits.size(1)
    targets = F.one_hot(labels, classes + 1).narrow(1, 0, classes).to(logits.dtype)
    p = torch.sigmoid(logits)
    pt = (1 - p) * targets + p * (1 - targets)
    weight = (FOCAL_ALPHA * targets + (1 - FOCAL_ALPHA) * (1 - targets)) * pt.pow(FOCAL_GAMMA)
    loss = F.binary_cross_entropy_with_logits(logits, targets, reduction="none") * weight
    return loss.sum() / avg_factor


def weighted_l1_loss(pred, target, code_weights, avg_factor):
    return ((pred - target).abs() * code_weights).sum() / avg_factor


def match_cost(logits, pred_boxes, gt_labels, gt_boxes, code_weights):
    eps = 1e-12
    p = torch.sigmoid(logits)
    neg = -(1 - p + eps).log() * (1 - FOCAL_ALPHA) * p.pow(FOCAL_GAMMA)
    pos = -(p + eps).log() * FOCAL_ALPHA * (1 - p).pow(FOCAL_GAMMA)
    cls_cost = pos.index_select(1, gt_labels) - neg.index_select(1, gt_labels)
    reg_cost = torch.cdist(pred_boxes * code_weights, gt_boxes * code_weights, 1.0)
    return 2.0 * cls_cost + 0.25 * reg_cost


def hungarian_match(cost):
    c = cost.detach().to(torch.float64).contiguous().tolist()
    start = time.perf_counter()
    pairs = linear_sum_assignment(c)
    MATCH_SECONDS[0] += time.perf_counter() - start
    return pairs


def detection_loss(logits, boxes, gt_labels, gt_boxes, code_weights, avg_factor):
    """Returns (classification, regression, positives), as real/losses.cc DetectionLoss."""
    queries, classes = logits.size(0), logits.size(1)
    labels = torch.full((queries,), classes, dtype=torch.int64)
    if gt_labels.size(0) == 0:
        return sigmoid_focal_loss(logits, labels, avg_factor), (boxes * 0).sum(), 0
    with torch.no_grad():
        cost = match_cost(logits, boxes, gt_labels, gt_boxes, code_weights)
    pairs = hungarian_match(cost)
    q_index = torch.tensor([q for q, _ in pairs], dtype=torch.int64)
    g_index = torch.tensor([g for _, g in pairs], dtype=torch.int64)
    labels.index_put_((q_index,), gt_labels.index_select(0, g_index))
    classification = sigmoid_focal_loss(logits, labels, avg_factor)
    regression = weighted_l1_loss(boxes.index_select(0, q_index), gt_boxes.index_select(0, g_index), code_weights,
                                  avg_factor)
    return classification, regression, len(pairs)


def sine_embedding_3d(points, half_channels):
    assert points.dim() == 2 and points.size(1) == 3
    scale = 2 * 3.14159265358979323846
    dim_t = torch.arange(2 * half_channels, dtype=points.dtype)
    dim_t = torch.pow(10000.0, 2 * torch.floor(dim_t / 2) / (2 * half_channels))
    parts = []
    for axis in range(3):
        p = points.select(1, axis).unsqueeze(1) * scale / dim_t
        even = p[:, 0::2].sin()
        odd = p[:, 1::2].cos()
        parts.append(torch.stack([even, odd], 2).flatten(1))
    return torch.cat([parts[1], parts[0], parts[2]], 1)  # PETR's y, x, z


# ----------------------------------------------------------------------------------------------
# real/streampetr_model.cc


class StreamPetr(nn.Module):
    def __init__(self):
        super().__init__()
        ch = CHANNELS
        self.depth_bins = lid_depth_bins(DEPTH_BINS, 1.0, RANGE[3])
        self.backbone = Backbone(ch)
        self.position_in = nn.Linear(3 * DEPTH_BINS, 2 * ch)
        self.position_out = nn.Linear(2 * ch, ch)
        self.reference = nn.Embedding(QUERIES, 3)
        nn.init.uniform_(self.reference.weight, 0, 1)
        self.query_pos_in = nn.Linear(3 * ch, ch)
        self.query_pos_out = nn.Linear(ch, ch)
        self.memory_norm = MotionLayerNorm(ch, MOTION_DIMS)
        self.layers = []
        for i in range(DECODER_LAYERS):  # named layer0, layer1, ... as in C++
            layer = DecoderLayer(ch, HEADS, FFN_CHANNELS)
            self.add_module("layer%d" % i, layer)
            self.layers.append(layer)
        self.classify = nn.Linear(ch, CLASSES)
        self.regress = nn.Linear(ch, BOX_TERMS)
        with torch.no_grad():
            self.classify.bias.fill_(-math.log((1 - 0.01) / 0.01))

    def forward(self, images, img2lidar, memory, motion):
        batch, cameras, ch = images.size(0), images.size(1), CHANNELS
        features = self.backbone(images.flatten(0, 1))
        h, w = features.size(2), features.size(3)
        tokens = features.view(batch, cameras, ch, h, w).permute(0, 1, 3, 4, 2).reshape(batch, -1, ch)
        positions = []
        for b in range(batch):
            coords = frustum_coords(img2lidar[b].to(torch.float64), h, w, 16.0, self.depth_bins, RANGE).to(tokens.dtype)
            positions.append(inverse_sigmoid(coords).reshape(cameras * h * w, DEPTH_BINS * 3))
        tokens_pos = self.position_out(torch.relu(self.position_in(torch.stack(positions))))
        ref = self.reference.weight.clamp(0, 1).unsqueeze(0).expand(batch, QUERIES, 3)
        query_pos = self.query_pos_out(torch.relu(self.query_pos_in(sine_embedding_3d(ref.reshape(-1, 3), ch // 2)))) \
            .view(batch, QUERIES, ch)
        query = torch.zeros(batch, QUERIES, ch, dtype=tokens.dtype)
        low = torch.tensor(RANGE[:3], dtype=tokens.dtype)
        high = torch.tensor(RANGE[3:], dtype=tokens.dtype)
        memory_points = ((memory.points.to(tokens.dtype) - low) / (high - low)).clamp(0, 1)
        length = memory_points.size(1)
        memory_pos = self.query_pos_out(torch.relu(self.query_pos_in(
            sine_embedding_3d(memory_points.reshape(-1, 3), ch // 2)))).view(batch, length, ch)
        memory_embeddings = self.memory_norm(memory.embeddings.to(tokens.dtype),
                                             motion.to(tokens.dtype).unsqueeze(1).expand(batch, length, MOTION_DIMS))
        logits, boxes = [], []
        ref_logit = inverse_sigmoid(ref)
        for layer in self.layers:
            query = layer(query, query_pos, memory_embeddings, memory_pos, memory.valid, tokens, tokens_pos)
            raw = self.regress(query)
            centre = torch.sigmoid(raw.narrow(2, 0, 3) + ref_logit)
            boxes.append(torch.cat([centre, raw.narrow(2, 3, BOX_TERMS - 3)], 2))
            logits.append(self.classify(query))
        with torch.no_grad():
            centres = boxes[-1].narrow(2, 0, 3) * (high - low) + low
            scores = logits[-1].sigmoid().max(2)[0]
            memory.post_update(query.detach().to(memory.embeddings.dtype), centres.to(memory.points.dtype), scores,
                               TOPK)
        return logits, boxes


def box_targets(boxes, range_):
    values = []
    for b in boxes:
        values += [(b[0] - range_[0]) / (range_[3] - range_[0]), (b[1] - range_[1]) / (range_[4] - range_[1]),
                   (b[2] - range_[2]) / (range_[5] - range_[2]), math.log(b[3]), math.log(b[4]), math.log(b[5]),
                   math.sin(b[6]), math.cos(b[6]), 0.0, 0.0]
    return torch.tensor(values, dtype=torch.float32).view(len(boxes), BOX_TERMS)


# ----------------------------------------------------------------------------------------------
# The step (bench/step_bench.cc's Step, after real/trainer.cc).


class Inputs:
    pass


def make_inputs(batch):
    """Random inputs of the same shapes and kinds as step_bench.cc's (not the same values: those
    come from --check DIR)."""
    g = torch.Generator().manual_seed(1234)
    inp = Inputs()
    inp.images = torch.rand(batch, 6, 3, IMAGE_HEIGHT, IMAGE_WIDTH, generator=g)
    # A pinhole rig like real/geometry.cc's SurroundRig: 6 cameras, 70 degree horizontal field of
    # view, 1.5 m up, yaws 0, -55, -110, 180, 110, 55 degrees.
    mats = []
    fx = (IMAGE_WIDTH / 2) / math.tan(math.radians(35))
    for yaw_deg in (0, -55, -110, 180, 110, 55):
        yaw = math.radians(yaw_deg)
        c, s = math.cos(yaw), math.sin(yaw)
        forward, right, down = (c, s, 0.0), (s, -c, 0.0), (0.0, 0.0, -1.0)
        sensor2lidar = torch.eye(4, dtype=torch.float64)
        sensor2lidar[:3, 0] = torch.tensor(right, dtype=torch.float64)
        sensor2lidar[:3, 1] = torch.tensor(down, dtype=torch.float64)
        sensor2lidar[:3, 2] = torch.tensor(forward, dtype=torch.float64)
        sensor2lidar[2, 3] = 1.5
        k = torch.eye(4, dtype=torch.float64)
        k[0, 0], k[1, 1], k[0, 2], k[1, 2] = fx, fx, IMAGE_WIDTH / 2, IMAGE_HEIGHT / 2
        mats.append(torch.linalg.inv(k @ torch.linalg.inv(sensor2lidar)))
    inp.img2lidar = torch.stack(mats).unsqueeze(0).repeat(batch, 1, 1, 1)
    yaw, tx, ty = 0.03, 4.0, 0.1
    rigid = torch.eye(4, dtype=torch.float64)
    rigid[0, 0], rigid[0, 1], rigid[1, 0], rigid[1, 1] = math.cos(yaw), -math.sin(yaw), math.sin(yaw), math.cos(yaw)
    rigid[0, 3], rigid[1, 3] = tx, ty
    inp.ego_motion = torch.linalg.inv(rigid).unsqueeze(0).repeat(batch, 1, 1).to(torch.float32)
    inp.prev_exists = torch.ones(batch, dtype=torch.bool)
    inp.dt = torch.full((batch,), 0.5)
    inp.motion_vector = torch.cat([inp.ego_motion.narrow(1, 0, 3).flatten(1), inp.dt.unsqueeze(1)], 1)
    inp.code_weights = torch.tensor([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.2, 0.2], dtype=torch.float32)
    inp.labels, inp.targets = [], []
    for slot in range(batch):
        boxes = 8 if slot % 2 == 0 else 5
        inp.labels.append(torch.randint(0, CLASSES, (boxes,), dtype=torch.int64, generator=g))
        u = torch.rand(boxes, 7, dtype=torch.float64, generator=g).tolist()
        inp.targets.append(box_targets([[-40 + 80 * r[0], -40 + 80 * r[1], -2 + 3 * r[2], 0.5 + 2.5 * r[3],
                                         0.5 + 4.5 * r[4], 1.0 + 1.5 * r[5], -3.14159 + 6.28318 * r[6]] for r in u],
                                       RANGE))
    return inp


def read_dump(directory):
    tensors = {}
    with open(os.path.join(directory, "index.txt")) as index:
        for line in index:
            fields = line.split()
            name, dtype, ndim = fields[0], fields[1], int(fields[2])
            shape = [int(x) for x in fields[3:3 + ndim]]
            np_dtype = {"float32": np.float32, "float64": np.float64, "int64": np.int64, "bool": np.int64}[dtype]
            array = np.fromfile(os.path.join(directory, name + ".bin"), dtype=np_dtype).reshape(shape)
            t = torch.from_numpy(array.copy())
            tensors[name] = t.bool() if dtype == "bool" else t
    return tensors


def load_dump(model, tensors, batch):
    """Copies the C++ parameters and buffers into `model` (names and shapes must agree) and returns
    the C++ inputs and reference losses."""
    ours = dict(model.named_parameters())
    ours_buffers = dict(model.named_buffers())
    theirs = {k[len("param."):]: v for k, v in tensors.items() if k.startswith("param.")}
    theirs_buffers = {k[len("buffer."):]: v for k, v in tensors.items() if k.startswith("buffer.")}
    problems = []
    for kind, a, b in (("parameter", ours, theirs), ("buffer", ours_buffers, theirs_buffers)):
        for name in sorted(set(a) | set(b)):
            if name not in a:
                problems.append("%s %s only in C++ %s" % (kind, name, list(b[name].shape)))
            elif name not in b:
                problems.append("%s %s only in Python %s" % (kind, name, list(a[name].shape)))
            elif tuple(a[name].shape) != tuple(b[name].shape):
                problems.append("%s %s: Python %s, C++ %s" % (kind, name, list(a[name].shape), list(b[name].shape)))
    if problems:
        raise SystemExit("step_python: the architectures differ:\n  " + "\n  ".join(problems))
    with torch.no_grad():
        for name, p in ours.items():
            p.copy_(theirs[name])
        for name, b in ours_buffers.items():
            b.copy_(theirs_buffers[name])
    inp = Inputs()
    for key in ("images", "img2lidar", "ego_motion", "prev_exists", "dt", "motion_vector", "code_weights"):
        setattr(inp, key, tensors["input." + key])
    inp.labels = [tensors["input.labels.%d" % s] for s in range(batch)]
    inp.targets = [tensors["input.targets.%d" % s] for s in range(batch)]
    return inp, tensors["reference.losses"].tolist()


def step(model, optimizer, memory, inp):
    memory.pre_update(inp.ego_motion, inp.prev_exists, inp.dt)
    logits, boxes = model(inp.images, inp.img2lidar, memory, inp.motion_vector)
    positives = sum(l.size(0) for l in inp.labels)
    avg_factor = max(1.0, float(positives))  # world size 1
    loss = torch.zeros(())
    for layer in range(len(logits)):
        for slot in range(len(inp.labels)):
            classification, regression, _ = detection_loss(logits[layer][slot], boxes[layer][slot], inp.labels[slot],
                                                           inp.targets[slot], inp.code_weights, avg_factor)
            loss = loss + classification + regression
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--check", metavar="DIR", help="a dump of `step_bench --dump DIR` to load and compare with")
    args = parser.parse_args()
    default_threads = torch.get_num_threads()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = StreamPetr()
    model.train()
    params = sum(p.numel() for p in model.parameters())
    if args.check:
        tensors = read_dump(args.check)
        cpp_params = sum(v.numel() for k, v in tensors.items() if k.startswith("param."))
        inp, reference = load_dump(model, tensors, args.batch)
        print("python params=%d cpp params=%d: %s" % (params, cpp_params, "same" if params == cpp_params else "DIFFERENT"))
        if params != cpp_params:
            return 1
    else:
        inp, reference = make_inputs(args.batch), None
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    memory = StreamingMemory(args.batch, MEMORY_LEN, CHANNELS)
    if reference is not None:
        losses = [step(model, optimizer, memory, inp) for _ in range(len(reference))]
        worst = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(losses, reference))
        verdict = "match" if worst <= 1e-4 else "DIFFER"
        print("losses of the first %d steps from the same parameters and inputs: python %s, cpp %s: %s "
              "(largest relative difference %.2e)" % (len(reference), " ".join("%.6f" % l for l in losses),
                                                      " ".join("%.6f" % l for l in reference), verdict, worst))
        if verdict != "match":
            return 1
    print("python StreamPETR step: batch=%d threads=%d (requested %d, torch default %d) params=%d warmup=%d "
          "steps=%d reps=%d torch=%s" % (args.batch, torch.get_num_threads(), args.threads, default_threads, params,
                                         args.warmup, args.steps, args.reps, torch.__version__))
    loss = 0.0
    for _ in range(args.warmup):
        loss = step(model, optimizer, memory, inp)
    per_step, match_share = [], []
    for r in range(args.reps):
        MATCH_SECONDS[0] = 0.0
        start = time.perf_counter()
        for _ in range(args.steps):
            loss = step(model, optimizer, memory, inp)
        ms = (time.perf_counter() - start) * 1000 / args.steps
        per_step.append(ms)
        match_share.append(MATCH_SECONDS[0] * 1000 / args.steps)
        print("python rep %d: %.3f ms/step (loss %.4f; pure-Python matcher %.3f ms/step)"
              % (r, ms, loss, match_share[-1]), flush=True)
    print("RESULT impl=python threads=%d params=%d median_ms=%.3f min_ms=%.3f matcher_ms=%.3f"
          % (torch.get_num_threads(), params, statistics.median(per_step), min(per_step),
             statistics.median(match_share)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
