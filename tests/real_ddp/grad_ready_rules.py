#!/usr/bin/python3
"""The gradient-ready rules petrsim's StreamPETR reference model relies on, checked on real PyTorch.

plan/streampetr_ddp_model.cc derives DdpModel.grad_ready_order (the order iteration 0's backward
makes the gradients ready, which DDP's bucket rebuild follows) from a walk of the forward: every
module use in forward order, then the uses taken in reverse, each parameter at its FIRST use only,
and inside one use a fixed order per module kind. This script checks those rules on torch:

* within a module: nn.Linear (with and without bias, 2-D, 3-D contiguous and strided input):
  bias before weight; nn.LayerNorm, nn.GroupNorm, nn.Conv2d (also under autocast, as mmcv's
  auto_fp16 runs StreamPETR's backbone and neck): weight before bias; nn.Embedding: its weight;
  nn.MultiheadAttention and a FlashMHA-like module (F._in_projection_packed + out_proj):
  out_proj.bias, out_proj.weight, in_proj_bias, in_proj_weight;
* composition: a Sequential in reverse; a module used twice is ready at its first use; a residual
  block with a downsample branch (used last, so ready first); a reentrant torch.utils.checkpoint
  block (ready inside its backward, in the same order, at the block's place); two heads on one
  trunk whose losses are summed (the head computed last is ready first, whatever the sum order);
* a toy model shaped like StreamPETR's forward (checkpointed backbone blocks under autocast, an
  FPN-like neck, a FocalHead-like 2D head, then the 3D head with MLNs, embeddings used twice,
  checkpointed decoder layers with post_norm after each and shared cls/reg branches per level):
  the order the same rules give (written here as the C++ walk is) equals the hooks' order, and
  equals the bucket layout real DDP rebuilds (1-process Gloo, every parameter its own bucket, the
  layout read from a comm hook's GradBucket.parameters() in iteration 1).

The order is observed with Tensor.register_hook on each parameter (a leaf's hook runs when its
AccumulateGrad runs, which is when DDP's autograd hook marks it ready) and, for the toy model,
with DDP itself.

Needs /usr/bin/python3 with torch (Debian's 1.13); exit 77 without torch (CTest: skipped), 0 when
every rule holds, 1 with a message naming the first difference otherwise. Standard library and
torch only.
"""

import os
import socket
import sys

SKIP = 77

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torch.utils.checkpoint as cp
except ImportError:
    print("grad_ready_rules: no torch for this interpreter; skipped")
    sys.exit(SKIP)


class Walk:
    """The C++ ForwardWalk (plan/streampetr_ddp_model.cc): uses in forward order -> ready order."""

    def __init__(self):
        self.uses = []

    def linear(self, prefix, bias=True):
        self.uses.append([prefix + "bias", prefix + "weight"] if bias else [prefix + "weight"])

    def norm(self, prefix):
        self.uses.append([prefix + "weight", prefix + "bias"])

    def conv(self, prefix, bias=True):
        self.uses.append([prefix + "weight", prefix + "bias"] if bias else [prefix + "weight"])

    def tensor(self, name):
        self.uses.append([name])

    def attention(self, prefix):
        self.uses.append(
            [prefix + "out_proj.bias", prefix + "out_proj.weight", prefix + "in_proj_bias", prefix + "in_proj_weight"]
        )

    def ready_order(self):
        first = {}
        for i, names in enumerate(self.uses):
            for name in names:
                first.setdefault(name, i)
        order = []
        for i in reversed(range(len(self.uses))):
            order += [name for name in self.uses[i] if first[name] == i]
        return order


def hook_order(model, loss_fn):
    """Parameter names in the order their AccumulateGrad ran in loss_fn().backward()."""
    order, handles = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            handles.append(p.register_hook(lambda g, name=name: order.append(name)))
    loss_fn().backward()
    for h in handles:
        h.remove()
    model.zero_grad(set_to_none=True)
    return order


FAILURES = []


def check(case, got, want):
    if got == want:
        print(f"ok   {case}")
        return
    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    FAILURES.append(case)
    print(f"FAIL {case}: the ready order differs from the rule's at position {first}")
    print(f"     torch: {got}")
    print(f"     rule:  {want}")


