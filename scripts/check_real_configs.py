#!/usr/bin/env python3
"""Runs `petrsim import mmdet3d-config` and `petrsim check` over every config of real codebase checkouts
(issue 27): StreamPETR, PETR, BEVFormer, BEVDet, Sparse4D, Far3D, mmdet3d, when a checkout is present.
Nothing of theirs is committed: the results are (docs/research/real_configs_check.md).

Usage:
  scripts/check_real_configs.py [--petrsim build/petrsim] [--infos FILE.pkl] [--gpus N] [--out FILE.md]
      NAME=DIR [NAME=DIR ...]

DIR is a checkout (a git work tree, or a tree extracted with `git archive` holding a file
`.petrsim_commit` with the commit it came from). Every .py under DIR/projects/configs and
DIR/configs is tried, except `_base_` folders. A config whose import stops at "has no `data` dict"
is not a training config and is counted apart. The info files a config names are stood in for by
one synthetic info file (--infos; default petrsim's own tests/data/importers/mini_infos_train.pkl,
made by scripts/make_import_fixtures.py, whose scene-0553 has a half-scene chunk without GT), copied to
each path the import asks for, so every config reaches `check`: the verdict is about the config's
semantics over that data set, not the user's data. The 5 mini scenes hold 10 seq_split_num=2 chunks,
fewer than StreamPETR's infinite sampler needs for 8 GPUs x 2 samples: pass --gpus 1 with them.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MINI_INFOS = os.path.join(ROOT, 'tests', 'data', 'importers', 'mini_infos_train.pkl')


def commit_of(directory):
    marker = os.path.join(directory, '.petrsim_commit')
    if os.path.exists(marker):
        with open(marker) as f:
            return f.read().strip()
    try:
        return subprocess.run(['git', '-C', directory, 'rev-parse', 'HEAD'], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return 'unknown'


def configs_of(directory):
    found = []
    for sub in ('projects/configs', 'configs'):
        base = os.path.join(directory, sub)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d != '_base_')
            for name in sorted(filenames):
                if name.endswith('.py') and name != '__init__.py':
                    found.append(os.path.join(dirpath, name))
    return found


def first_line(text):
    for line in text.splitlines():
        if line.strip():
            line = line.strip()
            return line[len('petrsim: error: '):] if line.startswith('petrsim: error: ') else line
    return ''


def run_one(petrsim, config, work, infos, gpus):
    """(status, detail): status is 'verdict', 'not-train', 'import-error' or 'check-error'."""
    data_root = os.path.join(work, 'data')
    out = os.path.join(work, 'scenario.pb')
    for _ in range(8):
        if os.path.exists(out):
            os.remove(out)
        r = subprocess.run([petrsim, 'import', 'mmdet3d-config', config, '--gpus', str(gpus), '--data-root', data_root,
                            '--quiet', '-o', out], capture_output=True, text=True, timeout=120)
        if r.returncode == 0:
            break
        error = first_line(r.stderr)
        if ': no such info file' in error:
            missing = error.split(': no such info file')[0]
            os.makedirs(os.path.dirname(missing), exist_ok=True)
            shutil.copyfile(infos, missing)
            continue
        if 'has no `data` dict' in error:
            return 'not-train', error
        return 'import-error', error
    else:
        return 'import-error', 'more than 8 info files asked for'
    r = subprocess.run([petrsim, 'check', out], capture_output=True, text=True, timeout=120)
    if r.returncode not in (0, 1):
        return 'check-error', first_line(r.stderr)
    verdict = next((line.strip() for line in r.stdout.splitlines() if line.startswith('verdict:')), '')
    return 'verdict', verdict or f'exit {r.returncode}'


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--petrsim', default=os.path.join(ROOT, 'build', 'petrsim'))
    parser.add_argument('--out', default=None)
    parser.add_argument('--infos', default=MINI_INFOS)
    parser.add_argument('--gpus', type=int, default=1)
    parser.add_argument('codebases', nargs='+', help='NAME=DIR')
    args = parser.parse_args()
    lines = ['| codebase | commit | config | result | detail |', '|---|---|---|---|---|']
    totals = []
    for item in args.codebases:
        name, _, directory = item.partition('=')
        directory = os.path.abspath(directory)
        commit = commit_of(directory)
        counts = {'verdict': 0, 'not-train': 0, 'import-error': 0, 'check-error': 0}
        for config in configs_of(directory):
            with tempfile.TemporaryDirectory() as work:
                status, detail = run_one(args.petrsim, config, work, args.infos, args.gpus)
            counts[status] += 1
            rel = os.path.relpath(config, directory)
            if status != 'not-train':
                lines.append(f'| {name} | {commit[:12]} | {rel} | {status} | {detail.replace("|", "/")} |')
        totals.append(f'- {name} @ {commit}: {counts["verdict"]} reach a verdict, {counts["import-error"]} stop at the '
                      f'import, {counts["check-error"]} at check; {counts["not-train"]} are not training configs')
        print(totals[-1], file=sys.stderr)
    header = f'infos: {os.path.relpath(args.infos, ROOT)}; --gpus {args.gpus}\n\n'
    text = header + '\n'.join(totals) + '\n\n' + '\n'.join(lines) + '\n'
    if args.out:
        with open(args.out, 'w') as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == '__main__':
    main()
