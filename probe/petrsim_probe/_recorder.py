"""One process's recorder: buffers encoded TraceEvents and appends them to its rank's file.

Every process of a rank (the main process and its DataLoader workers) appends to the same
`rank_<r>.pbtrace`, opened by the main process with O_APPEND before the workers start (a forked
worker inherits the descriptor, a spawned or forkserver one opens the file to append): each
flush is one write() of whole length-delimited messages, so the processes' records never
interleave inside a message and a killed process leaves a readable prefix. The main process
writes the header when it opens the file (the rank is known then). What is still open when the
process ends (collectives issued and not completed, a getitem a worker is still in) is recorded
by `dump()` with completed=false: at exit, on an uncaught exception, on SIGTERM and when the
livelock watchdog stops the job.

Thread safety: record() and flush() take one lock (the signal thread may dump while the main
thread records; a worker's stall watcher records beside its main thread), reentrant: a SIGTERM
handler records on the thread it interrupted, which may hold it (the handler then ends the
process, so the interrupted write never resumes). Open collectives are a dict keyed by a token from itertools.count: single dict
operations, atomic under the GIL, need no lock.

Asynchronous collectives (DDP's gradient buckets, `async_op=True`) are not given a done-callback:
a Python callback runs on Gloo's (or NCCL's) thread and must take the GIL there, and while it
waits for the main thread to let go, that thread runs no other collective (one no-op callback
per bucket cost the reference job's 2-rank DDP step ~0.5 ms: bench/probe_overhead.py --micro).
Instead the main thread polls their Work (`is_completed()`, no GIL hand-over; for NCCL it reads
the CUDA events, so a collective enqueued but not yet run is not taken for done) wherever it
passes through the probe: the next collective it or DDP issues, the end of every backward pass
(DDP's reducer waits there for all its buckets), each batch, the dump. So an asynchronous
collective's end_ns is when the probe first saw it complete: an upper bound, for DDP's buckets
at most the end of the backward pass that waited for them.
"""

import itertools
import os
import threading
import time

from . import wire

now_ns = time.monotonic_ns  # CLOCK_MONOTONIC, the clock std::chrono::steady_clock reads on Linux


class ProbeError(RuntimeError):
    """Bad use of the probe (a bad trace directory, bad bounds): says what to change."""


