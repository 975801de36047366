"""DistributedDataParallel: its layout (a `ddp_layout` event) and, on the hook path, its collectives.

The layout (model/trace.proto, DdpLayout), per DDP of the rank: once at construction (process
group, bucket_bytes_cap, find_unused_parameters, broadcast_buffers, the module's tensors in
state_dict order, the gradient bucket layout DDP starts with) and once after the backward whose
gradient-ready order DDP rebuilds its buckets by (the rebuilt layout, the ready order). The ready
order is taken from a hook per parameter that requires grad, registered at construction and
removed once the first backward has run (an AccumulateGrad pre-hook fires where DDP's own
autograd hook does, so in DDP's order); the bucket layouts from the reducer
(`Reducer._get_zeros_like_grad_buckets()`: each bucket's parameters and flat buffer).

Two ways to record DDP's own collectives, picked per DDP (PETRSIM_PROBE_DDP_PATH):
- subclass (_collectives.py): DDP runs on a recording Python ProcessGroup that forwards to the
  real group; sees everything DDP issues (torch 1.13's PyProcessGroup trampoline).
- hook: DDP runs on the real group. The gradient buckets go through a communication hook that
  records and forwards each bucket exactly as DDP's default does (divide by the group size,
  allreduce, the reduced buffer back: default_hooks.allreduce_hook's behaviour). The construction
  collectives are recorded around `dist._verify_params_across_processes` and
  `dist._broadcast_coalesced` (which DDP looks up on torch.distributed at call time): the number
  each issued is their c10d sequence-number difference, and op/numel/dtype are what they are
  known to issue (the parameter count allgather int64[1] where 2 were issued, the shape/stride
  broadcast int64[2 * sum of dims]; one broadcast per bucket of dist._compute_bucket_assignment_by_size
  over the tensors). The bucket rebuild's two broadcasts (int32[P + 1], int32[#buckets]), issued
  from C++ in the pre-forward, are the two sequence numbers on DDP's group that nothing recorded
  between two backward passes; the used-parameter map (find_unused_parameters: int32[P]) the
  number right after the last bucket. A user's own register_comm_hook later is kept working: the
  probe's hook calls theirs (their collectives are recorded where they go through the
  torch.distributed functions); a second registration raises as DDP would;
  _register_builtin_comm_hook(ALLREDUCE / FP16_COMPRESS) runs the Python hooks of the same
  behaviour (default_hooks.allreduce_hook / fp16_compress_hook).
"""

import os
import warnings
import weakref

import torch
import torch.distributed as dist

from . import wire
from ._recorder import ProbeError, now_ns

PATHS = ("auto", "subclass", "hook")
_ASYNC_WORKER = -2
_ALLREDUCE = wire.OPS["allreduce"]
_BROADCAST = wire.OPS["broadcast"]
_ALLGATHER = wire.OPS["allgather"]
_INT32 = wire.DTYPES["int32"]
_INT64 = wire.DTYPES["int64"]
# DdpTensor.dtype / Collective.Dtype of a torch dtype; dtypes petrsim has no value for are
# recorded as the one of the same size (bool, int8 as uint8; int16 as float16).
_DTYPES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.float64: 3,
           torch.int32: 4, torch.int64: 5, torch.uint8: 6, torch.bool: 6, torch.int8: 6,
           torch.int16: 1}


def ddp_path_from_env():
    value = os.environ.get("PETRSIM_PROBE_DDP_PATH", "").strip().lower() or "auto"
    if value not in PATHS:
        raise ProbeError("petrsim_probe: PETRSIM_PROBE_DDP_PATH: expected one of {}, got {!r}"
                         .format(", ".join(PATHS), value))
    return value


def _first_value(fut):
    return fut.value()[0]