# --- Within a module ------------------------------------------------------------------------------


class FlashLike(nn.Module):
    """StreamPETR's FlashMHA parameter use (attention.py:115-142) with plain attention for the kernel."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.in_proj_weight = nn.Parameter(torch.randn(3 * dim, dim) * 0.1)
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * dim))
        self.out_proj = nn.Linear(dim, dim)

    def forward(self, q, k, v):
        q, k, v = F._in_projection_packed(q, k, v, self.in_proj_weight, self.in_proj_bias)
        attn = torch.softmax(q @ k.transpose(-1, -2) / q.size(-1) ** 0.5, dim=-1)
        return self.out_proj(attn @ v)


def within_module_checks():
    x2, x3 = torch.randn(6, 8), torch.randn(2, 5, 8)
    strided = torch.randn(5, 2, 8).transpose(0, 1)
    for label, x in (("2-D", x2), ("3-D", x3), ("3-D strided", strided)):
        m = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 4, bias=False))
        w = Walk()
        w.linear("0.")
        w.linear("1.", bias=False)
        check(f"Linear with and without bias, {label} input: bias before weight", hook_order(m, lambda: m(x).sum()),
              w.ready_order())
    m = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8))
    w = Walk()
    w.linear("0.")
    w.norm("1.")
    check("LayerNorm: weight before bias", hook_order(m, lambda: m(x3).sum()), w.ready_order())
    img = torch.randn(2, 3, 9, 9)
    m = nn.Sequential(nn.Conv2d(3, 8, 3), nn.GroupNorm(2, 8), nn.ReLU(), nn.Conv2d(8, 4, 1, bias=False))
    w = Walk()
    w.conv("0.")
    w.norm("1.")
    w.conv("3.", bias=False)
    check("Conv2d, GroupNorm: weight before bias", hook_order(m, lambda: m(img).sum()), w.ready_order())
    m = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Conv2d(8, 4, 1))
    w = Walk()
    w.conv("0.")
    w.conv("1.")

    def autocast_loss():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = m(img)
        return out.float().sum()

    check("Conv2d under autocast: weight before bias", hook_order(m, autocast_loss), w.ready_order())
    m = nn.ModuleDict(dict(emb=nn.Embedding(7, 8), fc=nn.Linear(8, 2)))
    w = Walk()
    w.tensor("emb.weight")
    w.linear("fc.")
    check("Embedding weight through torch.cat, then a Linear",
          hook_order(m, lambda: m["fc"](torch.cat([torch.zeros(2, 8), m["emb"].weight])).sum()), w.ready_order())
    q, mem = torch.randn(4, 2, 16), torch.randn(6, 2, 16)
    for label, args in (("self", (q, q, q)), ("key + pos, value", (q, mem + 1.0, mem))):
        m = nn.MultiheadAttention(16, 2)
        w = Walk()
        w.attention("")
        check(f"nn.MultiheadAttention ({label})", hook_order(m, lambda: m(*args)[0].sum()), w.ready_order())
    m = FlashLike(16, 2)
    w = Walk()
    w.attention("")
    check("FlashMHA-like (_in_projection_packed, out_proj)",
          hook_order(m, lambda: m(q.transpose(0, 1), (mem + 1.0).transpose(0, 1), mem.transpose(0, 1)).sum()),
          w.ready_order())


# --- Composition ----------------------------------------------------------------------------------


class Bottleneck(nn.Module):
    """mmdet's Bottleneck: conv1, conv2, conv3, then downsample(x) as the identity; checkpointed."""

    def __init__(self, cin, planes, downsample, with_cp):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, 4 * planes, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(4 * planes)
        self.downsample = (
            nn.Sequential(nn.Conv2d(cin, 4 * planes, 1, bias=False), nn.BatchNorm2d(4 * planes)) if downsample else None
        )
        for bn in (self.bn1, self.bn2, self.bn3) + ((self.downsample[1],) if downsample else ()):
            bn.weight.requires_grad = False  # BN2d with requires_grad=False, as the config's
            bn.bias.requires_grad = False
        self.with_cp = with_cp

    def forward(self, x):
        def inner(x):
            identity = x
            out = F.relu(self.bn1(self.conv1(x)))
            out = F.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            if self.downsample is not None:
                identity = self.downsample(x)
            out += identity
            return out

        out = cp.checkpoint(inner, x) if self.with_cp and x.requires_grad else inner(x)
        return F.relu(out)


