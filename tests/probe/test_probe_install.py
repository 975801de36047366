#!/usr/bin/python3
"""The probe as an installable package (probe/pyproject.toml, issue 30 point 4), offline.

In a temporary directory: a venv with the system's site-packages (Debian's python3-torch stays
visible), `pip install --no-index --no-build-isolation` of a copy of probe/ (setuptools builds in
the source tree: the copy keeps probe/ untouched; its __version__ gets a local tag, `+installtest`, so that
what the installed copy writes tells it from the checkout's), then, with PYTHONPATH unset and from
a directory where probe/ is not on the path:
- `import petrsim_probe` in the venv resolves to the venv's site-packages, at that version, which
  the installed metadata (read by setuptools from __init__.py) also says;
- the `petrsim-probe` entry point exists and `petrsim-probe --help` exits 0 with the launcher's
  usage (every flag of `python -m petrsim_probe`);
- the reference job (5 iterations) runs under torchrun through the entry point
  (`torchrun --no_python petrsim-probe --trace-dir T -- reference_job.py`), every rank writes a
  whole trace with a clean exit and the tagged version in its header's build_id, and `petrsim diagnose T` reads them (exit 0, no stuck collective);
- probe/ holds no new file afterwards (no build/, no *.egg-info).
Exit 77 (skipped) without torch with Gloo, venv/ensurepip (python3-venv) or wheel (python3-wheel).
Nothing is fetched (pip --no-index). The temporary directory is removed, pass or fail (unless
--keep; a failure prints the output it needs).

  python3 tests/probe/test_probe_install.py --petrsim build/petrsim [--keep]
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

import probe_testlib as lib
from probe_testlib import Failure, wire

ITERATIONS = 5
TAG = "+installtest"  # PEP 440 local version: the installed copy's __version__


def tree(root):
    """The files and directories under root (__pycache__ aside: ignored by git, and written by
    this test's own import of wire.py)."""
    found = set()
    for parent, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in dirs + files:
            found.add(os.path.relpath(os.path.join(parent, name), root))
    return found


def clean_env():
    """The environment the installed copy runs in: no PYTHONPATH, no pip configuration or index."""
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONPATH" and not k.startswith("PIP_") and k != "VIRTUAL_ENV"}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PYTHONNOUSERSITE="1", OMP_NUM_THREADS="1")
    return env


def run(command, cwd, env, timeout_s=120):
    try:
        r = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise Failure("{} did not end within {} s".format(" ".join(command), timeout_s)) from None
    return r.returncode, r.stdout.decode(errors="replace")


class Skip(Exception):
    pass


def make_venv(tmp, env):
    if subprocess.run([sys.executable, "-c", "import venv, ensurepip"],
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
        raise Skip("{} has no venv/ensurepip (Debian: python3-venv)".format(sys.executable))
    venv = os.path.join(tmp, "venv")
    code, out = run([sys.executable, "-m", "venv", "--system-site-packages", venv], tmp, env)
    if code != 0:
        raise Skip("python3 -m venv --system-site-packages failed (Debian: python3-venv):\n"
                   + out[-2000:])
    python = os.path.join(venv, "bin", "python")
    for module, package in (("pip", "python3-venv"), ("setuptools", "python3-venv"),
                            ("wheel", "python3-wheel")):
        code, out = run([python, "-c", "import " + module], tmp, env)
        if code != 0:
            raise Skip("the venv cannot import {} (Debian: {}):\n{}".format(module, package,
                                                                          out[-1000:]))
    return venv, python


def install(tmp, python, env):
    src = os.path.join(tmp, "src", "probe")
    shutil.copytree(lib.PROBE_DIR, src, ignore=shutil.ignore_patterns(
        "__pycache__", "build", "*.egg-info"))
    init = os.path.join(src, "petrsim_probe", "__init__.py")
    with open(init) as f:
        text = f.read()
    line = '__version__ = "{}"'.format(source_version())
    if line not in text:
        raise Failure("{}: no line `{}`".format(init, line))
    with open(init, "w") as f:
        f.write(text.replace(line, '__version__ = "{}{}"'.format(source_version(), TAG), 1))
    code, out = run([python, "-m", "pip", "install", "--no-index", "--no-build-isolation",
                     "--no-cache-dir", "--disable-pip-version-check", src], tmp, env, 300)
    if code != 0:
        raise Failure("pip install --no-index --no-build-isolation ./probe exited {}:\n{}".format(
            code, out[-3000:]))


def check_import(tmp, venv, python, env):
    code, out = run([python, "-c",
                     "import sys, petrsim_probe\n"
                     "from importlib import metadata\n"
                     "print(petrsim_probe.__file__)\n"
                     "print(petrsim_probe.__version__)\n"
                     "print(metadata.version('petrsim-probe'))\n"
                     "print(not any(p.startswith({!r}) for p in sys.path))\n".format(lib.REPO)],
                    tmp, env)
    if code != 0:
        raise Failure("import petrsim_probe in the venv exited {}:\n{}".format(code, out))
    path, version, meta_version, repo_off_path = out.split()[-4:]
    site = os.path.realpath(os.path.join(venv, "lib"))
    if not os.path.realpath(path).startswith(site + os.sep):
        raise Failure("import petrsim_probe in the venv resolved to {}, expected the installed "
                      "copy under {}".format(path, site))
    if repo_off_path != "True":
        raise Failure("the venv's sys.path holds the checkout {} (PYTHONPATH unset, cwd {})".format(
            lib.REPO, tmp))
    want = source_version() + TAG
    if version != want or meta_version != want:
        raise Failure("installed __version__ {}, metadata version {}; expected {} (the copy's)"
                      .format(version, meta_version, want))
    return path, version


def source_version():
    with open(os.path.join(lib.PROBE_DIR, "petrsim_probe", "__init__.py")) as f:
        for line in f:
            if line.startswith("__version__"):
                return line.split("=", 1)[1].strip().strip("\"'")
    raise Failure("probe/petrsim_probe/__init__.py has no __version__")


def check_help(tmp, venv, env):
    command = os.path.join(venv, "bin", "petrsim-probe")
    if not os.access(command, os.X_OK):
        raise Failure("no petrsim-probe entry point in {}".format(os.path.dirname(command)))
    code, out = run([command, "--help"], tmp, env)
    missing = [flag for flag in ("usage: petrsim-probe", "--trace-dir", "--scenario",
                                 "--livelock-attempts", "--livelock-seconds", "--stop-stalls",
                                 "after `--`") if flag not in out]
    if code != 0 or missing:
        raise Failure("petrsim-probe --help exited {} (expected 0), missing {}:\n{}".format(
            code, missing, out))
    return command


def run_job(args, tmp, command, env):
    trace_dir = os.path.join(tmp, "traces")
    job = lib.torchrun_command(2, lib.free_port(), os.path.join(tmp, "job_logs")) + [
        "--no_python", command, "--trace-dir", trace_dir, "--", lib.JOB,
        "--iterations", str(ITERATIONS)]
    log_path = os.path.join(tmp, "job.log")
    start = time.monotonic()
    with open(log_path, "wb") as log:  # its own session: whatever is left is killed with it
        process = subprocess.Popen(job, cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        code = process.wait(timeout=90)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        try:
            os.killpg(process.pid, 9)
        except ProcessLookupError:
            pass
        process.wait()
    with open(log_path, "rb") as f:
        output = f.read().decode(errors="replace")
    if code != 0:
        raise Failure("{} {}:\n{}".format(" ".join(job), "exited {}".format(code) if code is not None
                                          else "did not end within 90 s", output[-3000:]))
    traces = lib.read_traces(trace_dir, 2)
    for rank, (header, events) in traces.items():
        if not header["build_id"].startswith("petrsim_probe {}{} ".format(source_version(), TAG)):
            raise Failure("rank {}: header build_id {!r}: not written by the installed copy "
                          "(version {}{})".format(rank, header["build_id"], source_version(), TAG))
        exits = [e for e in events if e["kind"] == wire.PROCESS_EXIT and e["worker"] == -1]
        if len(exits) != 1 or exits[0]["text"] != "the process exits":
            raise Failure("rank {}: expected one clean process_exit, found {}".format(rank, exits))
        iterations = sorted(e["iteration"] for e in events if e["kind"] == wire.ITERATION)
        if iterations != list(range(ITERATIONS)):
            raise Failure("rank {}: iteration events {}, expected 0..{}".format(
                rank, iterations, ITERATIONS - 1))
    _, text, _ = lib.petrsim(args, "diagnose", trace_dir, expect=(0,))
    if "2 ranks" not in text or "no stuck collective" not in text:
        raise Failure("petrsim diagnose on the installed probe's traces:\n" + text)
    return time.monotonic() - start


def body(args, tmp):
    env = clean_env()
    venv, python = make_venv(tmp, env)
    install(tmp, python, env)
    path, version = check_import(tmp, venv, python, env)
    command = check_help(tmp, venv, env)
    seconds = run_job(args, tmp, command, env)
    print("  petrsim-probe {} installed offline into a venv ({}); `petrsim-probe --help` and the "
          "reference job under torchrun --no_python petrsim-probe ({} iterations, {:.0f} s), "
          "read by petrsim diagnose".format(version, os.path.relpath(path, tmp), ITERATIONS,
                                            seconds))


def main():
    name = "probe installed with pip, offline, and run through petrsim-probe"
    args = lib.parse_args(name)
    lib.check_torch()
    before = tree(lib.PROBE_DIR)
    tmp = tempfile.mkdtemp(prefix="petrsim_probe_install_")
    code = 1
    try:
        body(args, tmp)
        added = sorted(tree(lib.PROBE_DIR) - before)
        if added:
            raise Failure("the install wrote into probe/: {}".format(", ".join(added[:10])))
        code = 0
        print("PASS: {}".format(name))
    except Skip as e:
        code = lib.SKIP
        print("SKIP: {}".format(e), file=sys.stderr)
    except Failure as e:
        print("FAIL: {}: {}".format(name, e), file=sys.stderr)
    finally:
        if args.keep:
            print("(files kept in {})".format(tmp), file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
