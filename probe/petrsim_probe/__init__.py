"""petrsim_probe: records petrsim traces inside a real PyTorch training job, and stops a livelock.

    import petrsim_probe; petrsim_probe.install("traces/")     # first line of the training script
    python -m petrsim_probe --trace-dir traces/ -- tools/train.py CONFIG --launcher pytorch

Each rank writes `traces/rank_<r>.pbtrace` in proto/trace.proto's format (read by `petrsim
diagnose`, `petrsim replay`, `petrsim export`): the batch sampler's draws per batch and slot,
every __getitem__ attempt of each DataLoader worker (mmdet3d-style datasets: prepare_train_data /
_rand_another, inside ConcatDataset, and subclasses), batches ready, data waits, iterations,
every collective (process group, c10d sequence number, op, numel, dtype) and the process's exit.
A livelock watchdog in each worker stops a __getitem__ whose resample loop has drawn only frames
without GT from one pool for `livelock_attempts` loads and `livelock_seconds` seconds: it writes
the traces and raises an error naming rank, worker, batch, slot, index, sampler group and pool.
A stall watcher in each worker samples the Python stack of any __getitem__ (any dataset) that has
not returned for `livelock_seconds` into the trace (`stall`), and with `stop_stalls` stops it.

Needs torch and numpy only. Not installed, it costs nothing: nothing of torch is touched until
install() runs. Every DataLoader is recorded; workers may be forked, spawned or started by a fork
server (petrsim_probe must then be importable in them: PYTHONPATH, or sys.path, which spawn
copies).
"""

import atexit
import os
import signal
import sys
import threading

from . import wire
from ._datasets import DatasetHooks, LivelockError, StallError
from ._recorder import ProbeError, Recorder, now_ns

__all__ = ["install", "uninstall", "LivelockError", "StallError", "ProbeError", "__version__"]
__version__ = "0.1.0"

DEFAULT_LIVELOCK_ATTEMPTS = 100
DEFAULT_LIVELOCK_SECONDS = 5.0

_PROBE = None


