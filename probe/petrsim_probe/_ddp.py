"""DistributedDataParallel: its layout (a `ddp_layout` event) and, on the hook path, its collectives.

The layout (proto/trace.proto, DdpLayout), per DDP of the rank: once at construction (process
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
  records and forwards each bucket, scaled as DDP's reducer scales it without a hook (1.13's
  mark_variable_ready_dense: each gradient multiplied by 1.0 / group size as it is copied into
  the bucket, at::mul_out; one that already is its bucket view, gradient_as_bucket_view=True
  after the first backward, divided in place, div_), then allreduced, the reduced buffer back:
  the parameters come out bit for bit as DDP's own. The construction
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
  torch.distributed functions, as the job's own); a second registration raises as DDP would;
  _register_builtin_comm_hook(ALLREDUCE) keeps the probe's hook (the same collectives, recorded
  as DDP's buckets), dividing the whole bucket first as the built-in does (div_);
  FP16_COMPRESS runs default_hooks.fp16_compress_hook.

Any user hook but the built-in ALLREDUCE, on either path, is written down in a layout event of
its own (DdpLayout.comm_hook): the import's plan assumes DDP's default allreduce.
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


def reducer_ignore_name(module_name, name):
    """The name DDP looks a parameter up by in its ignore list when it builds the reducer's
    parameters (_build_params_for_reducer: module name, ".", parameter name): ".weight" for a
    parameter of the root module, whose state_dict name is "weight"."""
    return "{}.{}".format(module_name, name)


def trainable_parameters(ddp):
    """DDP's own parameter list (DistributedDataParallel._build_params_for_reducer): the
    parameters that require grad and are not ignored, named_modules() order, shared ones once."""
    ignore = set(getattr(ddp, "parameters_to_ignore", None) or ())
    out, memo = [], set()
    for module_name, module in ddp.module.named_modules():
        for name, p in module.named_parameters(recurse=False):
            if not p.requires_grad or reducer_ignore_name(module_name, name) in ignore:
                continue
            if id(p) in memo:
                continue
            memo.add(id(p))
            out.append(p)
    return out


def module_tensors(module, ignore):
    """The module's tensors in state_dict() order (modules walked as state_dict walks them):
    [tensor, name, kind, persistent, aliases]; a tensor met again (shared) is listed once, a
    parameter's further state_dict keys counted in aliases. Ignored: buffers and parameters
    whose state_dict name is in `ignore` (DDP's state broadcast leaves them out), except a
    parameter that requires grad and that DDP's reducer keeps (reducer_ignore_name: a root
    module's parameter listed by its state_dict name): DdpModel's parameters that require grad
    are the reducer's list, so it is kept (and warned about: DDP does not broadcast it)."""
    entries, seen = [], {}

    def walk(m, prefix, module_name):
        for name, p in m._parameters.items():
            if p is None:
                continue
            if prefix + name in ignore:
                if not p.requires_grad or reducer_ignore_name(module_name, name) in ignore:
                    continue
                warnings.warn("petrsim_probe: DDP ignores parameter {!r} in its state broadcast "
                              "but not in its reducer (it looks root-module parameters up as "
                              "{!r}): recorded as a DDP parameter".format(
                                  prefix + name, reducer_ignore_name(module_name, name)))
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
                walk(child, prefix + name + ".", prefix + name)

    walk(module, "", "")
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
        self.comm_hook = ""  # the name of the hook the user registered, if any
        self.builtin_allreduce = False  # hook path: the user registered the built-in ALLREDUCE
        # Hook path: how DDP's reducer would scale each gradient (see _scale).
        self.inverse = 1.0 / self.world
        self.as_view = bool(getattr(ddp, "gradient_as_bucket_view", False))
        self.had_view = frozenset()  # ids of the parameters whose grad was a view at backward start
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
        self.view_states = []  # hook path, gradient_as_bucket_view
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
            if state.as_view:
                self.view_states.append(state)
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

    def _layout_event(self, ddp, state, rebuilt, buckets, with_module=False, ready=None,
                      comm_hook=""):
        fields = dict(ddp=state.index, rebuilt=rebuilt, process_group=state.group,
                      path=state.path, world_size=state.world, comm_hook=comm_hook)
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

    def before_backward(self):
        """Hook path, gradient_as_bucket_view: which gradients already are bucket views (DDP's
        reducer divides those in place, the others as it copies them in)."""
        for state in self.view_states:
            state.had_view = frozenset(id(p) for p in state.params
                                       if p.grad is not None and p.grad._base is not None)

    def after_backward(self):
        for state in self.used_map_states:
            if state.last_bucket_seq:
                self._used_map(state)
        for state in list(self.pending):
            ddp = state.ddp()
            if ddp is None:
                self._settle(state)
                continue
            if not getattr(ddp, "require_backward_grad_sync", True):
                # no_sync(): the reducer neither reduces nor records a ready order.
                state.ready.clear()
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
        if self.hooks.tracking:
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

    def user_hook(self, ddp, state, hook, name):
        """The user registered a communication hook on `ddp` (`name`: its __qualname__, or
        "builtin <type>"). Hook path: theirs runs inside the probe's (the built-in ALLREDUCE: the
        probe's, dividing as it does). Either path: a layout event says so, but for ALLREDUCE."""
        s = self.by_ddp.get(ddp)
        if s is None:
            return False
        if s.path == "hook":
            if s.user is not None or s.builtin_allreduce:
                raise RuntimeError("register_comm_hook or register_builtin_comm_hook can only be "
                                   "called once.")
            if name == "builtin ALLREDUCE":
                s.builtin_allreduce = True
            else:
                s.user = (state, hook)
        if name != "builtin ALLREDUCE":
            s.comm_hook = name
            self._layout_event(ddp, s, rebuilt=False, buckets=None, comm_hook=name)
            self.probe.recorder.flush()
        return s.path == "hook"


def _scale(state, bucket, tensor):
    """The bucket divided by the group size as DDP's reducer divides it without a hook (torch
    1.13 reducer.cpp, mark_variable_ready_dense): a gradient copied into its bucket view is
    multiplied by 1.0 / size on the way (at::mul_out with a wrapped double scalar, which
    Tensor.mul_(float) is too); a gradient that already is its bucket view
    (gradient_as_bucket_view=True, from the second backward on) is divided in place (div_).
    x * (1/3) and x / 3 differ in the last bit for some x: the same op keeps the result DDP's.
    The built-in ALLREDUCE hook divides the whole bucket (div_) before its allreduce."""
    if state.builtin_allreduce:
        tensor.div_(state.world)
        return
    if not state.as_view or not state.had_view:
        tensor.mul_(state.inverse)
        return
    views = state.had_view
    modes = [id(p) in views for p in bucket.parameters()]
    if all(modes):
        tensor.div_(state.world)
        return
    for grad, view in zip(bucket.gradients(), modes):
        if view:
            grad.div_(state.world)
        else:
            grad.mul_(state.inverse)


def _bucket_hook(state, bucket):
    """The probe's communication hook (hook path): DDP's default (the bucket divided by the group
    size as the reducer divides it, _scale; allreduced, the reduced tensor back), recorded; or
    the user's own hook."""
    user = state.user
    if user is not None:
        return user[1](user[0], bucket)
    tensor = bucket.buffer()
    pg = state.pg
    _scale(state, bucket, tensor)
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
