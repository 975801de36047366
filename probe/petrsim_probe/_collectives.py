"""Collective hooks: every collective with its process group, c10d sequence number, op, numel, dtype.

- The `torch.distributed` functions (all_reduce, broadcast, ...) are wrapped in both namespaces
  (torch.distributed and torch.distributed.distributed_c10d, whose own helpers such as
  all_gather_object call them by their module-global names).
- DistributedDataParallel issues its collectives from C++ (construction, buffer broadcasts,
  bucket rebuild, gradient buckets). The subclass path: its process group is replaced by a Python
  ProcessGroup that forwards every call to the real group and records it (torch 1.13's
  PyProcessGroup trampoline lets the C++ reducer call Python overrides). The hook path (_ddp.py),
  where torch cannot subclass ProcessGroup or PETRSIM_PROBE_DDP_PATH=hook: DDP runs on the real
  group with a recording communication hook, its other collectives counted by sequence number.
  Either way its layout is recorded (_ddp.py, `ddp_layout` events).
- Sequence numbers: c10d's own per-group counter (`_get_sequence_number_for_group`), counted
  from the value right after the group was created (Gloo starts it at a random number, NCCL at
  0), so the first collective of a group is 1, as in `petrsim plan`. A group created before the
  probe was installed counts from the probe's first sight of it.
A blocking collective is recorded when it returns (or raises: completed=false); an asynchronous
one (DDP's buckets, async_op=True) when the main thread, passing through the probe, first sees
its Work completed (see _recorder.py: no done-callbacks on the backend's threads); the end of
every backward pass is such a point (`torch.autograd.backward` is wrapped: DDP's reducer has
waited for its buckets when it returns). Whatever is still open when the process ends is
recorded then, with completed=false.
"""

import sys
import warnings

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from . import wire
from ._recorder import now_ns

_DTYPES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.float64: 3,
           torch.int32: 4, torch.int64: 5, torch.uint8: 6}
ASYNC_WORKER = -2  # TraceEvent.worker of non-blocking collectives (DDP gradient buckets)
_ALLREDUCE = wire.OPS["allreduce"]

# function name -> (op, index of the tensor (or list) measured, the parameter names)
_FUNCTIONS = {
    "all_reduce": ("allreduce", 0),
    "broadcast": ("broadcast", 0),
    "reduce": ("reduce", 0),
    "all_gather": ("allgather", 1),
    "all_gather_into_tensor": ("allgather", 1),
    "_all_gather_base": ("allgather", 1),
    "reduce_scatter": ("reduce_scatter", 0),
    "reduce_scatter_tensor": ("reduce_scatter", 0),
    "_reduce_scatter_base": ("reduce_scatter", 0),
    "all_to_all": ("alltoall", 1),
    "all_to_all_single": ("alltoall", 1),
    "barrier": ("barrier", None),
}


def _measure(value):
    """(numel, dtype code) of a tensor or a list of tensors."""
    if isinstance(value, (list, tuple)):
        numel = 0
        dtype = 0
        for t in value:
            numel += t.numel()
            dtype = _DTYPES.get(t.dtype, 0)
        return numel, dtype
    if value is None:
        return 0, 0
    return value.numel(), _DTYPES.get(value.dtype, 0)


_CALLER_TEXTS = {}


def _caller_text():
    """The Python frame that called the collective (what a traceback of a hang would end in)."""
    frame = sys._getframe(2)
    key = (frame.f_code, frame.f_lineno)
    text = _CALLER_TEXTS.get(key)
    if text is None:
        code = frame.f_code
        text = _CALLER_TEXTS[key] = "{}:{} in {}".format(code.co_filename, frame.f_lineno,
                                                          code.co_name)
    return text