class Probe:
    def __init__(self, trace_dir, scenario, scenario_path, livelock_attempts, livelock_seconds,
                 backend, stop_stalls=False):
        import torch

        self.trace_dir = trace_dir
        self.livelock_attempts = livelock_attempts
        self.livelock_seconds = livelock_seconds
        self.stop_stalls = stop_stalls
        self.stall_message = None
        self.backend = backend
        self.recorder = Recorder(trace_dir, "petrsim_probe {} (torch {})".format(
            __version__, torch.__version__), scenario, scenario_path)
        self.datasets = DatasetHooks(self)
        self.active = True
        self.iteration = 0  # the training iteration the main process is in (its batch number)
        self.iteration_start_ns = None
        self.exception_text = None
        self.livelock_text = None
        self.exit_lock = threading.Lock()
        from ._collectives import CollectiveHooks
        from ._loader import LoaderHooks

        self.loader = LoaderHooks(self)
        self.collectives = CollectiveHooks(self)

    # -- the file -------------------------------------------------------------------------------

    def ensure_open(self):
        if self.recorder.fd >= 0:
            return
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            rank, world_size = dist.get_rank(), dist.get_world_size()
            backend = str(dist.get_backend())
        else:
            rank = int(os.environ.get("RANK", "0"))
            world_size = int(os.environ.get("WORLD_SIZE", "1"))
            backend = self.backend
        self.recorder.open(rank, world_size, backend or "gloo")
        self.recorder.flush()

    # -- the main process's iterations ----------------------------------------------------------

    def before_batch(self, batch, t):
        """The main process asks for batch `batch`: the iteration before it is done."""
        if self.iteration_start_ns is not None:
            self.recorder.event(wire.ITERATION, self.iteration_start_ns, t,
                                iteration=self.iteration)
            self.iteration_start_ns = None
        self.recorder.flush()

    def start_iteration(self, batch, t):
        self.iteration = batch
        self.iteration_start_ns = t

    # -- workers --------------------------------------------------------------------------------

    def in_worker(self, worker_id, setup, dataset):
        """In a DataLoader worker, before torch's worker loop (its main thread): a forked worker
        has this process's probe as its rank's main process left it; a spawned or forkserver one
        a probe of its own (worker_probe), whose dataset classes are wrapped here."""
        from ._loader import reset_worker_signals

        reset_worker_signals()
        if self.recorder.owner_pid != os.getpid():
            self.recorder.after_fork_in_worker(worker_id)
        else:
            self.recorder.role = worker_id
        self.datasets.current = None
        self.datasets.register(dataset, setup.loader)
        self.datasets.loader = setup.loader

    def worker_signals(self, setup):
        """In the worker's main thread, after torch's worker loop set its signal handlers (its
        SIGTERM handler, in C, exits at once): the probe's SIGTERM handler, the stop signal's
        (stop_stalls), a wakeup fd the stall watcher reads (so that a SIGTERM is handled while
        the main thread is blocked in C), and the watcher."""
        from ._stall import STOP_SIGNAL, StallWatch

        wakeup = None
        try:
            signal.signal(signal.SIGTERM, self._worker_sigterm)
            if self.stop_stalls:
                signal.signal(STOP_SIGNAL, self._stall_signal)
            read_fd, write_fd = os.pipe()
            os.set_blocking(write_fd, False)
            signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
            wakeup = read_fd
        except (ValueError, OSError):
            pass
        StallWatch(self, setup.main_pid, wakeup).start()

    def _worker_sigterm(self, signum, frame):
        """A worker terminated (by its main process): record the getitem it was still in, and
        end as torch's own handler ends a worker its parent terminates (exit status 0)."""
        self.worker_terminated()

    def worker_terminated(self):
        """(The SIGTERM handler, or the stall watcher seeing SIGTERM on the wakeup fd while the
        main thread is blocked.)"""
        g = self.datasets.current
        if g is not None and g.take():
            self.datasets.finish(g, completed=False)
        self.recorder.flush()
        os._exit(0)

    def worker_exit(self):
        self.recorder.flush()

    def stall(self, g):
        """The stall watcher's thread: the getitem `g` has not returned for the bound. Records its
        stack; with stop_stalls, stops the worker as the livelock watchdog does."""
        from ._stall import STOP_SIGNAL, sample_stack, stall_event

        stack = sample_stack(g.thread)
        t = now_ns()
        stall_event(self, g, stack, t)
        rec = self.recorder
        if not self.stop_stalls or signal.getsignal(STOP_SIGNAL) != self._stall_signal:
            rec.flush()  # (the stop signal's handler not ours: its default would kill the worker)
            return
        rank = rec.rank if rec.rank is not None else int(os.environ.get("RANK", "0"))
        innermost = stack.rsplit("\n", 1)[-1] if stack else "(no Python frame)"
        message = (
            "petrsim_probe: stalled DataLoader getitem: rank {} DataLoader {}worker {}, batch {} "
            "(slot {}, index {}): __getitem__ has not returned for {:.1f} s; it is at {}. Stopped "
            "(stop_stalls). Traces: {} (petrsim diagnose {})".format(
                rank, "{} ".format(g.loader) if g.loader else "", rec.role, g.batch, g.slot,
                g.index, (t - g.start_ns) / 1e9, innermost, self.trace_dir, self.trace_dir))
        rec.event(wire.WATCHDOG, t, t, worker=rec.role, iteration=g.batch, slot=g.slot,
                  index=g.index, text=message, loader=g.loader)
        if g.take():
            self.datasets.finish(g, completed=False)
        rec.flush()
        self.stall_message = message
        g.stop_sent_ns = now_ns()
        signal.pthread_kill(g.thread, STOP_SIGNAL)

    def _stall_signal(self, signum, frame):
        """stop_stalls: the watcher has recorded the stall; the getitem ends here."""
        g = self.datasets.current
        if g is None or g.stop_sent_ns is None:
            return  # the getitem returned meanwhile
        from ._datasets import StallError

        raise StallError(self.stall_message)

    def livelock(self, g, pool, elapsed_s):
        """The watchdog fired in this worker: record, flush, and raise."""
        rec = self.recorder
        rank = rec.rank if rec.rank is not None else int(os.environ.get("RANK", "0"))
        pool_text = self.datasets.pool_text(pool)
        message = (
            "petrsim_probe: sampler livelock: rank {} DataLoader worker {}, batch {} (slot {}, "
            "index {}): __getitem__ loaded {} frames in {:.1f} s, none with GT, all from the "
            "resample pool of {}. Without the probe this worker would spin forever and the other "
            "ranks would time out in their next collective. Traces: {} (petrsim diagnose {})"
            .format(rank, rec.role, g.batch, g.slot, g.index, g.count, elapsed_s, pool_text,
                    self.trace_dir, self.trace_dir))
        t = now_ns()
        rec.event(wire.WATCHDOG, t, t, worker=rec.role, iteration=g.batch, slot=g.slot,
                  index=g.index, text=message, loader=g.loader)
        rec.event(wire.LIVELOCK, g.start_ns, g.start_ns, worker=rec.role, iteration=g.batch,
                  slot=g.slot, index=g.index, final_index=g.last_index, attempts=g.count,
                  text="the resample loop never ends (stopped by the petrsim_probe watchdog "
                       "after {} loads of {})".format(g.count, pool_text), loader=g.loader)
        self.datasets.current = None
        if g.take():
            self.datasets.finish(g, completed=False)
        rec.flush()
        raise LivelockError(message)

    # -- the end --------------------------------------------------------------------------------

    def dump(self, why, clean=False):
        """Records what is still open and the process's exit, and flushes (main process)."""
        rec = self.recorder
        if rec.role != -1 or os.getpid() != rec.owner_pid:
            rec.flush()
            return
        with self.exit_lock:
            if rec.dumped:
                return
            rec.dumped = True
            t = now_ns()
            g = self.datasets.current  # the main process loading (no workers)
            if g is not None and g.take():
                self.datasets.finish(g, completed=False)
            rec.dump_pending_collectives(t)
            if clean and self.iteration_start_ns is not None:
                rec.event(wire.ITERATION, self.iteration_start_ns, t, iteration=self.iteration)
                self.iteration_start_ns = None
            rec.event(wire.PROCESS_EXIT, t, t, iteration=self.iteration, text=why)
            try:
                self.ensure_open()
            except ProbeError as e:
                sys.stderr.write("{}\n".format(e))
                return
            rec.flush()
            if rec.write_error:
                sys.stderr.write("petrsim_probe: {}\n".format(rec.write_error))
        if not clean:
            # Killed or failing: the DataLoader workers would be left behind, one still in a
            # getitem never writing it. Terminated (as torch's own shutdown does), each records
            # the getitem it was in, completed=false.
            self.loader.stop_workers()

    def _atexit(self):
        if self.exception_text is not None:
            self.dump("the process ends with an uncaught exception: " + self.exception_text)
        else:
            self.dump("the process exits", clean=True)

    def _excepthook(self, kind, value, traceback):
        lines = [line for line in str(value).splitlines() if line.strip()]
        if len(lines) > 1:  # a DataLoader worker's exception: its first and last lines
            text = "{} ... {}".format(lines[0], lines[-1])
        else:
            text = lines[0] if lines else ""
        self.exception_text = "{}: {}".format(kind.__name__, text)[:1000]
        self._previous_excepthook(kind, value, traceback)

    def _sigterm(self, signum, frame):
        self.dump("killed by SIGTERM")
        previous = self._previous_sigterm
        if callable(previous):
            previous(signum, frame)
            return
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous in (None, signal.SIG_DFL)
                      else previous)
        os.kill(os.getpid(), signal.SIGTERM)

    def _watch_signals(self, read_fd):
        """The main thread may be blocked in C (a collective's wait) where Python's SIGTERM
        handler cannot run; this thread sees the signal through the wakeup fd and dumps."""
        import time

        while True:
            try:
                data = os.read(read_fd, 64)
            except OSError:
                return
            if not data:
                return
            if signal.SIGTERM in data and not self.recorder.dumped:
                time.sleep(0.5)  # the main thread's handler first, if it can run
                if not self.recorder.dumped and os.getpid() == self.recorder.owner_pid:
                    self.dump("killed by SIGTERM (while blocked)")
                    if self._previous_sigterm in (None, signal.SIG_DFL):
                        os._exit(128 + signal.SIGTERM)

    def install_exit_hooks(self):
        atexit.register(self._atexit)
        self._previous_excepthook = sys.excepthook
        sys.excepthook = self._excepthook
        self._previous_sigterm = None
        if threading.current_thread() is not threading.main_thread():
            return
        self._previous_sigterm = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, self._sigterm)
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        try:
            old = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        except (ValueError, OSError):
            old = None
        if old not in (None, -1):
            signal.set_wakeup_fd(old)  # the job uses it (asyncio): leave it theirs
            os.close(read_fd)
            os.close(write_fd)
            return
        if old is None:
            os.close(read_fd)
            os.close(write_fd)
            return
        threading.Thread(target=self._watch_signals, args=(read_fd,), name="petrsim_probe",
                         daemon=True).start()


