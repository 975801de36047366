#!/usr/bin/python3
"""Real PyTorch DDP against `petrsim plan`: collective for collective.

What it proves: for models generated from a seed (a chain of 2-8 Linear layers of random sizes,
with or without bias, optional BatchNorm1d, optionally one frozen layer, optionally a
non-persistent buffer, a few scalar all_reduces in the forward; and the families of apply_family:
modules registered out of the order the forward uses them, a block used twice, tied weights (one
parameter in two modules), a branch used on
some iterations only, float64 layers among float32 ones, frozen stages with norm_eval) and the
DDP flags drawn or forced
per case (broadcast_buffers, find_unused_parameters, a small bucket_cap_mb so several gradient
buckets form), the collectives that PyTorch's own DistributedDataParallel issues on rank 0 of a
2-process Gloo job -- construction, then ITERATIONS iterations of forward + backward + optimizer
step -- are exactly the ones `petrsim plan SCENARIO --iterations ITERATIONS --json` lists for a
scenario describing the same job (comm.torch_version "1.13", plan.custom.per_iteration = the
forward all_reduces, possibly none; plan.ddp = the model's tensors, the flags and the
gradient-ready order as a user states it from the forward, see ready_order): same count, and for
each one the same c10d sequence number, op, numel and dtype. The stated ready order is itself
checked against the order the real backward showed (a hook per parameter in iteration 0).

How the collectives are recorded: DDP runs on a Python ProcessGroup subclass that wraps a Gloo
group (docs/research/ddp_collectives.md, section 4, E1); the C++ reducer calls its overrides, which
log op, numel (summed over the tensor list; allgather: the inputs) and dtype, forward to the Gloo
group, and read the Gloo group's sequence number after the call. Every case gets a fresh Gloo group
(dist.new_group), and its sequence numbers are counted from the value right after the group was
created, so the first collective of a case is 1 -- like petrsim's. Only rank 0's record is
compared.

It needs Debian's python3-torch (1.13, /usr/bin/python3) with torch.distributed and Gloo; without
them it exits 77 (CTest: skipped). Standard library + torch only. Two worker processes of this same
script are started with subprocess on a free local port; no torchrun.

Run by hand (from the repository root):
  /usr/bin/python3 tests/real_ddp/ddp_vs_plan.py --petrsim build/petrsim            # the 17 CI cases
  /usr/bin/python3 tests/real_ddp/ddp_vs_plan.py --petrsim build/petrsim --seed 1003 \
      --broadcast-buffers 1 --find-unused 1 --batchnorm 1 --frozen 1 --nonpersistent 1 \
      --bucket-cap-mb 0.592 --iterations 4      # one case: the rerun line a failure prints
  /usr/bin/python3 tests/real_ddp/ddp_vs_plan.py --petrsim build/petrsim --random 50 --keep
      # 50 more random cases; --keep leaves the scenarios and records in the temp dir
A failing case prints its seed and flags, the rerun command, the temp dir holding its scenario
(scenario.pbtxt), the real record (record.json) and petrsim's plan (plan.json), and a side-by-side
view around the first differences. Exit status: 0 all equal, 1 a difference or an error, 77 no
torch.distributed/Gloo.
"""

import argparse
import json
import math
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
WORLD_SIZE = 2
BATCH = 4  # rows per rank and iteration (BatchNorm1d needs more than one)

# The CI cases: every flag both ways, twice; models with BatchNorm and a non-persistent buffer,
# with only one of them, with no buffer at all. Each entry is (seed, forced spec fields); what is
# not forced is drawn from the seed. The seeds were chosen so that, between them, the run has
# rebuilt layouts with several gradient buckets (find_unused_parameters=False) and iteration-0
# layouts with several buckets (True); main() checks that this coverage is still there.
CI_CASES = [
    (1001, dict(broadcast_buffers=True, find_unused=False, batchnorm=True, nonpersistent=True)),
    (1002, dict(broadcast_buffers=False, find_unused=False, batchnorm=True, frozen=True)),
    (1003, dict(broadcast_buffers=True, find_unused=True, batchnorm=True, nonpersistent=True,
                frozen=True)),
    (1004, dict(broadcast_buffers=False, find_unused=True, nonpersistent=True)),
    (1005, dict(broadcast_buffers=True, find_unused=False, batchnorm=False, nonpersistent=False)),
    (1006, dict(broadcast_buffers=False, find_unused=False, nonpersistent=True)),
    (1007, dict(broadcast_buffers=True, find_unused=True, batchnorm=False, nonpersistent=True)),
    (1008, dict(broadcast_buffers=False, find_unused=True, frozen=True)),
    # The families whose gradient-ready order is not the reverse of registration (apply_family).
    (1101, dict(family="shuffled", find_unused=False, bucket_cap_mb=0.3)),
    (1102, dict(family="shuffled", find_unused=True, batchnorm=True)),
    (1103, dict(family="shared", find_unused=False, bucket_cap_mb=0.3)),
    (1104, dict(family="branch", broadcast_buffers=True, batchnorm=True)),
    (1109, dict(family="tied", find_unused=False, bucket_cap_mb=0.3)),
    (1114, dict(family="mixed", find_unused=False, broadcast_buffers=False, batchnorm=True,
                bucket_cap_mb=0.2)),
    (1106, dict(family="mixed", find_unused=True, batchnorm=True)),
    (1107, dict(family="frozen_stages", find_unused=False, broadcast_buffers=True, bucket_cap_mb=0.3)),
    (1108, dict(family="shuffled", find_unused=False, no_forward_collectives=True,
                bucket_cap_mb=0.3)),
]


