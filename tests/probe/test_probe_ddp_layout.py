#!/usr/bin/python3
"""The probe records a real DDP's layout; `petrsim import probe-trace` makes plan.ddp of it; `petrsim
plan` of that scenario lists exactly the collectives the probe recorded -- on both of the probe's
DDP paths.

tests/probe/ddp_layout_job.py, 2 or 3 ranks started directly (Gloo), the probe installed by its
first line: a model whose modules run in another order than registered (one used twice), a frozen
Linear, a float64 layer, a BatchNorm, a non-persistent buffer, DDP with bucket_cap_mb 0.15
(several gradient buckets after the rebuild), a scalar all_reduce in the forward, ITERATIONS
iterations. Each case runs once with PETRSIM_PROBE_DDP_PATH=subclass (DDP on the recording
ProcessGroup, DDP's own reducer dividing the gradients) and once with =hook (DDP on the real
group, the probe's comm hook, construction and rebuild collectives counted by sequence number):
2 ranks as (find_unused_parameters, broadcast_buffers) (0, 1) and (1, 0); 3 ranks (a world size
that is not a power of two, where x * (1/3) and x / 3 differ in the last bit) with
gradient_as_bucket_view off and on (on: the reducer divides in place from the second backward),
with the built-in ALLREDUCE hook, and with default_hooks.fp16_compress_hook. For each run:
- every rank ends with the same parameters, byte for byte, and the sha256 of the hook path's
  parameter bytes is the subclass path's (its hook divides as DDP's reducer does);
- every rank's trace has a ddp_layout at construction (the module's tensors in state_dict
  order, bucket_bytes_cap, the flags), a recorded gradient-ready order that is not the reverse
  of registration, and (find_unused_parameters off) a rebuilt layout of at least 3 buckets;
- `petrsim import probe-trace DIR -o OUT` and `petrsim plan OUT --iterations ITERATIONS --json`:
  every rank's recorded collectives (seq, op, numel, dtype) up to the plan's last sequence
  number are exactly the plan's (DDP's and the forward all_reduce); with fp16_compress_hook,
  instead, the layout records the hook (DdpLayout.comm_hook) and the import says the plan's
  buckets assume DDP's default allreduce;
- `petrsim check OUT` exits 0 and `petrsim OUT --no-wall-time` runs (the imported scenario's
  placeholder dataset feeds every rank's sampler);
- `petrsim diagnose` and `petrsim export` read the trace (the new event kind breaks neither).

  /usr/bin/python3 tests/probe/test_probe_ddp_layout.py --petrsim build/petrsim [--keep]
"""

import json
import os
import sys

import probe_testlib as lib
from probe_testlib import Failure, wire

JOB = os.path.join(lib.HERE, "ddp_layout_job.py")
ITERATIONS = 5


# (world size, find_unused_parameters, broadcast_buffers, gradient_as_bucket_view, comm hook)
CASES = ((2, 0, 1, 0, "none"), (2, 1, 0, 0, "none"), (3, 0, 1, 0, "none"), (3, 0, 1, 1, "none"),
         (3, 0, 1, 0, "builtin_allreduce"), (3, 0, 1, 0, "fp16"))


def run_job(tmp, name, path, world, find_unused, broadcast_buffers, as_view, hook):
    trace_dir = os.path.join(tmp, name)
    results = lib.run_ranks(
        [sys.executable, JOB, lib.PROBE_DIR, trace_dir, str(ITERATIONS), str(find_unused),
         str(broadcast_buffers), str(as_view), hook], world,
        dict(os.environ, PETRSIM_PROBE_DDP_PATH=path), 120, name)
    outputs = [out for _, out in results]
    for rank, (code, out) in enumerate(results):
        if code != 0:
            raise Failure("{}: rank {} exited {}:\n{}".format(name, rank, code, out[-3000:]))
    sums = [line for out in outputs for line in out.splitlines() if line.startswith("PARAMS")]
    if len(sums) != world or len(set(sums)) != 1:
        raise Failure("{}: parameter hashes {}".format(name, sums))
    return trace_dir, sums[0]