def _positive_int(value, what):
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            if isinstance(value, str) and value.strip().lstrip("+").isdigit():
                value = int(value)
            else:
                raise ValueError
        except ValueError:
            raise ProbeError("petrsim_probe: {}: expected a whole number >= 1, got {!r}".format(
                what, value)) from None
    if value < 1:
        raise ProbeError("petrsim_probe: {}: expected a whole number >= 1, got {}".format(
            what, value))
    return value


def _seconds(value, what):
    try:
        if isinstance(value, bool):
            raise ValueError
        seconds = float(value)
    except (TypeError, ValueError):
        raise ProbeError("petrsim_probe: {}: expected a number of seconds >= 0, got {!r}".format(
            what, value)) from None
    if not seconds >= 0 or seconds == float("inf"):
        raise ProbeError("petrsim_probe: {}: expected a number of seconds >= 0, got {!r}".format(
            what, value))
    return seconds


def _read_scenario(path):
    """The serialized Scenario to embed in the headers: a binary scenario (.pb), or the scenario
    a petrsim trace recorded (a rank_<r>.pbtrace file, or a directory holding rank_0.pbtrace)."""
    if os.path.isdir(path):
        path = os.path.join(path, "rank_0.pbtrace")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ProbeError("petrsim_probe: scenario {}: cannot read: {}".format(path, e.strerror)) \
            from None
    if path.endswith(".pbtrace"):
        try:
            size, body = wire.read_varint(data, 0)
            header = wire.decode_header(data[body:body + size])
        except wire.DecodeError as e:
            raise ProbeError("petrsim_probe: scenario {}: not a petrsim trace: {}".format(
                path, e)) from None
        if not header["scenario"]:
            raise ProbeError("petrsim_probe: scenario {}: its header holds no scenario".format(path))
        return header["scenario"]
    if path.endswith((".pbtxt", ".textproto", ".json")) or data[:1].isspace() or \
            data[:1] in (b"#", b"{") or data[:1].isalpha():
        raise ProbeError(
            "petrsim_probe: scenario {}: expected a binary scenario (.pb) or a petrsim trace; this "
            "looks like text. Make a trace of it with petrsim (`petrsim {} --trace DIR`; a "
            "hang there is fine) and give DIR".format(path, path))
    try:
        wire.fields(data)
    except wire.DecodeError as e:
        raise ProbeError("petrsim_probe: scenario {}: not a binary protobuf message: {}".format(
            path, e)) from None
    return data