# ------------------------------------------------------------------------------------------------
# The model spec: pure Python, drawn from the seed (no torch needed here).

def draw_width(rng):
    # Sizes such that models range from a few KiB to ~10 MiB: gradient layouts get several buckets
    # only beyond DDP's 1 MiB first bucket.
    kind = rng.random()
    if kind < 0.3:
        return rng.randint(4, 64)
    if kind < 0.6:
        return rng.randint(65, 400)
    return rng.randint(401, 1024)


def make_spec(seed, forced):
    """The job a case runs: layers, buffers, forward all_reduces, DDP flags."""
    rng = random.Random(seed)
    n_linear = rng.randint(2, 8)
    dims = [draw_width(rng) for _ in range(n_linear + 1)]
    layers = []  # dicts: type linear (in/out_features, bias), batchnorm (features) or relu
    for i in range(n_linear):
        layers.append(dict(type="linear", in_features=dims[i], out_features=dims[i + 1],
                           bias=rng.random() < 0.7))
        if rng.random() < 0.3:
            layers.append(dict(type="batchnorm", features=dims[i + 1]))
        if i + 1 < n_linear and rng.random() < 0.5:
            layers.append(dict(type="relu"))
    want_bn = forced.get("batchnorm", rng.random() < 0.4)
    has_bn = any(l["type"] == "batchnorm" for l in layers)
    if want_bn and not has_bn:
        # after a random linear layer
        linear_at = [i for i, l in enumerate(layers) if l["type"] == "linear"]
        at = rng.choice(linear_at)
        layers.insert(at + 1, dict(type="batchnorm", features=layers[at]["out_features"]))
    elif not want_bn and has_bn:
        layers = [l for l in layers if l["type"] != "batchnorm"]
    # One frozen Linear (its parameters requires_grad False); never the only trainable layer.
    frozen = forced.get("frozen", rng.random() < 0.35)
    linear_at = [i for i, l in enumerate(layers) if l["type"] == "linear"]
    if frozen:
        layers[rng.choice(linear_at)]["frozen"] = True
    # A non-persistent buffer on one module with state (not in state_dict, but in named_buffers).
    nonpersistent = forced.get("nonpersistent", rng.random() < 0.4)
    if nonpersistent:
        hosts = [i for i, l in enumerate(layers) if l["type"] != "relu"]
        host = rng.choice(hosts)
        layers[host]["scratch"] = dict(numel=rng.randint(1, 300),
                                       dtype=rng.choice(["float32", "float64"]))
    # Forward collectives: scalar all_reduces after some layers (before the first is allowed too).
    n_fwd = rng.randint(1, 3)
    probes = sorted(rng.randint(0, len(layers)) for _ in range(n_fwd))
    broadcast_buffers = forced.get("broadcast_buffers", rng.random() < 0.5)
    find_unused = forced.get("find_unused", rng.random() < 0.5)
    cap = forced.get("bucket_cap_mb")
    if cap is None:
        cap = round(10 ** rng.uniform(math.log10(0.01), math.log10(2.0)), 3)
    spec = dict(seed=seed, layers=layers, probes=probes, broadcast_buffers=bool(broadcast_buffers),
                find_unused=bool(find_unused), bucket_cap_mb=cap, family="plain",
                registration=list(range(len(layers))),
                # what the rerun command forces to get this same spec again
                base=dict(broadcast_buffers=int(broadcast_buffers), find_unused=int(find_unused),
                          batchnorm=int(bool(want_bn)), frozen=int(bool(frozen)),
                          nonpersistent=int(bool(nonpersistent))))
    # The families draw after everything above, so a plain case is the job it always was.
    family = forced.get("family", "plain")
    if family != "plain":
        apply_family(spec, family, rng)
    if forced.get("no_forward_collectives"):
        spec["probes"] = []  # DDP is the only source of collectives
    return spec


FAMILIES = ("plain", "shuffled", "shared", "tied", "branch", "mixed", "frozen_stages")