def trainable_parameters(ddp):
    """DDP's own parameter list (DistributedDataParallel._build_params_for_reducer): the
    parameters that require grad and are not ignored, named_modules() order, shared ones once."""
    ignore = set(getattr(ddp, "parameters_to_ignore", None) or ())
    out, memo = [], set()
    for module_name, module in ddp.module.named_modules():
        for name, p in module.named_parameters(recurse=False):
            if not p.requires_grad or "{}.{}".format(module_name, name) in ignore:
                continue
            if id(p) in memo:
                continue
            memo.add(id(p))
            out.append(p)
    return out


def module_tensors(module, ignore):
    """The module's tensors in state_dict() order (modules walked as state_dict walks them):
    [tensor, name, kind, persistent, aliases]; a tensor met again (shared) is listed once, a
    parameter's further state_dict keys counted in aliases."""
    entries, seen = [], {}

    def walk(m, prefix):
        for name, p in m._parameters.items():
            if p is None or prefix + name in ignore:
                continue
            entry = seen.get(id(p))
            if entry is not None:
                entry[4] += 1
                continue
            entry = seen[id(p)] = [p, prefix + name, 0, True, 0]
            entries.append(entry)
        non_persistent = getattr(m, "_non_persistent_buffers_set", ())
        for name, b in m._buffers.items():
            if b is None or prefix + name in ignore or id(b) in seen:
                continue
            entry = seen[id(b)] = [b, prefix + name, 1, name not in non_persistent, 0]
            entries.append(entry)
        for name, child in m._modules.items():
            if child is not None:
                walk(child, prefix + name + ".")

    walk(module, "")
    return entries


class DdpState:
    """What the probe keeps of one DistributedDataParallel."""

    def __init__(self, index, ddp, pg, group, path, params):
        self.index = index
        self.ddp = weakref.ref(ddp)
        self.pg = pg
        self.group = group
        self.path = path
        self.params = params
        self.index_of = {id(p): k for k, p in enumerate(params)}
        self.world = pg.size()
        self.find_unused = bool(getattr(ddp, "find_unused_parameters", False))
        self.static_graph = bool(getattr(ddp, "static_graph", False))
        self.ready = []
        self.handles = []
        self.backwards = 0
        self.settled = False  # the second layout event is written
        self.rebuild_recorded = False
        self.initial = None  # the construction bucket layout
        self.user = None  # (state, hook) of the user's own comm hook (hook path)
        self.probe = None
        self.last_bucket_seq = 0
        self.window_start = 0  # hook path: seq at the end of the previous backward


