"""Shared pieces of the probe's tests: arguments, launching the reference job under torchrun,
reading the probe's traces, running petrsim. Standard library only; the traces are read with
the probe's own wire decoder (petrsim diagnose/replay reading the same files is the check of the
format itself)."""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PROBE_DIR = os.path.join(REPO, "probe")
JOB = os.path.join(HERE, "reference_job.py")
STALL_JOB = os.path.join(HERE, "stall_job.py")
SCENARIO = os.path.join(HERE, "reference_job.pbtxt")
PLANTED = os.path.join(HERE, "reference_job_planted.pbtxt")
SKIP = 77

sys.path.insert(0, PROBE_DIR)
from petrsim_probe import wire  # noqa: E402

KIND_NAMES = {v: k for k, v in vars(wire).items() if k.isupper() and isinstance(v, int)
              and k not in ("TRACE_FORMAT_VERSION",)}
OP_NAMES = {v: k for k, v in wire.OPS.items()}
DTYPE_NAMES = {v: k for k, v in wire.DTYPES.items()}


class Failure(Exception):
    pass


def parse_args(description):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--petrsim", default=os.path.join(REPO, "build", "petrsim"),
                        help="the petrsim binary (default build/petrsim)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--nproc", type=int, default=2, help="ranks (2 to 4)")
    args = parser.parse_args()
    args.petrsim = os.path.abspath(args.petrsim)
    if not os.access(args.petrsim, os.X_OK):
        print("FAIL: petrsim binary {} not found (build it, or pass --petrsim)".format(args.petrsim),
              file=sys.stderr)
        sys.exit(1)
    return args


def check_torch():
    try:
        import torch  # noqa: F401
        import torch.distributed as dist
    except ImportError as e:
        print("SKIP: cannot import torch ({})".format(e), file=sys.stderr)
        sys.exit(SKIP)
    if not dist.is_available() or not dist.is_gloo_available():
        print("SKIP: torch has no torch.distributed with Gloo", file=sys.stderr)
        sys.exit(SKIP)