def apply_family(spec, family, rng):
    """Turns a plain chain into one of the families whose gradient-ready order is not the reverse
    of registration (every family but plain registers its modules in a shuffled order):
    shuffled  -- only that;
    shared    -- a square Linear S used twice with another one T between (S, ReLU, T, S): S's
                 gradient is ready only after its first use's backward, i.e. after T's;
    tied      -- two square Linear modules A and B (A, ReLU, B) where B's weight IS A's (tied
                 weights): one parameter under two state_dict keys (state_dict_aliases), ready
                 at A's use;
    branch    -- a square Linear used only on even iterations (find_unused_parameters=True, which
                 DDP needs for it);
    mixed     -- some Linear layers (and the BatchNorm after them) in float64, the rest float32:
                 two gradient dtypes, each with its own buckets;
    frozen_stages -- the first k Linear layers frozen and every BatchNorm's affine frozen and in
                 eval mode, as mmdet's frozen_stages, norm_cfg requires_grad=False and norm_eval.
    """
    if family not in FAMILIES:
        raise ValueError("unknown family {!r} (one of {})".format(family, ", ".join(FAMILIES)))
    layers = spec["layers"]
    spec["family"] = family
    linear_at = [i for i, l in enumerate(layers) if l["type"] == "linear"]

    def insert(at, new_layers):
        layers[at:at] = new_layers
        spec["probes"] = [p + len(new_layers) if p > at else p for p in spec["probes"]]

    if family == "shared":
        at = rng.choice(linear_at)
        d = layers[at]["out_features"]
        insert(at + 1, [dict(type="linear", in_features=d, out_features=d, bias=True),
                        dict(type="relu"),
                        dict(type="linear", in_features=d, out_features=d, bias=rng.random() < 0.5),
                        dict(type="reuse", of=at + 1)])
    elif family == "tied":
        at = rng.choice(linear_at)
        d = layers[at]["out_features"]
        insert(at + 1, [dict(type="linear", in_features=d, out_features=d, bias=True),
                        dict(type="relu"),
                        dict(type="linear", in_features=d, out_features=d, bias=True,
                             tied_to=at + 1)])
    elif family == "branch":
        at = rng.choice(linear_at)
        d = layers[at]["out_features"]
        insert(at + 1, [dict(type="linear", in_features=d, out_features=d, bias=True, branch=True)])
        spec["find_unused"] = True
    elif family == "mixed":
        chosen = rng.sample(linear_at, max(1, len(linear_at) // 2))
        for i in chosen:
            layers[i]["dtype"] = "float64"
            if i + 1 < len(layers) and layers[i + 1]["type"] == "batchnorm":
                layers[i + 1]["dtype"] = "float64"
    elif family == "frozen_stages":
        k = rng.randint(1, max(1, len(linear_at) - 1))
        for i in linear_at[:k]:
            layers[i]["frozen"] = True
        if not any(l["type"] == "batchnorm" for l in layers):
            at = rng.choice(linear_at)
            layers.insert(at + 1, dict(type="batchnorm", features=layers[at]["out_features"]))
            spec["probes"] = [p + 1 if p > at + 1 else p for p in spec["probes"]]
            for l in layers:
                if l["type"] == "reuse" and l["of"] > at:
                    l["of"] += 1
        for l in layers:
            if l["type"] == "batchnorm":
                l["frozen"] = l["norm_eval"] = True
        if not any(l["type"] == "linear" and not l.get("frozen") for l in layers):
            raise ValueError("frozen_stages left no trainable layer")
    registered = [i for i, l in enumerate(layers) if l["type"] != "reuse"]
    rng.shuffle(registered)
    spec["registration"] = registered


def parameter_keys(spec, i):
    """The parameters of layer i in registration order, as (owner layer index, name): a tied
    weight is its owner's."""
    layer = spec["layers"][i]
    if layer["type"] == "linear":
        keys = [(layer.get("tied_to", i), "weight")]
        return keys + [(i, "bias")] if layer["bias"] else keys
    if layer["type"] == "batchnorm":
        return [(i, "weight"), (i, "bias")]
    return []


def trainable_parameters(spec):
    """(layer index, parameter name) of every parameter that requires grad, in named_parameters()
    order: modules in registration order, each's weight then bias, a parameter met again (tied)
    not again."""
    out = []
    for i in spec["registration"]:
        if spec["layers"][i].get("frozen"):
            continue
        out += [key for key in parameter_keys(spec, i) if key not in out]
    return out


def ready_order(spec):
    """The gradient-ready order of iteration 0 as a user states it from the forward: modules by
    their FIRST use in the forward, last first (a module used twice gets its gradient once both
    uses' backwards ran); inside a Linear the bias before the weight (addmm's backward hands the
    bias its gradient first, the weight's goes through the transpose), inside a BatchNorm the
    weight before the bias. As positions in trainable_parameters(spec). The worker checks it
    against the order the real backward showed."""
    first_use = {}
    for position, layer in enumerate(spec["layers"]):
        index = layer["of"] if layer["type"] == "reuse" else position
        first_use.setdefault(index, position)
    positions = {key: k for k, key in enumerate(trainable_parameters(spec))}
    # A tied parameter belongs to every module that holds it: it is ready at the first use of any.
    holders = {}
    for index in first_use:
        for key in parameter_keys(spec, index):
            holders.setdefault(key, []).append(index)
    order = []
    for index in sorted(first_use, key=lambda i: -first_use[i]):
        keys = parameter_keys(spec, index)
        if spec["layers"][index]["type"] == "linear":
            keys = keys[::-1]  # the bias before the weight
        order += [positions[key] for key in keys
                  if key in positions and min(holders[key], key=first_use.get) == index]
    return order


def describe(spec):
    layers = spec["layers"]
    linears = [l for l in layers if l["type"] == "linear"]
    params = sum((0 if "tied_to" in l else l["in_features"] * l["out_features"])
                 + (l["out_features"] if l["bias"] else 0) for l in linears)
    return ("family={} broadcast_buffers={} find_unused_parameters={} bucket_cap_mb={} linear={} "
            "batchnorm={} frozen={} nonpersistent={} forward_all_reduces={} "
            "linear_params={:.2f} MiB"
            .format(spec["family"], int(spec["broadcast_buffers"]), int(spec["find_unused"]),
                    spec["bucket_cap_mb"],
                    len(linears), sum(l["type"] == "batchnorm" for l in layers),
                    int(any(l.get("frozen") for l in layers)),
                    int(any("scratch" in l for l in layers)), len(spec["probes"]),
                    params * 4 / 2**20))


def rerun_command(spec, iterations):
    """The command that runs this case alone (every forced field given, so the same spec)."""
    base = spec["base"]
    return ("/usr/bin/python3 tests/real_ddp/ddp_vs_plan.py --petrsim build/petrsim --seed {} "
            "--broadcast-buffers {} --find-unused {} --batchnorm {} --frozen {} --nonpersistent {} "
            "--bucket-cap-mb {} --family {}{} --iterations {}".format(
                spec["seed"], base["broadcast_buffers"], base["find_unused"], base["batchnorm"],
                base["frozen"], base["nonpersistent"], spec["bucket_cap_mb"], spec["family"],
                " --no-forward-collectives" if not spec["probes"] else "", iterations))


# ------------------------------------------------------------------------------------------------
# The worker: one rank of the real job (imports torch).

def worker(args):
    try:
        import torch
        import torch.distributed as dist
        import torch.nn as nn
    except Exception as e:  # noqa: BLE001 - any import failure means: no torch here
        print("ddp_vs_plan: SKIP: cannot import torch ({}: {})".format(type(e).__name__, e),
              file=sys.stderr)
        return SKIP
    if not dist.is_available() or not dist.is_gloo_available():
        print("ddp_vs_plan: SKIP: torch {} has no torch.distributed or no Gloo".format(
            torch.__version__), file=sys.stderr)
        return SKIP
    if not hasattr(dist.ProcessGroup, "_get_sequence_number_for_group"):
        print("ddp_vs_plan: SKIP: torch {} cannot report c10d sequence numbers".format(
            torch.__version__), file=sys.stderr)
        return SKIP
    import datetime

    torch.set_num_threads(1)
    rank = args.worker
    with open(args.cases) as f:
        payload = json.load(f)
    specs, iterations = payload["specs"], payload["iterations"]
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:{}".format(args.port), rank=rank,
                            world_size=WORLD_SIZE, timeout=datetime.timedelta(seconds=60))

    dtype_names = {torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
                   torch.bfloat16: "bfloat16", torch.int32: "int32", torch.int64: "int64",
                   torch.uint8: "uint8"}

    class Recorder(dist.ProcessGroup):
        """Logs every collective the wrapped Gloo group gets, with its sequence number."""

        def __init__(self, inner):
            super().__init__(inner.rank(), inner.size())
            self.inner = inner
            self.base = inner._get_sequence_number_for_group()
            self.log = []
            self.phase = "?"

        def getBackendName(self):
            return "recording_gloo"

        def _record(self, op, tensors):
            dtypes = {dtype_names.get(t.dtype, str(t.dtype)) for t in tensors}
            self.log.append(dict(
                seq=self.inner._get_sequence_number_for_group() - self.base, op=op,
                numel=sum(t.numel() for t in tensors),
                dtype=dtypes.pop() if len(dtypes) == 1 else "mixed:" + ",".join(sorted(dtypes)),
                tensors=len(tensors), phase=self.phase))

        def allreduce(self, tensors, opts=None):
            work = self.inner.allreduce(tensors, opts or dist.AllreduceOptions())
            self._record("ALLREDUCE", tensors)
            return work

        def broadcast(self, tensors, opts=None):
            work = self.inner.broadcast(tensors, opts or dist.BroadcastOptions())
            self._record("BROADCAST", tensors)
            return work

        def allgather(self, outputs, inputs, opts=None):
            work = self.inner.allgather(outputs, inputs, opts or dist.AllgatherOptions())
            self._record("ALLGATHER", inputs)
            return work

        def barrier(self, opts=None):
            work = self.inner.barrier(opts or dist.BarrierOptions())
            self._record("BARRIER", [])
            return work

    class ForwardAllReduce(nn.Module):
        """A model step that all_reduces a scalar (like a loss's reduce_mean), on the recorder."""

        def __init__(self, index):
            super().__init__()
            self.index = index
            self.group = None

        def forward(self, x):
            self.group.phase = self.group.phase.split(":")[0] + ": forward all_reduce {}".format(
                self.index)
            value = x.detach().float().mean().reshape(1)
            dist.all_reduce(value, group=self.group)
            return x

    class Chain(nn.Module):
        """The layers registered in spec["registration"] order (then the forward all_reduces, which
        hold no tensors) and run in the spec's order: a "reuse" step runs an earlier layer again,
        a branch layer runs on even iterations only, a float64 layer gets its input cast."""

        def __init__(self, spec, layer_modules, steps, probes):
            super().__init__()
            for i in spec["registration"]:
                self.add_module("layer{}".format(i), layer_modules[i])
            for k, probe in enumerate(probes):
                self.add_module("allreduce{}".format(k), probe)
            self.steps = steps  # (module, layer dict or None), in the order the forward runs them
            self.iteration = 0

        def forward(self, x):
            for module, layer in self.steps:
                if layer is not None:
                    if layer.get("branch") and self.iteration % 2 == 1:
                        continue
                    if layer["type"] in ("linear", "batchnorm"):
                        x = x.to(getattr(torch, layer.get("dtype", "float32")))
                x = module(x)
            return x

    def build(spec):
        torch.manual_seed(spec["seed"])
        layer_modules = {}
        for i, layer in enumerate(spec["layers"]):
            dtype = getattr(torch, layer.get("dtype", "float32"))
            if layer["type"] == "linear":
                m = nn.Linear(layer["in_features"], layer["out_features"], bias=layer["bias"])
            elif layer["type"] == "batchnorm":
                m = nn.BatchNorm1d(layer["features"])
            elif layer["type"] == "relu":
                m = nn.ReLU()
            else:
                continue  # a reuse step
            m.to(dtype)
            if layer.get("frozen"):
                for p in m.parameters():
                    p.requires_grad_(False)
            if layer.get("norm_eval"):
                m.eval()  # nobody calls train() on the chain again
            if "scratch" in layer:
                m.register_buffer("scratch", torch.zeros(
                    layer["scratch"]["numel"], dtype=getattr(torch, layer["scratch"]["dtype"])),
                    persistent=False)
            layer_modules[i] = m
        for i, layer in enumerate(spec["layers"]):
            if "tied_to" in layer:
                layer_modules[i].weight = layer_modules[layer["tied_to"]].weight
        steps, probes = [], []
        for i in range(len(spec["layers"]) + 1):
            for _ in range(spec["probes"].count(i)):
                probes.append(ForwardAllReduce(len(probes)))
                steps.append((probes[-1], None))
            if i == len(spec["layers"]):
                break
            layer = spec["layers"][i]
            if layer["type"] == "reuse":
                steps.append((layer_modules[layer["of"]], spec["layers"][layer["of"]]))
            else:
                steps.append((layer_modules[i], layer))
        return Chain(spec, layer_modules, steps, probes), probes

    def tensor_list(model):
        """The module's tensors in state_dict() order, non-persistent buffers at their place."""
        out = []
        first = {}  # id of a parameter -> its entry (a tied one is listed once, with aliases)
        alias_keys = []
        for mname, module in model.named_modules():
            prefix = mname + "." if mname else ""
            for pname, p in module.named_parameters(recurse=False):
                if id(p) in first:
                    first[id(p)]["state_dict_aliases"] += 1
                    alias_keys.append(prefix + pname)
                    continue
                first[id(p)] = dict(name=prefix + pname, kind="parameter", shape=list(p.shape),
                                    dtype=dtype_names[p.dtype], requires_grad=p.requires_grad,
                                    persistent=True, state_dict_aliases=0)
                out.append(first[id(p)])
            for bname, b in module.named_buffers(recurse=False):
                out.append(dict(name=prefix + bname, kind="buffer", shape=list(b.shape),
                                dtype=dtype_names[b.dtype], requires_grad=False,
                                persistent=bname not in module._non_persistent_buffers_set))
        keys = [t["name"] for t in out if t["persistent"]]
        state_keys = list(model.state_dict().keys())
        if keys != [k for k in state_keys if k not in alias_keys]:
            raise RuntimeError("tensor order differs from state_dict(): {} vs {}".format(
                keys, state_keys))
        return out

    for index, spec in enumerate(specs):
        group = dist.new_group(backend="gloo")
        recorder = Recorder(group)
        model, probes = build(spec)
        for probe in probes:
            probe.group = recorder
        tensors = tensor_list(model)
        recorder.phase = "construction"
        ddp = nn.parallel.DistributedDataParallel(
            model, process_group=recorder, broadcast_buffers=spec["broadcast_buffers"],
            find_unused_parameters=spec["find_unused"], bucket_cap_mb=spec["bucket_cap_mb"])
        optimizer = torch.optim.SGD([p for p in ddp.parameters() if p.requires_grad], lr=1e-3)
        data = torch.Generator().manual_seed(spec["seed"] * 16 + rank)
        in_features = spec["layers"][0]["in_features"]
        # The order the gradients become ready in iteration 0 (what DDP rebuilds by): a hook on
        # each parameter that requires grad, in named_parameters() order.
        trainable = [p for p in model.parameters() if p.requires_grad]
        ready = []
        handles = [p.register_hook(lambda grad, k=k: ready.append(k)) for k, p in enumerate(trainable)]
        for it in range(iterations):
            x = torch.randn(BATCH, in_features, generator=data)
            model.iteration = it
            recorder.phase = "iteration {}: DDP pre-forward".format(it)
            out = ddp(x)
            loss = out.float().pow(2).mean()
            recorder.phase = "iteration {}: backward".format(it)
            loss.backward()
            for handle in handles:
                handle.remove()
            handles = []
            recorder.phase = "iteration {}: optimizer".format(it)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        recorder.phase = "after the last iteration"
        del ddp
        if rank == 0:
            with open(os.path.join(args.out, "case{}.json".format(index)), "w") as f:
                json.dump(dict(seed=spec["seed"], tensors=tensors, record=recorder.log,
                               ready_order=ready, torch_version=torch.__version__), f, indent=1)
    dist.barrier()
    dist.destroy_process_group()
    return 0


# ------------------------------------------------------------------------------------------------
# The driver: draws the cases, runs the two ranks, writes the scenarios, compares.

def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(specs, iterations, work_dir, timeout_s):
    """Runs all cases on 2 ranks. Returns (status, message): status 0 ok, 77 skip, 1 failure."""
    cases_path = os.path.join(work_dir, "cases.json")
    with open(cases_path, "w") as f:
        json.dump(dict(specs=specs, iterations=iterations), f)
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    if "GLOO_SOCKET_IFNAME" not in env and os.path.exists("/sys/class/net/lo"):
        env["GLOO_SOCKET_IFNAME"] = "lo"
    for attempt in range(3):
        port = free_port()
        procs = []
        for rank in range(WORLD_SIZE):
            log = open(os.path.join(work_dir, "rank{}.log".format(rank)), "w+")
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", str(rank), "--cases",
                   cases_path, "--out", work_dir, "--port", str(port)]
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
            procs.append((proc, log))
        deadline = time.monotonic() + timeout_s
        failed = None
        while True:
            codes = [p.poll() for p, _ in procs]
            if all(c is not None for c in codes):
                break
            bad = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
            if bad or time.monotonic() > deadline:
                failed = bad or [(None, "timeout after {} s".format(timeout_s))]
                for p, _ in procs:
                    if p.poll() is None:
                        p.kill()
                for p, _ in procs:
                    p.wait()
                break
            time.sleep(0.05)
        logs = []
        for rank, (p, log) in enumerate(procs):
            log.seek(0)
            logs.append(log.read())
            log.close()
        codes = [p.returncode for p, _ in procs]
        if failed is None and all(c == 0 for c in codes):
            return 0, ""
        if any(c == SKIP for c in codes):
            lines = [line for text in logs for line in text.splitlines() if "SKIP: " in line]
            return SKIP, lines[0].split("SKIP: ", 1)[1] if lines else ""
        if any("Address already in use" in l or "EADDRINUSE" in l for l in logs) and attempt < 2:
            continue
        message = "the real job failed ({}; exit codes {})\n".format(failed, codes)
        for rank, text in enumerate(logs):
            message += "---- rank {} output (last 3000 characters) ----\n{}\n".format(
                rank, text[-3000:])
        return 1, message
    return 1, "no free port after 3 tries"