def layouts(events):
    return [wire.decode_ddp_layout(e["ddp_layout"]) for e in events if e["kind"] == wire.DDP_LAYOUT]


def check_layouts(name, rank, events, find_unused, broadcast_buffers):
    found = layouts(events)
    built = [l for l in found if l["tensors"]]
    ready = [l for l in found if l["ready_order_recorded"]]
    rebuilt = [l for l in found if l["rebuilt"]]
    where = "{} rank {}".format(name, rank)
    if len(built) != 1:
        raise Failure("{}: {} construction ddp_layout events, expected 1".format(where, len(built)))
    b = built[0]
    names = [t["name"] for t in b["tensors"]]
    want = ["scratch", "steps", "head.weight", "head.bias", "wide.weight", "norm.weight",
            "norm.bias", "norm.running_mean", "norm.running_var", "norm.num_batches_tracked",
            "middle.weight", "middle.bias", "shared.weight", "shared.bias", "frozen.weight",
            "frozen.bias", "stem.weight", "stem.bias", "precise.weight", "precise.bias",
            "widen.weight", "widen.bias"]
    if names != want:
        raise Failure("{}: tensors {}, expected state_dict order {}".format(where, names, want))
    tensors = {t["name"]: t for t in b["tensors"]}
    if tensors["frozen.weight"]["requires_grad"] or not tensors["stem.weight"]["requires_grad"] \
            or tensors["scratch"]["persistent"] or tensors["precise.weight"]["dtype"] != 3 \
            or tensors["wide.weight"]["shape"] != [512, 384]:
        raise Failure("{}: tensor fields wrong: {}".format(where, b["tensors"]))
    if b["bucket_cap_bytes"] != int(0.15 * 1024 * 1024) or \
            b["find_unused_parameters"] != bool(find_unused) or \
            b["broadcast_buffers"] != bool(broadcast_buffers) or b["process_group"] != "default_pg":
        raise Failure("{}: DDP arguments recorded wrong: {}".format(where, {
            k: v for k, v in b.items() if k not in ("tensors", "buckets")}))
    trainable = sum(1 for t in b["tensors"] if t["kind"] == 0 and t["requires_grad"])
    if len(ready) != 1 or sorted(ready[0]["grad_ready_order"]) != list(range(trainable)):
        raise Failure("{}: gradient-ready order {}".format(where, [l["grad_ready_order"]
                                                                   for l in ready]))
    if ready[0]["grad_ready_order"] == list(reversed(range(trainable))):
        raise Failure("{}: the ready order is the reverse of registration: the model does not "
                      "test what it should".format(where))
    if not find_unused and (len(rebuilt) != 1 or len(rebuilt[0]["buckets"]) < 3):
        raise Failure("{}: rebuilt layouts {} (expected one with >= 3 buckets)".format(
            where, rebuilt))
    return ready[0]["grad_ready_order"]


def import_and_run(name, args, trace_dir, hook):
    """The import (its note on a comm hook), `petrsim check` and a simulator run of its scenario."""
    out = trace_dir + ".pbtxt"  # beside the trace directory (diagnose reads every file in it)
    _, printed, _ = lib.petrsim(args, "import", "probe-trace", trace_dir, "-o", out)
    noted = "the plan's gradient buckets assume DDP's default allreduce" in printed
    if noted != (hook == "fp16"):
        raise Failure("{}: the import {} the note on the job's comm hook:\n{}".format(
            name, "printed" if noted else "did not print", printed))
    lib.petrsim(args, "check", out)
    lib.petrsim(args, out, "--no-wall-time", timeout_s=120)
    return out


