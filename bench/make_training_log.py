#!/usr/bin/env python3
"""Writes a large combined training log of an 8-rank job that hangs, for bench/diagnose_log.sh.

The shape is torchrun --tee's (every line `[default<r>]:`), PyTorch 2.4 (`[rank<r>]:` on c10d's lines), mmengine's
iteration lines from rank 0 every 50 iterations, per-rank print lines in between (most of the bytes), and at the end the
watchdog lines of ranks 0-6 (rank 7 never reaches the collective).
Usage: make_training_log.py OUT BYTES
"""
import sys

out_path, want = sys.argv[1], int(sys.argv[2])
world, interval = 8, 50
noise = ("[default{r}]:/usr/lib/python3/dist-packages/torch/functional.py:504: UserWarning: torch.meshgrid: in an "
         "upcoming release, it will be required to pass the indexing argument. (Triggered internally at "
         "../aten/src/ATen/native/TensorShape.cpp:3483.)\n"
         "[default{r}]:rank {r} iteration {i}: sample tokens 3e8750f331d7499e9b5123e9eb70f2e2 "
         "fd8420396768425eabec9bdddf7e64b6, queue 4, prev_exists {p}, memory carried over {m} frames\n")
iter_line = ("[default0]:12/06 18:{mm:02d}:{ss:02d} - mmengine - INFO - Iter(train) [{i:>5}/42192]  "
             "base_lr: 2.0000e-04 lr: 2.0000e-04  eta: 6:23:14  time: 0.5612  data_time: 0.0521  memory: 9133  "
             "grad_norm: 38.1244  loss: 19.4407  frame_0_loss_cls: 2.1450  frame_0_loss_bbox: 1.6322\n")
# The per-rank print lines repeat so that the job stays within its 42192 iterations (hang near iteration 40000).
block_bytes = sum(len(noise.format(r=r, i=20000, p=True, m=1)) for r in range(world))
reps = max(1, -(-want // (40000 * block_bytes)))
written = 0
i = 0
with open(out_path, "w") as f:
    f.write("[default0]:12/06 17:00:00 - mmengine - INFO - \n[default0]:    GPU number: 8\n")
    f.write("[default0]:12/06 17:00:01 - mmengine - INFO - Set random seed to 0, deterministic: False\n")
    while written < want:
        block = []
        for _ in range(reps):
            for r in range(world):
                block.append(noise.format(r=r, i=i, p=i % 2 == 0, m=i % 5))
        if i > 0 and i % interval == 0:
            block.append(iter_line.format(mm=(i // 60) % 60, ss=i % 60, i=i))
        text = "".join(block)
        f.write(text)
        written += len(text)
        i += 1
    seq = 8114 + 51 * (i - 159)  # the seed job's collectives on PyTorch 2.4: 8114 at iteration 159, 51 an iteration
    for r in range(world - 1):
        p = f"[default{r}]:[rank{r}]:[E1206 18:44:12.715298746 "
        work = f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000)"
        f.write(f"{p}ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective operation timeout: {work} "
                f"ran for 1801730 milliseconds before timing out.\n")
        f.write(f"{p}ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank {r}] Exception (either an error or timeout) "
                f"detected by watchdog at work: {seq}, last enqueued NCCL work: {seq}, last completed NCCL work: "
                f"{seq - 1}.\n")
        f.write(f"{p}ProcessGroupNCCL.cpp:1709] [PG 0 (default_pg) Rank {r}] Timeout at NCCL work: {seq}, last "
                f"enqueued NCCL work: {seq}, last completed NCCL work: {seq - 1}.\n")
print(f"{out_path}: {written} bytes, {i} iterations, hang at seq {seq}")