def walk_bottleneck(w, prefix, downsample):
    for conv in ("conv1.", "conv2.", "conv3."):
        w.conv(prefix + conv, bias=False)
    if downsample:
        w.conv(prefix + "downsample.0.", bias=False)


def composition_checks():
    x = torch.randn(3, 8)
    shared = nn.Linear(8, 8)
    m = nn.ModuleDict(dict(a=shared, b=nn.Linear(8, 8), c=nn.Linear(8, 8)))
    w = Walk()
    for name in ("a", "b", "a", "c"):
        w.linear(name + ".")
    check("a module used twice is ready at its first use",
          hook_order(m, lambda: m["c"](m["a"](m["b"](m["a"](x)))).sum()), w.ready_order())
    # Interleaved reuse, as temporal_alignment's MLNs: A, B, B, A.
    m = nn.ModuleDict(dict(a=nn.Linear(8, 8), b=nn.Linear(8, 8)))
    w = Walk()
    for name in ("a", "b", "b", "a"):
        w.linear(name + ".")

    def interleaved():
        p, q = m["a"](x), m["b"](x)
        return (m["b"](q) + m["a"](p)).sum()

    check("interleaved reuse (A, B, B, A): B ready before A", hook_order(m, interleaved), w.ready_order())
    img = torch.randn(2, 8, 6, 6, requires_grad=True)
    for with_cp in (False, True):
        m = nn.Sequential(Bottleneck(8, 4, True, with_cp), Bottleneck(16, 4, False, with_cp))
        w = Walk()
        walk_bottleneck(w, "0.", True)
        walk_bottleneck(w, "1.", False)
        check(f"residual blocks with a downsample branch{', checkpointed' if with_cp else ''}",
              hook_order(m, lambda: m(img).sum()), w.ready_order())
    trunk, head_a, head_b = nn.Linear(8, 8), nn.Linear(8, 2), nn.Linear(8, 2)
    m = nn.ModuleDict(dict(trunk=trunk, a=head_a, b=head_b))
    w = Walk()
    for name in ("trunk", "a", "b"):
        w.linear(name + ".")
    for label, total in (("a + b", lambda la, lb: la + lb), ("b + a", lambda la, lb: lb + la)):
        def two_heads():
            feat = m["trunk"](x)
            la = m["a"](feat).pow(2).mean()
            lb = m["b"](feat).pow(2).mean()
            return total(la, lb)

        check(f"two heads on one trunk, losses summed as {label}: the later head first", hook_order(m, two_heads),
              w.ready_order())


# --- A toy model shaped like StreamPETR's forward --------------------------------------------------


class Mln(nn.Module):
    def __init__(self, c_dim, f_dim):
        super().__init__()
        self.reduce = nn.Sequential(nn.Linear(c_dim, f_dim), nn.ReLU())
        self.gamma = nn.Linear(f_dim, f_dim)
        self.beta = nn.Linear(f_dim, f_dim)
        self.ln = nn.LayerNorm(f_dim, elementwise_affine=False)

    def forward(self, x, c):
        x = self.ln(x)
        c = self.reduce(c)
        return self.gamma(c) * x + self.beta(c)


class SeLayer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.conv_reduce = nn.Linear(dim, dim)
        self.conv_expand = nn.Linear(dim, dim)

    def forward(self, x, x_se):
        return x * torch.sigmoid(self.conv_expand(F.relu(self.conv_reduce(x_se))))