SCENARIO_HEAD = """\
# Written by tests/real_ddp/ddp_vs_plan.py: the job that the real DDP run of seed {seed} did.
# {desc}
name: "ddp_vs_plan_seed_{seed}"
dataset {{
  subdatasets {{
    name: "d"
    explicit {{ scenes {{ gt_counts: [1, 1, 1, 1] }} scenes {{ gt_counts: [1, 1, 1, 1] }} }}
  }}
}}
comm {{ backend: gloo torch_version: "{torch}" }}
job {{ world_size: {world} samples_per_gpu: 1 workers_per_gpu: 0 iterations: {iterations} }}
plan {{
  custom {{
"""


def scenario_text(spec, tensors, iterations, torch_version):
    text = SCENARIO_HEAD.format(seed=spec["seed"], desc=describe(spec), torch=torch_version,
                                world=WORLD_SIZE, iterations=iterations)
    for k in range(len(spec["probes"])):
        text += ('    per_iteration {{ name: "forward all_reduce {}" op: allreduce numel: 1 '
                 'dtype: float32 }}\n'.format(k))
    text += "  }\n  ddp {\n"
    for t in tensors:
        line = '    tensors {{ name: "{}" kind: {}'.format(t["name"], t["kind"])
        if t["shape"]:
            line += " shape: [{}]".format(", ".join(str(s) for s in t["shape"]))
        line += " dtype: {}".format(t["dtype"])
        if t["kind"] == "parameter" and not t["requires_grad"]:
            line += " requires_grad: false"
        if t["kind"] == "buffer" and not t["persistent"]:
            line += " persistent: false"
        if t.get("state_dict_aliases"):
            line += " state_dict_aliases: {}".format(t["state_dict_aliases"])
        text += line + " }\n"
    order = ready_order(spec)
    if order != list(reversed(range(len(order)))):
        # Stated as a user would, from the forward (ready_order); the default is the reverse.
        text += "    grad_ready_order: [{}]\n".format(", ".join(str(k) for k in order))
    text += "    bucket_cap_mb: {}\n".format(spec["bucket_cap_mb"])
    text += "    broadcast_buffers: {}\n".format("true" if spec["broadcast_buffers"] else "false")
    text += "    find_unused_parameters: {}\n".format("true" if spec["find_unused"] else "false")
    text += "  }\n}\n"
    return text


