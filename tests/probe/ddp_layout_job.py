#!/usr/bin/python3
"""One rank of the DDP layout test's job (test_probe_ddp_layout.py starts two, Gloo): the probe
installed by its first line, a model whose modules run in another order than registered (so the
gradient-ready order is not the reverse of registration), a block used twice, a frozen Linear,
a BatchNorm and a non-persistent buffer, a float64 layer, DDP with a small bucket_cap_mb (several
buckets), a scalar all_reduce in the forward, ITERATIONS iterations. GRAD_AS_VIEW 1:
gradient_as_bucket_view=True and gradients zeroed in place (DDP's reducer then divides them in
place from the second backward on); COMM_HOOK: none, builtin_allreduce (DDP's built-in ALLREDUCE)
or fp16 (default_hooks.fp16_compress_hook). Prints "PARAMS <sha256 of the parameters' bytes>".

  ddp_layout_job.py PROBE_DIR TRACE_DIR ITERATIONS FIND_UNUSED BROADCAST_BUFFERS [GRAD_AS_VIEW
      [COMM_HOOK]]
"""

import hashlib
import sys

sys.path.insert(0, sys.argv[1])
import petrsim_probe  # noqa: E402

petrsim_probe.install(sys.argv[2])

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        # Registered in this order, run as stem, shared, middle, shared, wide, head (below).
        self.head = nn.Linear(512, 8)
        self.wide = nn.Linear(384, 512, bias=False)
        self.norm = nn.BatchNorm1d(384)
        self.middle = nn.Linear(384, 384)
        self.shared = nn.Linear(384, 384)
        self.frozen = nn.Linear(384, 384)
        self.stem = nn.Linear(64, 384)
        self.precise = nn.Linear(384, 96).double()
        self.widen = nn.Linear(96, 384)
        for p in self.frozen.parameters():
            p.requires_grad_(False)
        self.register_buffer("scratch", torch.zeros(7, dtype=torch.float64), persistent=False)
        self.register_buffer("steps", torch.zeros(1, dtype=torch.int64))

    def forward(self, x):
        x = torch.relu(self.stem(x))
        x = self.shared(x)
        x = self.frozen(x)
        x = self.middle(x)
        x = self.widen(self.precise(x.double()).float())
        x = self.shared(x)
        value = x.detach().mean().reshape(1)
        dist.all_reduce(value)  # a forward collective (a loss's reduce_mean)
        x = self.norm(x)
        x = self.wide(x)
        return self.head(x)


def main():
    iterations = int(sys.argv[3])
    find_unused = sys.argv[4] == "1"
    broadcast_buffers = sys.argv[5] == "1"
    as_view = len(sys.argv) > 6 and sys.argv[6] == "1"
    comm_hook = sys.argv[7] if len(sys.argv) > 7 else "none"
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = Model()
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.15,
                                              find_unused_parameters=find_unused,
                                              broadcast_buffers=broadcast_buffers,
                                              gradient_as_bucket_view=as_view)
    if comm_hook == "builtin_allreduce":
        ddp._register_builtin_comm_hook(dist.BuiltinCommHookType.ALLREDUCE)
    elif comm_hook == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    optimizer = torch.optim.SGD([p for p in ddp.parameters() if p.requires_grad], lr=1e-3)
    data = torch.Generator().manual_seed(1 + dist.get_rank())
    for it in range(iterations):
        x = torch.randn(4, 64, generator=data)
        loss = ddp(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=not as_view)
    # The gradients agree across ranks (the probe's hook must average as DDP does): the
    # parameters after the steps are the same on every rank, byte for byte; their hash is what
    # the test compares between the probe's two DDP paths.
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().contiguous().numpy().tobytes())
    flat = torch.cat([p.detach().double().reshape(-1) for p in model.parameters()])
    gathered = [torch.zeros_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat)
    if not all(torch.equal(g, flat) for g in gathered):
        print("PARAMETERS DIFFER ACROSS RANKS", flush=True)
        sys.exit(3)
    print("PARAMS {}".format(digest.hexdigest()), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