class DecoderLayer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.attentions = nn.ModuleList([nn.ModuleDict(dict(attn=nn.MultiheadAttention(dim, 2))),
                                         nn.ModuleDict(dict(attn=FlashLike(dim, 2)))])
        self.ffns = nn.ModuleList([nn.ModuleDict(dict(layers=nn.Sequential(
            nn.Sequential(nn.Linear(dim, 2 * dim), nn.ReLU()), nn.Linear(2 * dim, dim))))])
        self.norms = nn.ModuleList([nn.LayerNorm(dim) for _ in range(3)])

    def inner(self, query, memory, query_pos, key_pos, temp_memory, temp_pos):
        key = torch.cat([query, temp_memory], dim=0)
        pos = torch.cat([query_pos, temp_pos], dim=0)
        query = query + self.attentions[0]["attn"](query + query_pos, key + pos, key)[0]
        query = self.norms[0](query)
        q, k, v = (t.transpose(0, 1) for t in (query + query_pos, memory + key_pos, memory))
        query = query + self.attentions[1]["attn"](q, k, v).transpose(0, 1)
        query = self.norms[1](query)
        query = query + self.ffns[0]["layers"](query)
        return self.norms[2](query)

    def forward(self, *args):
        return cp.checkpoint(self.inner, *args)


class ToyStreamPetr(nn.Module):
    """Registration order as Petr3D's (the 3D head first); forward order as forward_train's."""

    def __init__(self, dim=16, layers=3, levels=3):
        super().__init__()
        self.layers, self.levels = layers, levels
        h = nn.Module()
        branch_cls = nn.Sequential(nn.Linear(dim, dim), nn.LayerNorm(dim), nn.ReLU(), nn.Linear(dim, 3))
        branch_reg = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, 4))
        h.cls_branches = nn.ModuleList([branch_cls for _ in range(levels)])
        h.reg_branches = nn.ModuleList([branch_reg for _ in range(levels)])
        h.position_encoder = nn.Sequential(nn.Linear(6, 2 * dim), nn.ReLU(), nn.Linear(2 * dim, dim))
        h.memory_embed = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))
        h.featurized_pe = SeLayer(dim)
        h.reference_points = nn.Embedding(5, 3)
        h.query_embedding = nn.Sequential(nn.Linear(3, dim), nn.ReLU(), nn.Linear(dim, dim))
        h.spatial_alignment = Mln(4, dim)
        h.time_embedding = nn.Sequential(nn.Linear(1, dim), nn.LayerNorm(dim))
        h.ego_pose_pe = Mln(5, dim)
        h.ego_pose_memory = Mln(5, dim)
        h.transformer = nn.Module()
        h.transformer.decoder = nn.Module()
        h.transformer.decoder.layers = nn.ModuleList([DecoderLayer(dim) for _ in range(layers)])
        h.transformer.decoder.post_norm = nn.LayerNorm(dim)
        self.pts_bbox_head = h
        b = nn.Module()
        b.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        b.layer1 = nn.Sequential(Bottleneck(8, 2, True, True), Bottleneck(8, 2, False, True))
        b.layer2 = nn.Sequential(Bottleneck(8, 4, True, True), Bottleneck(16, 4, False, True))
        self.img_backbone = b
        n = nn.Module()
        n.lateral_convs = nn.ModuleList([nn.ModuleDict(dict(conv=nn.Conv2d(8, dim, 1))),
                                         nn.ModuleDict(dict(conv=nn.Conv2d(16, dim, 1)))])
        n.fpn_convs = nn.ModuleList([nn.ModuleDict(dict(conv=nn.Conv2d(dim, dim, 3, padding=1)))])
        self.img_neck = n
        r = nn.Module()
        r.cls = nn.Conv2d(dim, 3, 1)
        r.shared_reg = nn.Sequential(nn.Conv2d(dim, dim, 3, padding=1), nn.GroupNorm(4, dim), nn.ReLU())
        r.shared_cls = nn.Sequential(nn.Conv2d(dim, dim, 3, padding=1), nn.GroupNorm(4, dim), nn.ReLU())
        r.centerness = nn.Conv2d(dim, 1, 1)
        r.ltrb = nn.Conv2d(dim, 4, 1)
        r.center2d = nn.Conv2d(dim, 2, 1)
        self.img_roi_head = r

    def forward(self, img):
        b, n, r, h = self.img_backbone, self.img_neck, self.img_roi_head, self.pts_bbox_head
        with torch.autocast("cpu", dtype=torch.bfloat16):  # mmcv auto_fp16 on extract_feat / the neck
            x = F.max_pool2d(F.relu(b.conv1(img)), 2)
            c1 = b.layer1(x)
            c2 = b.layer2(F.max_pool2d(c1, 2))
            laterals = [n.lateral_convs[0]["conv"](c1), n.lateral_convs[1]["conv"](c2)]
            laterals[0] += F.interpolate(laterals[1], size=laterals[0].shape[2:])
            feat = n.fpn_convs[0]["conv"](laterals[0]).float()
        cls_feat = r.shared_cls(feat)
        cls, centerness = r.cls(cls_feat), r.centerness(cls_feat)
        reg_feat = r.shared_reg(feat)
        ltrb, center2d = r.ltrb(reg_feat), r.center2d(reg_feat)
        loss2d = sum(t.pow(2).mean() for t in (cls, centerness, ltrb, center2d))
        tokens = feat.flatten(2).transpose(1, 2)[:, ::2]  # topk_gather of some tokens
        cone, coords = torch.rand(*tokens.shape[:2], 4), torch.rand(*tokens.shape[:2], 6)
        pos_embed = h.position_encoder(coords)
        memory = h.memory_embed(tokens)
        memory = h.spatial_alignment(memory, cone)
        pos_embed = h.featurized_pe(pos_embed, memory)
        refs = torch.cat([torch.rand(2, 3), h.reference_points.weight]).unsqueeze(0).repeat(tokens.size(0), 1, 1)
        query_pos = h.query_embedding(refs)
        temp_pos = h.query_embedding(torch.rand(tokens.size(0), 4, 3))
        tgt = torch.zeros_like(query_pos)
        motion, memory_motion = torch.rand(*query_pos.shape[:2], 5), torch.rand(tokens.size(0), 4, 5)
        tgt = h.ego_pose_memory(tgt, motion)
        query_pos = h.ego_pose_pe(query_pos, motion)
        temp_pos = h.ego_pose_pe(temp_pos, memory_motion)
        temp_memory = h.ego_pose_memory(torch.zeros(tokens.size(0), 4, memory.size(-1)), memory_motion)
        query_pos = query_pos + h.time_embedding(torch.zeros(*query_pos.shape[:2], 1))
        temp_pos = temp_pos + h.time_embedding(torch.rand(tokens.size(0), 4, 1))
        args = [t.transpose(0, 1) for t in (memory, query_pos, pos_embed, temp_memory, temp_pos)]
        query, intermediate = tgt.transpose(0, 1), []
        for layer in h.transformer.decoder.layers:
            query = layer(query, args[0], args[1], args[2], args[3], args[4])
            intermediate.append(h.transformer.decoder.post_norm(query))
        outs = torch.stack(intermediate).transpose(1, 2)
        preds = [(h.cls_branches[lvl](outs[lvl]), h.reg_branches[lvl](outs[lvl]) + refs.mean()) for lvl in
                 range(self.levels)]
        loss3d = sum(c.pow(2).mean() + g.pow(2).mean() for c, g in preds)
        return loss3d + loss2d  # the 3D head's loss first, FocalHead's after (petr3d.py:193-196)