def _flag(value, what):
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ProbeError("petrsim_probe: {}: expected true or false (1/0), got {!r}".format(
        what, value))


def install(trace_dir, scenario=None, livelock_attempts=None, livelock_seconds=None,
            backend=None, stop_stalls=None):
    """Starts recording into TRACE_DIR (created if needed): one rank_<r>.pbtrace per rank.

    scenario: a binary petrsim scenario (.pb), or a petrsim trace (file or directory) whose header
        holds one, to embed in every header (then `petrsim diagnose` names the pool and
        `petrsim replay` can re-run the job from the traces alone).
    livelock_attempts, livelock_seconds: the watchdog's bounds; it fires when one __getitem__ has
        made at least that many loads, for at least that long, all without GT from one pool,
        and has seen every frame of that pool (or made ten times that many loads)
        (defaults 100 and 5 s; env PETRSIM_PROBE_LIVELOCK_ATTEMPTS / _SECONDS).
        livelock_seconds is also the stall bound: a worker's __getitem__ (any dataset) that has
        not returned for that long gets its Python stack sampled into the trace (`stall`).
    stop_stalls: also stop such a worker, as the livelock watchdog does (a StallError in the
        worker; the rank fails at once). Default false (env PETRSIM_PROBE_STOP_STALLS): a long
        getitem is no proof of a hang.
    backend: the header's backend before torch.distributed is initialized (default "gloo").
    Returns the installed probe. Raises ProbeError on bad arguments.
    """
    global _PROBE
    import multiprocessing

    if getattr(multiprocessing.current_process(), "_inheriting", False):
        # A spawned process (a DataLoader worker started by spawn, or the fork server) importing
        # the parent's main script, whose first line installs the probe: it must not open (and
        # truncate) the rank's trace. Its DataLoader workers get the rank's probe from their
        # worker_init_fn (worker_probe).
        return None
    if not isinstance(trace_dir, (str, os.PathLike)) or not str(trace_dir):
        raise ProbeError("petrsim_probe: install: expected a trace directory, got {!r}".format(
            trace_dir))
    trace_dir = os.fspath(trace_dir)
    if _PROBE is not None:
        if os.path.abspath(_PROBE.trace_dir) == os.path.abspath(trace_dir):
            return _PROBE
        raise ProbeError("petrsim_probe: already recording into {}; cannot also record into {}"
                         .format(_PROBE.trace_dir, trace_dir))
    if livelock_attempts is None:
        livelock_attempts = os.environ.get("PETRSIM_PROBE_LIVELOCK_ATTEMPTS",
                                           DEFAULT_LIVELOCK_ATTEMPTS)
    if livelock_seconds is None:
        livelock_seconds = os.environ.get("PETRSIM_PROBE_LIVELOCK_SECONDS",
                                          DEFAULT_LIVELOCK_SECONDS)
    if stop_stalls is None:
        stop_stalls = os.environ.get("PETRSIM_PROBE_STOP_STALLS", False)
    livelock_attempts = _positive_int(livelock_attempts, "livelock_attempts")
    livelock_seconds = _seconds(livelock_seconds, "livelock_seconds")
    stop_stalls = _flag(stop_stalls, "stop_stalls")
    if os.path.exists(trace_dir) and not os.path.isdir(trace_dir):
        raise ProbeError("petrsim_probe: trace directory {}: exists and is not a directory".format(
            trace_dir))
    try:
        os.makedirs(trace_dir, exist_ok=True)
    except OSError as e:
        raise ProbeError("petrsim_probe: trace directory {}: cannot create it: {}".format(
            trace_dir, e.strerror)) from None
    if not os.access(trace_dir, os.W_OK | os.X_OK):
        raise ProbeError("petrsim_probe: trace directory {}: not writable".format(trace_dir))
    scenario_bytes = b""
    if scenario is not None:
        scenario_bytes = _read_scenario(os.fspath(scenario))
    probe = Probe(trace_dir, scenario_bytes, os.fspath(scenario) if scenario else "",
                  livelock_attempts, livelock_seconds, backend, stop_stalls)
    probe.loader.install()
    probe.collectives.install()
    probe.install_exit_hooks()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        probe.ensure_open()
    _PROBE = probe
    return probe