def check_comm_hook(name, traces, hook):
    for rank, (_, events) in traces.items():
        hooks = [l["comm_hook"] for l in layouts(events) if l["comm_hook"]]
        want = ["fp16_compress_hook"] if hook == "fp16" else []
        if hooks != want:
            raise Failure("{} rank {}: DdpLayout.comm_hook recorded {}, expected {}".format(
                name, rank, hooks, want))


def compare(name, args, out, traces):
    plan = lib.petrsim_json(args, "plan", out, "--iterations", str(ITERATIONS), "--json")
    want = [(c["seq"], c["op"].lower(), c["numel"], c["dtype"]) for c in plan["collectives"]]
    if not any(c["step"].startswith("DDP gradient bucket") for c in plan["collectives"]):
        raise Failure("{}: the plan of the imported scenario has no DDP bucket".format(name))
    last = max(s for s, _, _, _ in want)
    for rank, (_, events) in traces.items():
        got = sorted((e["seq"], lib.OP_NAMES[e["op"]], e["numel"], lib.DTYPE_NAMES[e["dtype"]])
                     for e in events if e["kind"] == wire.COLLECTIVE
                     and e["process_group"] == "default_pg" and e["seq"] <= last)
        if got != want:
            lines = ["#{}: probe {} plan {}".format(i, got[i] if i < len(got) else None,
                                                   want[i] if i < len(want) else None)
                     for i in range(max(len(got), len(want)))
                     if (got[i] if i < len(got) else None) != (want[i] if i < len(want) else None)]
            raise Failure("{} rank {}: {} recorded collectives, the plan of {} has {}; first "
                          "differences (seq, op, numel, dtype):\n  {}".format(
                              name, rank, len(got), out, len(want), "\n  ".join(lines[:12])))
    return len(want)


def body(args, tmp):
    checksums = {}
    lines = []
    for case in CASES:
        world, find_unused, broadcast_buffers, as_view, hook = case
        for path in ("subclass", "hook"):
            name = "{}_w{}_fu{}_bb{}_view{}_{}".format(path, world, find_unused, broadcast_buffers,
                                                      as_view, hook)
            trace_dir, checksum = run_job(tmp, name, path, world, find_unused, broadcast_buffers,
                                          as_view, hook)
            checksums.setdefault(case, {})[path] = checksum
            traces = lib.read_traces(trace_dir, world)
            check_comm_hook(name, traces, hook)
            for rank, (_, events) in traces.items():
                check_layouts(name, rank, events, find_unused, broadcast_buffers)
                texts = [e["text"] for e in events if e["kind"] == wire.COLLECTIVE]
                counted = sum("counted by sequence number" in t for t in texts)
                if (path == "hook") != (counted > 0):
                    raise Failure("{} rank {}: {} collectives counted by sequence number (the {} "
                                  "path was not the one used)".format(name, rank, counted, path))
            out = import_and_run(name, args, trace_dir, hook)
            if hook != "fp16":  # the plan's buckets are DDP's default allreduce (the note says so)
                n = compare(name, args, out, traces)
                lines.append("{}: {} collectives per rank == petrsim plan of the imported "
                             "scenario".format(name, n))
            lib.petrsim(args, "diagnose", trace_dir)
            lib.petrsim(args, "export", trace_dir, "--perfetto", os.path.join(tmp, name + ".json"))
    for case, by_path in checksums.items():
        if by_path["subclass"] != by_path["hook"]:
            raise Failure("(world, find_unused, broadcast_buffers, gradient_as_bucket_view, hook) "
                          "{}: parameter bytes after training differ between the paths: {}"
                          .format(case, by_path))
    for line in lines:
        print("  " + line)
    print("  every case: the hook path trains to the same parameter bytes (sha256) as the "
          "subclass path; petrsim check and a simulator run accept the imported scenario")


if __name__ == "__main__":
    lib.run_test("probe: DDP layout -> import probe-trace -> plan == recorded (both DDP paths)",
                 body)