class CollectiveHooks:
    def __init__(self, probe):
        self.probe = probe
        self.bases = {}  # process group -> its sequence number when the probe first saw it
        self.originals = []
        self.recorder_class = None
        from ._ddp import DdpRecorder, ddp_path_from_env

        self.ddp_path = ddp_path_from_env()
        self.ddp = DdpRecorder(self)
        self.in_ddp_init = 0
        # Hook path: sequence numbers recorded per group while a DDP's rebuild is still to be
        # counted (tracking > 0): _ddp.py finds the ones nothing recorded.
        self.tracking = 0
        self._seen = {}

    def track_seq(self, group, seq):
        seen = self._seen.get(group)
        if seen is None:
            seen = self._seen[group] = set()
        seen.add(seq)

    def seen_seqs(self, group):
        return self._seen.get(group, ())

    def untrack(self, group, below=None):
        seen = self._seen.get(group)
        if seen is None:
            return
        if below is None or not self.tracking:
            del self._seen[group]
        else:
            seen.difference_update([s for s in seen if s <= below])

    # -- groups ---------------------------------------------------------------------------------

    def group_name(self, pg):
        if pg is c10d._get_default_group():
            return "default_pg"
        name = c10d._pg_names.get(pg)
        return str(name) if name is not None else "pg_{}".format(id(pg))

    def seq_of(self, pg):
        """The group's current c10d sequence number, relative to its base."""
        raw = pg._get_sequence_number_for_group()
        base = self.bases.get(pg)
        if base is None:
            base = self.bases[pg] = raw
        return raw - base

    def note_group(self, pg):
        if pg is not None and pg not in self.bases:
            try:
                self.bases[pg] = pg._get_sequence_number_for_group()
            except (RuntimeError, AttributeError):
                pass

    # -- the torch.distributed functions --------------------------------------------------------

    def _wrap_function(self, name, original, op_name, tensor_pos):
        import inspect

        params = list(inspect.signature(original).parameters)
        group_pos = params.index("group") if "group" in params else None
        async_pos = params.index("async_op") if "async_op" in params else None
        tensor_name = params[tensor_pos] if tensor_pos is not None else None
        op = wire.OPS[op_name]
        hooks = self
        probe = self.probe

        def wrapper(*args, **kwargs):
            rec = probe.recorder
            if rec.role != -1 or not probe.active:
                return original(*args, **kwargs)
            if rec.in_flight:  # asynchronous ones that completed come first
                rec.poll_in_flight()
            group = args[group_pos] if group_pos is not None and len(args) > group_pos \
                else kwargs.get("group")
            if hooks.recorder_class and isinstance(group, hooks.recorder_class):
                return original(*args, **kwargs)  # DDP's recorded group records it itself
            if group is None or group is c10d.GroupMember.WORLD:
                pg = c10d._get_default_group()
            elif c10d._rank_not_in_group(group):
                return original(*args, **kwargs)
            else:
                pg = group
            async_op = args[async_pos] if async_pos is not None and len(args) > async_pos \
                else kwargs.get("async_op", False)
            if tensor_name is None:
                numel, dtype = 0, 0
            else:
                value = args[tensor_pos] if len(args) > tensor_pos else kwargs.get(tensor_name)
                numel, dtype = _measure(value)
            seq = hooks.seq_of(pg) + 1  # the number this call takes
            start = now_ns()
            info = (hooks.group_name(pg), seq, op, numel, dtype, start, probe.iteration,
                    -1, _caller_text())
            token = rec.open_collective(info)
            try:
                result = original(*args, **kwargs)
            except BaseException:
                if rec.close_collective(token) is not None:
                    hooks._record(info, now_ns(), completed=False)
                raise
            actual = hooks.seq_of(pg)
            if actual > seq:
                info = info[:1] + (actual,) + info[2:]
            if hooks.tracking:
                hooks.track_seq(info[0], info[1])
            if async_op and result is not None:
                hooks._in_flight(result, token, info)
            elif rec.close_collective(token) is not None:
                hooks._record(info, now_ns())
            return result

        wrapper.__name__ = name
        wrapper.__doc__ = original.__doc__
        wrapper.__wrapped__ = original
        return wrapper

    def _record(self, info, end_ns, completed=True):
        self.probe.recorder.record_collective(info, end_ns, completed)

    def _in_flight(self, work, token, info, settles=False):
        """An asynchronous collective issued: the main thread records it when it sees the Work
        completed (Recorder.poll_in_flight)."""
        rec = self.probe.recorder
        rec.pending[token] = info  # the pending entry carries the real sequence number
        if work is None:
            if rec.close_collective(token) is not None:
                self._record(info, now_ns())
            return
        rec.add_in_flight(token, work, settles)

    # -- DistributedDataParallel ----------------------------------------------------------------

    def _make_recorder_class(self):
        hooks = self
        probe = self.probe

        class RecordedProcessGroup(dist.ProcessGroup):
            """Forwards every collective DDP issues to the real group, recording it."""

            def __init__(self, inner):
                super().__init__(inner.rank(), inner.size())
                self.inner = inner
                # (names ProcessGroup itself will not have: torch 2 has a name() method)
                self._petrsim_name = None  # the inner group's name, at its first collective
                hooks.note_group(inner)

            def getBackendName(self):
                return self.inner.getBackendName() if hasattr(self.inner, "getBackendName") \
                    else "petrsim_probe"

            def _petrsim_record(self, work, start, op, measured, worker, text, settles=False):
                numel, dtype = _measure(measured)
                if self._petrsim_name is None:
                    self._petrsim_name = hooks.group_name(self.inner)
                info = (self._petrsim_name, hooks.seq_of(self.inner), op, numel, dtype, start,
                        probe.iteration, worker, text)
                rec = probe.recorder
                token = rec.open_collective(info)
                hooks._in_flight(work, token, info, settles)

            def allreduce(self, tensors, opts=None):
                # DDP's gradient buckets, every step: no more Python than needed here.
                if opts is None:
                    opts = dist.AllreduceOptions()
                rec = probe.recorder
                if rec.role != -1 or not probe.active:
                    return self.inner.allreduce(tensors, opts)
                if rec.in_flight:  # the buckets before it that completed
                    rec.poll_in_flight()
                start = now_ns()
                work = self.inner.allreduce(tensors, opts)
                self._petrsim_record(work, start, _ALLREDUCE, tensors, ASYNC_WORKER,
                                     "DDP allreduce (gradient bucket)",
                                     settles=bool(tensors) and not tensors[0].is_cuda)
                return work

            def _issue(self, op, measured, call, worker=-1, text="DDP"):
                rec = probe.recorder
                if rec.role != -1 or not probe.active:
                    return call()
                if rec.in_flight:
                    rec.poll_in_flight()
                start = now_ns()
                work = call()
                self._petrsim_record(work, start, wire.OPS[op], measured, worker, text)
                return work

            def broadcast(self, tensors, opts=None):
                opts = opts if opts is not None else dist.BroadcastOptions()
                return self._issue("broadcast", tensors,
                                   lambda: self.inner.broadcast(tensors, opts),
                                   text="DDP broadcast")

            def allgather(self, outputs, inputs, opts=None):
                opts = opts if opts is not None else dist.AllgatherOptions()
                return self._issue("allgather", inputs,
                                   lambda: self.inner.allgather(outputs, inputs, opts),
                                   text="DDP allgather")

            def barrier(self, opts=None):
                opts = opts if opts is not None else dist.BarrierOptions()
                return self._issue("barrier", None, lambda: self.inner.barrier(opts),
                                   text="DDP barrier")

        return RecordedProcessGroup

    def _wrap_ddp(self):
        import inspect

        DDP = torch.nn.parallel.DistributedDataParallel
        original = DDP.__init__
        signature = inspect.signature(original)
        hooks = self
        probe = self.probe

        def __init__(ddp_self, *args, **kwargs):
            if not probe.active or probe.recorder.role != -1:
                return original(ddp_self, *args, **kwargs)
            bound = signature.bind(ddp_self, *args, **kwargs)
            pg = bound.arguments.get("process_group")
            if pg is None:
                pg = c10d._get_default_group()
            path = "hook"
            if hooks.ddp_path != "hook":
                if hooks.recorder_class is None:
                    try:
                        hooks.recorder_class = hooks._make_recorder_class()
                        hooks.recorder_class(pg)  # can this torch subclass ProcessGroup?
                    except Exception as e:  # noqa: BLE001 - any failure means: not on this torch
                        hooks.recorder_class = False
                        warnings.warn("petrsim_probe: torch {} cannot run DistributedDataParallel "
                                      "on a recording ProcessGroup ({}: {}); DDP's collectives "
                                      "are recorded through a communication hook and sequence "
                                      "numbers instead".format(torch.__version__,
                                                               type(e).__name__, e))
                if hooks.recorder_class:
                    path = "subclass"
                    bound.arguments["process_group"] = hooks.recorder_class(pg)
            hooks.note_group(pg)
            hooks.in_ddp_init += 1
            try:
                result = original(*bound.args, **bound.kwargs)
            finally:
                hooks.in_ddp_init -= 1
            hooks.ddp.constructed(ddp_self, pg, path)
            return result

        __init__.__wrapped__ = original
        DDP.__init__ = __init__
        self.originals.append((DDP, "__init__", original))

        # The user's own communication hooks: on a DDP whose hook the probe holds (hook path) run
        # inside the probe's; on either path recorded in the layout (DdpLayout.comm_hook).
        register = DDP.register_comm_hook
        self.original_register = register

        def register_comm_hook(ddp_self, state, hook):
            known = hooks.ddp.by_ddp.get(ddp_self)
            name = getattr(hook, "__qualname__", None) or repr(hook)
            if known is not None and known.path == "hook":
                ddp_self._check_comm_hook(hook)
                hooks.ddp.user_hook(ddp_self, state, hook, name)
                return None
            result = register(ddp_self, state, hook)
            if known is not None:
                hooks.ddp.user_hook(ddp_self, state, hook, name)
            return result

        register_comm_hook.__wrapped__ = register
        register_comm_hook.__doc__ = register.__doc__
        DDP.register_comm_hook = register_comm_hook
        self.originals.append((DDP, "register_comm_hook", register))

        builtin = getattr(DDP, "_register_builtin_comm_hook", None)
        if builtin is not None:
            def _register_builtin_comm_hook(ddp_self, comm_hook_type):
                state = hooks.ddp.by_ddp.get(ddp_self)
                name = getattr(comm_hook_type, "name", str(comm_hook_type)).split(".")[-1]
                if state is None or state.path != "hook":
                    result = builtin(ddp_self, comm_hook_type)
                    if state is not None:
                        hooks.ddp.user_hook(ddp_self, None, None, "builtin " + name)
                    return result
                if name == "ALLREDUCE":
                    # The probe's own hook is this one (an allreduce per bucket, recorded as
                    # DDP's); it divides as the built-in does from now on.
                    hooks.ddp.user_hook(ddp_self, None, None, "builtin ALLREDUCE")
                    return None
                if name != "FP16_COMPRESS":
                    raise RuntimeError("petrsim_probe (hook path): no Python equivalent of the "
                                       "built-in communication hook {}".format(comm_hook_type))
                from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

                hooks.ddp.user_hook(ddp_self, ddp_self.process_group,
                                    default_hooks.fp16_compress_hook, "builtin FP16_COMPRESS")
                return None

            _register_builtin_comm_hook.__wrapped__ = builtin
            DDP._register_builtin_comm_hook = _register_builtin_comm_hook
            self.originals.append((DDP, "_register_builtin_comm_hook", builtin))

    def register_original(self, ddp, state, hook):
        """Registers the probe's hook on `ddp` through DDP's own register_comm_hook."""
        self.original_register(ddp, state, hook)

    def _record_counted(self, pg, before, start, known, what):
        """Records the collectives a C++ call issued on `pg`: as many as its sequence numbers
        advanced, op/numel/dtype from `known` [(op, numel, dtype, text)] (those left over or
        missing: the count says so in the text)."""
        probe = self.probe
        after = self.seq_of(pg)
        n = after - before
        if n <= 0:
            return
        end = now_ns()
        group = self.group_name(pg)
        if len(known) != n:
            known = [(op, numel, dtype, "{} (the probe expected {} collective(s), c10d counted "
                      "{}: op and size may be wrong)".format(text, len(known), n))
                     for op, numel, dtype, text in known[:n]]
            known += [(_ALLREDUCE, 0, 0, "{}: a collective the probe did not see".format(what))] \
                * (n - len(known))
        for k, (op, numel, dtype, text) in enumerate(known):
            seq = before + 1 + k
            if self.tracking:
                self.track_seq(group, seq)
            probe.recorder.record_collective(
                (group, seq, op, numel, dtype, start, probe.iteration, -1,
                 text + " (counted by sequence number)"), end)

    def _counted_pg(self, pg):
        """The real group of a C++ DDP helper's call that the probe counts (hook path), or None."""
        probe = self.probe
        if not probe.active or probe.recorder.role != -1:
            return None
        if self.recorder_class and isinstance(pg, self.recorder_class):
            return None  # the subclass path records it itself
        if pg is None or pg is c10d.GroupMember.WORLD:
            pg = c10d._get_default_group()
        if not hasattr(pg, "_get_sequence_number_for_group"):
            return None
        return pg

    def _wrap_ddp_helpers(self):
        """dist._verify_params_across_processes and dist._broadcast_coalesced (DDP's construction
        checks and state broadcasts, its buffer broadcasts), looked up on torch.distributed at
        call time: counted by sequence number on the hook path."""
        hooks = self
        verify = getattr(dist, "_verify_params_across_processes", None)
        if verify is not None:
            def _verify_params_across_processes(process_group, tensors, *args, **kwargs):
                pg = hooks._counted_pg(process_group)
                if pg is None:
                    return verify(process_group, tensors, *args, **kwargs)
                before, start = hooks.seq_of(pg), now_ns()
                result = verify(process_group, tensors, *args, **kwargs)
                dims = sum(t.dim() for t in tensors)
                known = [(wire.OPS["broadcast"], 2 * dims, 5, "DDP __init__: parameter shape check")]
                if hooks.seq_of(pg) - before >= 2:  # 1.12+: the parameter count check first
                    known.insert(0, (wire.OPS["allgather"], 1, 5,
                                     "DDP __init__: parameter count check"))
                hooks._record_counted(pg, before, start, known, "DDP __init__")
                return result

            _verify_params_across_processes.__wrapped__ = verify
            dist._verify_params_across_processes = _verify_params_across_processes
            self.originals.append((dist, "_verify_params_across_processes", verify))
        coalesced = getattr(dist, "_broadcast_coalesced", None)
        assign = getattr(dist, "_compute_bucket_assignment_by_size", None)
        if coalesced is not None and assign is not None:
            def _broadcast_coalesced(process_group, tensors, buffer_size, *args, **kwargs):
                pg = hooks._counted_pg(process_group)
                if pg is None:
                    return coalesced(process_group, tensors, buffer_size, *args, **kwargs)
                before, start = hooks.seq_of(pg), now_ns()
                result = coalesced(process_group, tensors, buffer_size, *args, **kwargs)
                if hooks.seq_of(pg) > before:
                    tensors = list(tensors)
                    what = "DDP __init__: module state broadcast" if hooks.in_ddp_init \
                        else "DDP forward: buffer broadcast"
                    buckets = assign(tensors, [int(buffer_size)])
                    if isinstance(buckets, tuple):
                        buckets = buckets[0]
                    known = []
                    for k, indices in enumerate(buckets):
                        numel = sum(tensors[i].numel() for i in indices)
                        dtype = _DTYPES.get(tensors[indices[0]].dtype, 0) if indices else 0
                        known.append((wire.OPS["broadcast"], numel, dtype,
                                      "{} {}".format(what, k)))
                    hooks._record_counted(pg, before, start, known, what)
                return result

            _broadcast_coalesced.__wrapped__ = coalesced
            dist._broadcast_coalesced = _broadcast_coalesced
            self.originals.append((dist, "_broadcast_coalesced", coalesced))

    def _wrap_backward(self):
        """torch.autograd.backward (Tensor.backward calls it): when it returns, DDP's reducer has
        waited for every gradient bucket of the pass; the probe sees them complete there."""
        import torch.autograd

        original = torch.autograd.backward
        probe = self.probe
        ddp = self.ddp

        def backward(*args, **kwargs):
            rec = probe.recorder
            since = rec.last_token
            if ddp.view_states:
                ddp.before_backward()
            result = original(*args, **kwargs)  # (raised: the next poll sees what completed)
            if rec.in_flight:
                rec.poll_in_flight(backward_since=since)
            if ddp.pending or ddp.used_map_states:
                ddp.after_backward()
            return result

        backward.__name__ = original.__name__
        backward.__doc__ = original.__doc__
        backward.__wrapped__ = original
        torch.autograd.backward = backward
        self.originals.append((torch.autograd, "backward", original))

    # -- installing -----------------------------------------------------------------------------

    def install(self):
        probe = self.probe
        for name, (op_name, tensor_pos) in _FUNCTIONS.items():
            original = getattr(c10d, name, None)
            if original is None:
                continue
            wrapper = self._wrap_function(name, original, op_name, tensor_pos)
            for module in (c10d, dist):
                if getattr(module, name, None) is original:
                    setattr(module, name, wrapper)
                    self.originals.append((module, name, original))
        hooks = self
        for name in ("init_process_group", "new_group"):
            original = getattr(c10d, name)

            def make(name, original):
                def wrapper(*args, **kwargs):
                    result = original(*args, **kwargs)
                    if name == "init_process_group":
                        hooks.note_group(c10d._get_default_group())
                        probe.ensure_open()
                    elif result is not None and result is not c10d.GroupMember.NON_GROUP_MEMBER:
                        hooks.note_group(result)
                    return result

                wrapper.__name__ = name
                wrapper.__doc__ = original.__doc__
                wrapper.__wrapped__ = original
                return wrapper

            wrapper = make(name, original)
            for module in (c10d, dist):
                if getattr(module, name, None) is original:
                    setattr(module, name, wrapper)
                    self.originals.append((module, name, original))
        if dist.is_initialized():
            self.note_group(c10d._get_default_group())
        self._wrap_ddp()
        self._wrap_ddp_helpers()
        self._wrap_backward()

    def uninstall(self):
        for owner, name, original in reversed(self.originals):
            setattr(owner, name, original)
        self.originals = []