def worker_probe(setup):
    """The probe of a DataLoader worker starting (_loader.WorkerSetup, its worker_init_fn): in a
    forked worker, the rank's (inherited with its open trace file); in a spawned or forkserver
    one, which starts without it, a probe of this worker alone that appends to the rank's file.
    None (the worker runs unrecorded, with a warning) if the file cannot be opened."""
    global _PROBE
    probe = _PROBE
    if probe is not None and probe.recorder.fd >= 0:
        return probe
    try:
        probe = Probe(setup.trace_dir, b"", "", setup.livelock_attempts, setup.livelock_seconds,
                      None, setup.stop_stalls)
        probe.recorder.build_id = setup.build_id
        probe.recorder.open_existing(setup.trace_path, setup.rank, setup.world_size)
    except ProbeError as e:
        sys.stderr.write("{} (DataLoader worker not recorded)\n".format(e))
        return None
    _PROBE = probe
    return probe


def uninstall():
    """Stops recording: writes what is open, closes the file, restores what install() wrapped."""
    global _PROBE
    probe = _PROBE
    if probe is None:
        return
    probe.dump("petrsim_probe.uninstall()", clean=True)
    probe.active = False
    probe.loader.uninstall()
    probe.collectives.uninstall()
    probe.datasets.unwrap_all()
    if probe.recorder.fd >= 0:
        os.close(probe.recorder.fd)
        probe.recorder.fd = -1
    _PROBE = None