class Recorder:
    FLUSH_BYTES = 1 << 16

    def __init__(self, trace_dir, build_id, scenario=b"", scenario_path=""):
        self.trace_dir = trace_dir
        self.build_id = build_id
        self.scenario = scenario
        self.scenario_path = scenario_path
        self.lock = threading.RLock()  # (a signal handler may record while its thread holds it)
        self.buf = bytearray()
        self.fd = -1
        self.path = None
        self.rank = None
        self.world_size = None
        self.role = -1  # -1: the rank's main process; >= 0: DataLoader worker id
        self.owner_pid = os.getpid()
        self.write_error = None
        # Open collectives: token -> (process_group, seq, op, numel, dtype, start_ns, iteration,
        # worker, text). Recorded with completed=false by dump().
        self.pending = {}
        self._tokens = itertools.count()
        self.last_token = -1  # the newest token handed out
        # (token, Work, settles) of asynchronous collectives not yet seen complete; settles:
        # a DDP gradient bucket on CPU, which the reducer has waited for when backward returns
        self.in_flight = []
        self.dumped = False

    # -- the file -------------------------------------------------------------------------------

    def open(self, rank, world_size, backend):
        """Creates rank_<rank>.pbtrace (truncating an older one) and writes its header."""
        if self.fd >= 0:
            return
        if not (0 <= rank < world_size):
            raise ProbeError("petrsim_probe: rank {} is not in [0, world_size {})".format(
                rank, world_size))
        self.rank, self.world_size = rank, world_size
        self.path = os.path.join(self.trace_dir, "rank_{}.pbtrace".format(rank))
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        except OSError as e:
            raise ProbeError("petrsim_probe: {}: cannot open for writing: {}".format(
                self.path, e.strerror)) from None
        seed = 0
        header = wire.encode_header(rank, world_size, backend, self.build_id, self.scenario,
                                    self.scenario_path, seed)
        try:
            os.write(fd, wire.delimited(header))
        except OSError as e:
            os.close(fd)
            raise ProbeError("petrsim_probe: {}: write error: {}".format(self.path, e.strerror)) \
                from None
        os.set_inheritable(fd, False)  # forked workers inherit it anyway; exec'd programs do not
        self.fd = fd

    def open_existing(self, path, rank, world_size):
        """In a spawned or forkserver DataLoader worker: appends to the rank's file, which its main
        process opened and headed (whole messages, O_APPEND, as a forked worker writes)."""
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        except OSError as e:
            raise ProbeError("petrsim_probe: {}: cannot open for appending: {}".format(
                path, e.strerror)) from None
        self.path, self.rank, self.world_size = path, rank, world_size
        self.owner_pid = os.getpid()
        self.fd = fd

    def after_fork_in_worker(self, worker_id):
        """In a forked DataLoader worker: drop what the main process had buffered or open."""
        self.lock = threading.RLock()  # (a signal handler may record while its thread holds it)
        self.buf = bytearray()
        self.pending = {}
        self.in_flight = []
        self.role = worker_id
        self.owner_pid = os.getpid()
        self.dumped = False

    # -- records --------------------------------------------------------------------------------

    def record(self, message):
        with self.lock:
            self.buf += wire.delimited(message)
            if len(self.buf) >= self.FLUSH_BYTES and self.fd >= 0:
                self._flush_locked()

    def event(self, kind, start_ns, end_ns, **fields):
        self.record(wire.encode_event(kind, start_ns, end_ns, **fields))

    def flush(self):
        if self.in_flight:
            self.poll_in_flight()
        with self.lock:
            self._flush_locked()

    def _flush_locked(self):
        if self.fd < 0 or not self.buf or self.write_error is not None:
            return
        data = bytes(self.buf)
        self.buf.clear()
        try:
            # One write() of whole messages: O_APPEND keeps the processes' writes apart.
            view = memoryview(data)
            while view:
                n = os.write(self.fd, view)
                view = view[n:]
        except OSError as e:
            self.write_error = "{}: write error: {}".format(self.path, e.strerror)

    # -- open collectives -----------------------------------------------------------------------

    def open_collective(self, info):
        token = self.last_token = next(self._tokens)
        self.pending[token] = info
        return token

    def close_collective(self, token):
        return self.pending.pop(token, None)

    def record_collective(self, info, end_ns, completed=True):
        group, seq, op, numel, dtype, start_ns, iteration, worker, text = info
        self.record(wire.encode_event(wire.COLLECTIVE, start_ns, end_ns, worker=worker,
                                      iteration=iteration, process_group=group, seq=seq, op=op,
                                      numel=numel, dtype=dtype, completed=completed, text=text))

    def add_in_flight(self, token, work, settles=False):
        """An asynchronous collective issued: recorded when a poll sees its Work completed."""
        if len(self.in_flight) >= 64:  # a job that never passes a poll point: keep it short
            self.poll_in_flight()
        self.in_flight.append((token, work, settles))

    def poll_in_flight(self, backward_since=None):
        """Records the asynchronous collectives whose Work has completed (completed=false where
        it failed), with end_ns = now; keeps the others. backward_since: a backward pass has just
        returned, having issued the collectives with tokens above this one; DDP's reducer has
        waited for the future of each CPU bucket it issued, and Gloo completes that future a
        moment before it marks the Work completed: wait for the Work (at most that moment) so
        that the bucket ends within its backward pass. (Never a bucket of an earlier pass that
        raised: nothing waited for that one, and its peer may never come.)"""
        in_flight = self.in_flight
        if not in_flight:
            return
        now = now_ns()
        for item in list(in_flight):
            token, work, settles = item
            try:
                done = work.is_completed()
            except Exception:  # noqa: BLE001 - a Work that cannot say: count it done
                done = True
            if not done and not (settles and backward_since is not None and
                                 token > backward_since):
                continue
            try:  # (DDP on CUDA issues from autograd's device threads: remove, never reassign)
                in_flight.remove(item)
            except ValueError:
                continue  # another thread's poll (a dump) took it
            info = self.pending.pop(token, None)
            if info is None:
                continue
            ok = True
            try:
                work.wait()  # completed: returns at once (settling: Gloo's moment), or raises
            except BaseException:  # noqa: BLE001 - the collective failed
                ok = False
            self.record_collective(info, now if done else now_ns(), completed=ok)

    def dump_pending_collectives(self, end_ns):
        self.poll_in_flight()
        tokens = list(self.pending)
        items = [info for info in (self.pending.pop(t, None) for t in tokens) if info is not None]
        items.sort(key=lambda info: info[5])
        for info in items:
            self.record_collective(info, end_ns, completed=False)