def fmt_real(c):
    return "{:>4} {:<9} {:>9} {:<8} {}".format(c["seq"], c["op"], c["numel"], c["dtype"],
                                                c["phase"])


def fmt_plan(c):
    it = "startup" if c.get("section") == "startup" else "it {}".format(c.get("iteration"))
    return "{:>4} {:<9} {:>9} {:<8} {} | {}".format(c["seq"], c["op"], c["numel"], c["dtype"], it,
                                                    c.get("step", ""))


KEYS = ("seq", "op", "numel", "dtype")


def compare(real, plan):
    """Returns a list of lines describing the differences (empty when equal)."""
    n = max(len(real), len(plan))
    differ = [i for i in range(n)
              if i >= len(real) or i >= len(plan)
              or any(real[i][k] != plan[i][k] for k in KEYS)]
    if not differ and len(real) == len(plan):
        return []
    lines = ["{} collectives in the real run, {} in petrsim's plan; {} position(s) differ, the "
             "first at index {}".format(len(real), len(plan), len(differ), differ[0])]
    width = 70
    lines.append("      {:<{w}}   {}".format("real DDP (rank 0): seq op numel dtype phase",
                                           "petrsim plan: seq op numel dtype iteration | step",
                                           w=width))
    shown = set()
    for first in differ[:3]:
        for i in range(max(0, first - 3), min(n, first + 6)):
            if i in shown:
                continue
            if shown and i - 1 not in shown:
                lines.append("      ...")
            shown.add(i)
            left = fmt_real(real[i]) if i < len(real) else "(none)"
            right = fmt_plan(plan[i]) if i < len(plan) else "(none)"
            mark = "!" if i in differ else " "
            lines.append("{} {:>3}  {:<{w}.{w}}   {}".format(mark, i, left, right, w=width))
    return lines