def toy_walk(model):
    """The toy's forward uses, in order, as plan/streampetr_ddp_model.cc writes StreamPETR's."""
    w = Walk()
    w.conv("img_backbone.conv1.", bias=False)
    for layer in ("layer1", "layer2"):
        walk_bottleneck(w, f"img_backbone.{layer}.0.", True)
        walk_bottleneck(w, f"img_backbone.{layer}.1.", False)
    for name in ("lateral_convs.0", "lateral_convs.1", "fpn_convs.0"):
        w.conv(f"img_neck.{name}.conv.")
    w.conv("img_roi_head.shared_cls.0.")
    w.norm("img_roi_head.shared_cls.1.")
    w.conv("img_roi_head.cls.")
    w.conv("img_roi_head.centerness.")
    w.conv("img_roi_head.shared_reg.0.")
    w.norm("img_roi_head.shared_reg.1.")
    w.conv("img_roi_head.ltrb.")
    w.conv("img_roi_head.center2d.")
    h = "pts_bbox_head."

    def two(prefix):
        w.linear(prefix + "0.")
        w.linear(prefix + "2.")

    def mln(prefix):
        for name in ("reduce.0.", "gamma.", "beta."):
            w.linear(prefix + name)

    two(h + "position_encoder.")
    two(h + "memory_embed.")
    mln(h + "spatial_alignment.")
    w.linear(h + "featurized_pe.conv_reduce.")
    w.linear(h + "featurized_pe.conv_expand.")
    w.tensor(h + "reference_points.weight")
    two(h + "query_embedding.")
    two(h + "query_embedding.")
    for name in ("ego_pose_memory.", "ego_pose_pe.", "ego_pose_pe.", "ego_pose_memory."):
        mln(h + name)
    for _ in range(2):
        w.linear(h + "time_embedding.0.")
        w.norm(h + "time_embedding.1.")
    for layer in range(model.layers):
        p = f"{h}transformer.decoder.layers.{layer}."
        w.attention(p + "attentions.0.attn.")
        w.norm(p + "norms.0.")
        w.attention(p + "attentions.1.attn.")
        w.norm(p + "norms.1.")
        w.linear(p + "ffns.0.layers.0.0.")
        w.linear(p + "ffns.0.layers.1.")
        w.norm(p + "norms.2.")
        w.norm(h + "transformer.decoder.post_norm.")
    for _ in range(model.levels):
        w.linear(h + "cls_branches.0.0.")
        w.norm(h + "cls_branches.0.1.")
        w.linear(h + "cls_branches.0.3.")
        w.linear(h + "reg_branches.0.0.")
        w.linear(h + "reg_branches.0.2.")
    return w


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ddp_rebuilt_order(model, img):
    """Parameter names in the order of real DDP's rebuilt buckets (one parameter per bucket)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_gloo_available()):
        return None
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        # Limits of 1 byte close a bucket after every tensor, so the rebuilt layout lists the
        # parameters one by one in the order iteration 0 made them ready.
        dist._DEFAULT_FIRST_BUCKET_BYTES = 1
        ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1e-6)
        names = {id(p): n for n, p in model.named_parameters()}
        seen = []

        def hook(state, bucket):
            seen.append((bucket.index(), [names[id(p)] for p in bucket.parameters()]))
            fut = torch.futures.Future()
            fut.set_result(bucket.buffer())
            return fut

        ddp.register_comm_hook(None, hook)
        for _ in range(2):
            seen.clear()
            ddp(img).backward()
        # Iteration 0 has one bucket (1.12+); one bucket per parameter in iteration 1 shows the
        # rebuild happened (its logging data only counts it at sampled iterations).
        trainable = sum(p.requires_grad for p in model.parameters())
        if len(seen) != trainable:
            FAILURES.append("ddp rebuild")
            print(f"FAIL DDP's iteration 1 has {len(seen)} buckets, not one per trainable parameter ({trainable})")
        order = []
        for _, params in sorted(seen):
            order += params
        return order
    finally:
        dist.destroy_process_group()


def toy_checks():
    torch.manual_seed(0)
    model = ToyStreamPetr()
    img = torch.randn(2, 3, 16, 16)
    want = toy_walk(model).ready_order()
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    if sorted(want) != sorted(trainable):
        FAILURES.append("toy walk")
        print("FAIL the toy's walk does not name every trainable parameter once:",
              sorted(set(trainable) ^ set(want)))
        return
    check("StreamPETR-shaped toy: hooks' order", hook_order(model, lambda: model(img)), want)
    got = ddp_rebuilt_order(model, img)
    if got is None:
        print("skip StreamPETR-shaped toy under DDP: no torch.distributed with Gloo")
    else:
        check("StreamPETR-shaped toy: real DDP's rebuilt bucket order", got, want)


def main():
    print(f"torch {torch.__version__}")
    within_module_checks()
    composition_checks()
    toy_checks()
    if FAILURES:
        print(f"grad_ready_rules: {len(FAILURES)} check(s) failed: {', '.join(FAILURES)}")
        return 1
    print("grad_ready_rules: every rule holds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