class DdpRecorder:
    def __init__(self, hooks):
        self.hooks = hooks
        self.probe = hooks.probe
        self.states = []  # DdpState, in construction order
        self.by_ddp = weakref.WeakKeyDictionary()
        self.pending = []  # states whose rebuilt layout is still to come
        self.used_map_states = []  # hook path, find_unused_parameters
        self.unseen_warned = False

    # -- construction ---------------------------------------------------------------------------

    def constructed(self, ddp, pg, path):
        """After DDP.__init__: the construction layout; the ready-order hooks; on the hook path
        the recording communication hook."""
        hooks = self.hooks
        params = trainable_parameters(ddp)
        state = DdpState(len(self.states), ddp, pg, hooks.group_name(pg), path, params)
        state.probe = self.probe
        self.states.append(state)
        self.by_ddp[ddp] = state
        for k, p in enumerate(params):
            state.handles.append(p.register_hook(self._ready_hook(state, k)))
        state.initial = self._buckets(ddp, state)
        self._layout_event(ddp, state, rebuilt=False, buckets=state.initial, with_module=True)
        self.pending.append(state)
        if path == "hook":
            state.window_start = hooks.seq_of(pg)
            hooks.tracking += 1
            hooks.register_original(ddp, state, _bucket_hook)
            if state.find_unused:
                self.used_map_states.append(state)
        self.probe.recorder.flush()

    @staticmethod
    def _ready_hook(state, k):
        ready = state.ready

        def hook(grad):
            ready.append(k)

        return hook

    def _buckets(self, ddp, state):
        get = getattr(getattr(ddp, "reducer", None), "_get_zeros_like_grad_buckets", None)
        if get is None:
            return None
        try:
            buckets = get()
        except Exception:  # noqa: BLE001 - a release whose reducer cannot say
            return None
        out = []
        for bucket in buckets:
            positions = [state.index_of.get(id(p), -1) for p in bucket.parameters()]
            if any(k < 0 for k in positions):
                return None  # parameters the probe does not know as DDP's: say nothing
            buffer = bucket.buffer()
            out.append((positions, buffer.numel(), _DTYPES.get(buffer.dtype, 0)))
        return out

    def _layout_event(self, ddp, state, rebuilt, buckets, with_module=False, ready=None):
        fields = dict(ddp=state.index, rebuilt=rebuilt, process_group=state.group,
                      path=state.path, world_size=state.world)
        if with_module:
            module = ddp.module
            ignore = set(getattr(ddp, "parameters_to_ignore", None) or ())
            tensors = []
            for tensor, name, kind, persistent, aliases in module_tensors(module, ignore):
                tensors.append(wire.encode_ddp_tensor(
                    name, kind, list(tensor.shape), _DTYPES.get(tensor.dtype, 0),
                    requires_grad=tensor.requires_grad, persistent=persistent,
                    state_dict_aliases=aliases))
            fields.update(
                bucket_cap_bytes=int(getattr(ddp, "bucket_bytes_cap", 0)),
                first_bucket_bytes=int(getattr(dist, "_DEFAULT_FIRST_BUCKET_BYTES", 0)),
                find_unused_parameters=state.find_unused,
                broadcast_buffers=bool(getattr(ddp, "broadcast_buffers", True)),
                module_class=type(module).__name__, tensors=tensors,
                static_graph=state.static_graph)
        if buckets:
            fields["buckets"] = [wire.encode_ddp_bucket(p, n, d) for p, n, d in buckets]
        if ready is not None:
            fields["grad_ready_order"] = ready
            fields["ready_order_recorded"] = True
        t = now_ns()
        self.probe.recorder.event(wire.DDP_LAYOUT, t, t, iteration=self.probe.iteration,
                                  ddp_layout=wire.encode_ddp_layout(**fields))

    # -- each backward (until every DDP's second layout is written) -----------------------------

    def after_backward(self):
        for state in self.used_map_states:
            if state.last_bucket_seq:
                self._used_map(state)
        for state in list(self.pending):
            ddp = state.ddp()
            if ddp is None:
                self._settle(state)
                continue
            if not state.ready:
                continue  # no gradient of this DDP in that backward
            state.backwards += 1
            if state.path == "hook":
                self._unseen(state, ddp)
            if state.backwards == 1:
                for handle in state.handles:
                    handle.remove()
                state.handles = []
                self._layout_event(ddp, state, rebuilt=False, buckets=None,
                                   ready=list(state.ready))
                if state.find_unused and not state.static_graph:
                    self._settle(state)  # DDP never rebuilds then
                continue
            rebuilt = bool(getattr(ddp, "_has_rebuilt_buckets", False)) or state.rebuild_recorded
            buckets = self._buckets(ddp, state)
            if buckets is not None and state.initial is not None and buckets != state.initial:
                rebuilt = True
            if rebuilt:
                self._layout_event(ddp, state, rebuilt=True, buckets=buckets)
            # Static graph rebuilds in iteration 2's forward, not 1's.
            if rebuilt or not state.static_graph or state.backwards >= 3:
                self._settle(state)

    def _settle(self, state):
        if state in self.pending:
            self.pending.remove(state)
        state.settled = True
        for handle in state.handles:
            handle.remove()
        state.handles = []
        if state.path == "hook" and not state.rebuild_recorded:
            state.rebuild_recorded = True
            self.hooks.tracking -= 1
            self.hooks.untrack(state.group)

    def _used_map(self, state):
        """find_unused_parameters, hook path: the int32[P] allreduce of the used-parameter map
        the reducer issues right after the last bucket (C++, not seen)."""
        seq = state.last_bucket_seq + 1
        state.last_bucket_seq = 0
        if self.hooks.seq_of(state.pg) < seq:
            return
        t = now_ns()
        info = (state.group, seq, _ALLREDUCE, len(state.params), _INT32, t, self.probe.iteration,
                _ASYNC_WORKER, "DDP used-parameter map (counted by sequence number)")
        self.hooks.track_seq(state.group, seq)
        self.probe.recorder.record_collective(info, t)

    def _unseen(self, state, ddp):
        """Hook path: the sequence numbers on DDP's group since the previous backward that no
        recorded collective took. Two of them before the rebuilt buckets: the rebuild's."""
        hooks = self.hooks
        now = hooks.seq_of(state.pg)
        seen = hooks.seen_seqs(state.group)
        holes = [s for s in range(state.window_start + 1, now + 1) if s not in seen]
        state.window_start = now
        hooks.untrack(state.group, below=now)
        if not holes:
            return
        rebuilt = bool(getattr(ddp, "_has_rebuilt_buckets", False))
        if not state.rebuild_recorded and not state.find_unused and len(holes) >= 2 and \
                (rebuilt or state.backwards >= 2):
            buckets = self._buckets(ddp, state)
            count = len(buckets) if buckets is not None else 0
            t = now_ns()
            for seq, numel, what in ((holes[0], len(state.params) + 1, "parameter indices"),
                                     (holes[1], count, "bucket sizes")):
                info = (state.group, seq, _BROADCAST, numel, _INT32, t, self.probe.iteration, -1,
                        "DDP bucket rebuild: {} (counted by sequence number)".format(what))
                self.probe.recorder.record_collective(info, t)
            holes = holes[2:]
            state.rebuild_recorded = True
            hooks.tracking -= 1
        if holes and not self.unseen_warned:
            self.unseen_warned = True
            warnings.warn("petrsim_probe: {} collective(s) on process group {} (sequence numbers "
                          "{}) were issued where the probe cannot see them (not recorded)".format(
                              len(holes), state.group, holes[:8]))

    # -- the user's own communication hooks (hook path) -----------------------------------------

    def user_hook(self, ddp, state, hook):
        """DDP.register_comm_hook on a DDP whose hook the probe holds: theirs runs inside."""
        s = self.by_ddp.get(ddp)
        if s is None or s.path != "hook":
            return False
        if s.user is not None:
            raise RuntimeError("register_comm_hook or register_builtin_comm_hook can only be "
                               "called once.")
        s.user = (state, hook)
        return True


def _bucket_hook(state, bucket):
    """The probe's communication hook (hook path): DDP's default (the bucket divided by the group
    size, allreduced, the reduced tensor back), recorded; or the user's own hook."""
    user = state.user
    if user is not None:
        return user[1](user[0], bucket)
    tensor = bucket.buffer()
    pg = state.pg
    tensor.div_(state.world)
    probe = state.probe
    rec = probe.recorder
    if rec.role != -1 or not probe.active:
        return pg.allreduce([tensor], dist.AllreduceOptions()).get_future().then(_first_value)
    if rec.in_flight:
        rec.poll_in_flight()
    start = now_ns()
    work = pg.allreduce([tensor], dist.AllreduceOptions())
    hooks = probe.collectives
    seq = hooks.seq_of(pg)
    state.last_bucket_seq = seq
    if hooks.tracking:
        hooks.track_seq(state.group, seq)
    info = (state.group, seq, _ALLREDUCE, tensor.numel(), _DTYPES.get(tensor.dtype, 0), start,
            probe.iteration, _ASYNC_WORKER, "DDP allreduce (gradient bucket)")
    token = rec.open_collective(info)
    hooks._in_flight(work, token, info, settles=not tensor.is_cuda)
    return work.get_future().then(_first_value)