def gradient_buckets(record, iteration):
    """Gradient bucket allreduces of one iteration's backward (the int32 used map left out)."""
    return sum(1 for c in record if c["phase"] == "iteration {}: backward".format(iteration)
               and c["op"] == "ALLREDUCE" and c["dtype"] != "int32")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--petrsim", help="the petrsim executable (build/petrsim)")
    parser.add_argument("--seed", type=int, help="run only this seed (flags drawn unless forced)")
    parser.add_argument("--broadcast-buffers", type=int, choices=[0, 1])
    parser.add_argument("--find-unused", type=int, choices=[0, 1])
    parser.add_argument("--batchnorm", type=int, choices=[0, 1],
                        help="with --seed: BatchNorm1d or not")
    parser.add_argument("--frozen", type=int, choices=[0, 1],
                        help="with --seed: a frozen layer or not")
    parser.add_argument("--nonpersistent", type=int, choices=[0, 1],
                        help="with --seed: a non-persistent buffer or not")
    parser.add_argument("--bucket-cap-mb", type=float)
    parser.add_argument("--family", choices=FAMILIES,
                        help="with --seed: the model family (default plain)")
    parser.add_argument("--no-forward-collectives", action="store_true",
                        help="with --seed: no all_reduce in the forward (DDP's are the only ones)")
    parser.add_argument("--random", type=int, default=0, metavar="N",
                        help="also run N cases with random seeds (everything drawn)")
    parser.add_argument("--iterations", type=int, default=4, help="iterations (>= 3; default 4)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir even when all pass")
    parser.add_argument("--timeout", type=float, default=240, help="seconds for the real job")
    # internal: one rank of the real job
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cases", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        return worker(args)
    if not args.petrsim:
        parser.error("--petrsim PATH is required")
    if args.iterations < 3:
        parser.error("--iterations must be >= 3")
    petrsim = os.path.abspath(args.petrsim)
    if not os.access(petrsim, os.X_OK):
        parser.error("--petrsim {}: not an executable file".format(args.petrsim))

    forced = {}
    if args.broadcast_buffers is not None:
        forced["broadcast_buffers"] = bool(args.broadcast_buffers)
    if args.find_unused is not None:
        forced["find_unused"] = bool(args.find_unused)
    for name in ("batchnorm", "frozen", "nonpersistent"):
        if getattr(args, name) is not None:
            forced[name] = bool(getattr(args, name))
    if args.bucket_cap_mb is not None:
        forced["bucket_cap_mb"] = args.bucket_cap_mb
    if args.family is not None:
        forced["family"] = args.family
    if args.no_forward_collectives:
        forced["no_forward_collectives"] = True
    if args.seed is not None:
        cases = [(args.seed, forced)]
    elif forced:
        parser.error("--broadcast-buffers, --find-unused, --batchnorm, --frozen, --nonpersistent, "
                     "--bucket-cap-mb, --family and --no-forward-collectives need --seed")
    else:
        cases = list(CI_CASES)
    ci_run = args.seed is None
    rng = random.SystemRandom()
    cases += [(rng.randrange(1, 2**31), dict(family=rng.choice(FAMILIES)))
              for _ in range(args.random)]
    specs = [make_spec(seed, f) for seed, f in cases]

    work_dir = tempfile.mkdtemp(prefix="ddp_vs_plan.")
    start = time.monotonic()
    status, message = run_ranks(specs, args.iterations, work_dir, args.timeout)
    if status == SKIP:
        print("ddp_vs_plan: skipped: {}".format(message or "no torch.distributed with Gloo"))
        shutil.rmtree(work_dir, ignore_errors=True)
        return SKIP
    if status != 0:
        print("ddp_vs_plan: FAILED: " + message)
        print("ddp_vs_plan: work dir kept: {}".format(work_dir))
        return 1
    real_s = time.monotonic() - start

    failures = 0  # cases that differ
    coverage = dict(rebuilt_multi=False, first_multi=False, out_of_order=False, mixed=False,
                    ddp_only=False)
    for index, spec in enumerate(specs):
        with open(os.path.join(work_dir, "case{}.json".format(index))) as f:
            case = json.load(f)
        case_dir = os.path.join(work_dir, "seed{}".format(spec["seed"]))
        os.makedirs(case_dir, exist_ok=True)
        torch_version = ".".join(case["torch_version"].split(".")[:2])
        scenario = os.path.join(case_dir, "scenario.pbtxt")
        with open(scenario, "w") as f:
            f.write(scenario_text(spec, case["tensors"], args.iterations, torch_version))
        with open(os.path.join(case_dir, "record.json"), "w") as f:
            json.dump(case["record"], f, indent=1)
        record = case["record"]
        order = ready_order(spec)
        if spec["find_unused"]:
            coverage["first_multi"] |= gradient_buckets(record, 0) >= 2
        else:
            rebuilt = gradient_buckets(record, 2)
            coverage["rebuilt_multi"] |= rebuilt >= 2
            coverage["out_of_order"] |= rebuilt >= 2 and order != list(reversed(range(len(order))))
            dtypes = {c["dtype"] for c in record if c["phase"] == "iteration 2: backward"}
            coverage["mixed"] |= rebuilt >= 3 and {"float32", "float64"} <= dtypes
        coverage["ddp_only"] |= not spec["probes"]
        head = "seed {} ({})".format(spec["seed"], describe(spec))
        if case["ready_order"] != order:
            # The scenario states the order from the forward; if that rule is wrong, the plan's
            # comparison below would test the wrong input.
            failures += 1
            print("FAIL {}".format(head))
            print("     rerun: {}".format(rerun_command(spec, args.iterations)))
            print("     the gradient-ready order stated from the forward (ready_order) is not the "
                  "one the real backward showed:")
            print("     stated: {}".format(order))
            print("     real:   {}".format(case["ready_order"]))
            continue
        proc = subprocess.run([petrsim, "plan", scenario, "--iterations", str(args.iterations),
                               "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True)
        problem = None
        if proc.returncode != 0:
            problem = ["petrsim plan exited {}: {}".format(proc.returncode, proc.stderr.strip())]
        else:
            with open(os.path.join(case_dir, "plan.json"), "w") as f:
                f.write(proc.stdout)
            try:
                plan = json.loads(proc.stdout)["collectives"]
            except (ValueError, KeyError) as e:
                problem = ["petrsim plan printed no readable JSON ({})".format(e)]
            else:
                problem = compare(record, plan) or None
        if problem is None:
            print("ok   {}: {} collectives equal (buckets per backward: {})".format(
                head, len(record),
                ",".join(str(gradient_buckets(record, i)) for i in range(args.iterations))))
            continue
        failures += 1
        print("FAIL {}".format(head))
        print("     rerun: {}".format(rerun_command(spec, args.iterations)))
        print("     files: {}/{{scenario.pbtxt,record.json,plan.json}}".format(case_dir))
        for line in problem:
            print("     " + line)
    coverage_failed = False
    if ci_run and not failures:
        missing = [k for k, v in coverage.items() if not v]
        if missing:
            coverage_failed = True
            print("FAIL coverage: no case had {} (the generator or the CI seeds changed)".format(
                " and no case had ".join({
                    "rebuilt_multi": "several gradient buckets after the rebuild",
                    "first_multi": "several gradient buckets in iteration 0 "
                                   "(find_unused_parameters)",
                    "out_of_order": "several rebuilt buckets of a model whose gradient-ready "
                                    "order is not the reverse of registration",
                    "mixed": "three or more rebuilt buckets of float32 and float64 gradients",
                    "ddp_only": "a plan whose only collectives are DDP's"}[k] for k in missing)))
    total_s = time.monotonic() - start
    print("ddp_vs_plan: {} of {} case(s) equal; real job {:.1f} s, total {:.1f} s".format(
        len(specs) - failures, len(specs), real_s, total_s))
    if failures or coverage_failed or args.keep:
        print("ddp_vs_plan: work dir kept: {}".format(work_dir))
    else:
        shutil.rmtree(work_dir, ignore_errors=True)
    return 1 if failures or coverage_failed else 0


if __name__ == "__main__":
    sys.exit(main())