def run_test(name, body):
    """Runs body(args, tmp) and exits 0 (pass) or 1 (fail, with the message)."""
    args = parse_args(name)
    check_torch()
    tmp = tempfile.mkdtemp(prefix="petrsim_probe_test_")
    ok = False
    try:
        body(args, tmp)
        ok = True
        print("PASS: {}".format(name))
    except Failure as e:
        print("FAIL: {}: {}".format(name, e), file=sys.stderr)
    finally:
        if args.keep or not ok:
            print("(files kept in {})".format(tmp), file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(0 if ok else 1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(command, world_size, env, timeout_s, name):
    """Runs `command` once per rank without torchrun (RANK, WORLD_SIZE, MASTER_ADDR/PORT in the
    environment, over `env`) and waits for all; a rank past `timeout_s` kills them all and
    fails. Returns [(exit code, output)] by rank."""
    base = dict(env, WORLD_SIZE=str(world_size), MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1")
    procs = [subprocess.Popen(command, env=dict(base, RANK=str(rank)), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT) for rank in range(world_size)]
    results = []
    for rank, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            for q in procs:
                q.wait()
            raise Failure("{}: rank {} did not finish within {} s".format(name, rank, timeout_s))
        results.append((p.returncode, out.decode(errors="replace")))
    return results


def torchrun_command(nproc, port, log_dir):
    """torchrun as users run it (Debian's 1.13 under Python 3.11 needs --redirects 2 --tee 2)."""
    exe = shutil.which("torchrun")
    base = [exe] if exe else [sys.executable, "-m", "torch.distributed.run"]
    return base + ["--nproc_per_node", str(nproc), "--master_addr", "127.0.0.1",
                   "--master_port", str(port), "--redirects", "2", "--tee", "2",
                   "--log_dir", log_dir, "--max_restarts", "0"]


class Job:
    """A torchrun job started in its own session (start_job): stop() kills the whole session,
    orphaned DataLoader workers included, and returns the job's output."""

    def __init__(self, tmp, job_args, nproc=2, probe_module_args=None, name="job", script=JOB):
        log_dir = os.path.join(tmp, name + "_logs")
        self.name = name
        self.command = torchrun_command(nproc, free_port(), log_dir)
        if probe_module_args is not None:
            self.command += ["-m", "petrsim_probe"] + probe_module_args + ["--", script] + job_args
        else:
            self.command += [script] + job_args
        env = dict(os.environ)
        env["PYTHONPATH"] = PROBE_DIR + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH")
                                         else "")
        env["OMP_NUM_THREADS"] = "1"
        self.start = time.monotonic()
        self.log_path = os.path.join(tmp, name + ".log")
        # Its own session: a rank killed while a DataLoader worker spins leaves that worker
        # orphaned (it never returns to the loop that would see its parent gone); the whole
        # session is killed when torchrun ends. The output goes to a file, which orphans cannot
        # hold open.
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(self.command, cwd=REPO, env=env, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        self.code = None

    def wait(self, timeout_s):
        """torchrun's exit code, or None if it is still running after timeout_s."""
        try:
            self.code = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
        return self.code

    def rank_pids(self):
        """{rank: pid} of the ranks' main processes (torchrun's children carrying RANK)."""
        pids = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open("/proc/{}/stat".format(entry)) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                if ppid != self.process.pid:
                    continue
                with open("/proc/{}/environ".format(entry), "rb") as f:
                    env = f.read().split(b"\0")
            except (OSError, IndexError, ValueError):
                continue
            for item in env:
                if item.startswith(b"RANK="):
                    pids[int(item[5:])] = int(entry)
        return pids

    def output(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self):
        """Kills the session (whatever is left of it) and returns the output."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()
        return self.output()


def start_job(tmp, job_args, nproc=2, probe_module_args=None, name="job", script=JOB):
    """Starts the reference job (or `script`) under torchrun and returns its Job (call job.stop()
    in a finally)."""
    return Job(tmp, job_args, nproc, probe_module_args, name, script)


def launch(tmp, job_args, nproc=2, probe_module_args=None, timeout_s=50, name="job", script=JOB):
    """Runs the reference job (or `script`) under torchrun. probe_module_args: run it through
    `-m petrsim_probe ARGS --` instead of as a script. Returns (exit code, output, seconds)."""
    job = start_job(tmp, job_args, nproc, probe_module_args, name, script)
    try:
        code = job.wait(timeout_s)
    finally:
        output = job.stop()
    if code is None:
        raise Failure("{} did not end within {} s: {}\n{}".format(
            name, timeout_s, " ".join(job.command), output[-3000:]))
    return code, output, time.monotonic() - job.start


def read_traces(trace_dir, world_size):
    traces = {}
    for r in range(world_size):
        path = os.path.join(trace_dir, "rank_{}.pbtrace".format(r))
        if not os.path.exists(path):
            raise Failure("{}: missing (the probe wrote no trace for rank {})".format(path, r))
        header, events, error = wire.read_rank_file(path)
        if error:
            raise Failure("{}: cut short: {}".format(path, error))
        if header["rank"] != r or header["world_size"] != world_size:
            raise Failure("{}: header says rank {} of {}".format(path, header["rank"],
                                                                header["world_size"]))
        traces[r] = (header, events)
    return traces


def petrsim(args, *command, expect=(0,), timeout_s=60):
    result = subprocess.run([args.petrsim] + list(command), cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, timeout=timeout_s)
    out = result.stdout.decode(errors="replace")
    if expect is not None and result.returncode not in expect:
        raise Failure("petrsim {} exited {}:\n{}{}".format(
            " ".join(command), result.returncode, out[-3000:],
            result.stderr.decode(errors="replace")[-3000:]))
    return result.returncode, out, result.stderr.decode(errors="replace")


def petrsim_json(args, *command, expect=(0,)):
    _, out, _ = petrsim(args, *command, expect=expect)
    try:
        return json.loads(out)
    except ValueError as e:
        raise Failure("petrsim {}: not JSON ({}): {}".format(" ".join(command), e, out[:500]))


def job_iterations():
    with open(SCENARIO) as f:
        for line in f:
            if line.startswith("job {"):
                return int(line.split("iterations:")[1].split()[0])
    raise Failure("{}: no job line".format(SCENARIO))


def sim_trace_of(args, tmp, scenario):
    """A petrsim simulator trace of `scenario`: its header holds the scenario in binary, which the
    probe embeds in its own headers (install(scenario=DIR))."""
    out = os.path.join(tmp, "sim_trace")
    petrsim(args, scenario, "--trace", out, "--quiet", expect=None)
    if not os.path.exists(os.path.join(out, "rank_0.pbtrace")):
        raise Failure("petrsim {} --trace {} wrote no rank_0.pbtrace".format(scenario, out))
    return out
