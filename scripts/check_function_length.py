#!/usr/bin/env python3
"""Function length, made mechanical (TIGER_STYLE's 70 lines; ../STYLE.md's habits): every function
of petrsim's own C++ (*.cc, *.h) is at most 70 lines from its signature to its closing brace,
unless scripts/function_length_allow.txt names it with the reason. Test code is outside the rule
(*_test.cc, tests/, props/, bench/, fuzz/ and the pyconfig AST oracle's dumper): a test's table of
cases or its one story reads best whole, and nothing ships it.

A function is found the way clang-format lays it out here: a line that opens a body ending in
"{" whose text before it closes a parameter list ("...) {", "...) const {", "...) -> T {"), not a
control statement, at namespace or class level; its body ends at the first "}" line with the
same indentation. Lambdas count toward the function they are written in. Prints each function
over the limit as FILE:LINE NAME LINES and exits 1 when one is not allowed, or when the allow-list
names a function that is no longer over the limit (so the list only shrinks).

  scripts/check_function_length.py [--limit N] [--list]   (--list: every function over N, exit 0)
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALLOW = os.path.join(ROOT, "scripts", "function_length_allow.txt")
CONTROL = re.compile(r"^\s*(if|for|while|switch|catch|do|else|try|return|case|default)\b|^\s*(\}\s*)?else\b")
SIGNATURE_END = re.compile(r"\)\s*(const)?\s*(noexcept)?\s*(override)?\s*(final)?\s*(->\s*[^{]+)?\s*\{\s*(//.*)?$")
NAME = re.compile(r"([A-Za-z_~][A-Za-z0-9_:<>~]*(?:operator\s*[^\s(]+)?)\s*\(")


def functions(path):
    """(line, name, length) of each function body in `path`."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if SIGNATURE_END.search(line):
            # The signature may start lines above: walk back to the line that opens the parameter list.
            start = i
            depth = line.count(")") - line.count("(")
            while depth > 0 and start > 0:
                start -= 1
                depth += lines[start].count(")") - lines[start].count("(")
            first = lines[start]
            indent = len(first) - len(first.lstrip(" "))
            if indent > 2 or CONTROL.search(first) or "=" in first.split("(")[0]:
                i += 1
                continue
            head = " ".join(l.strip() for l in lines[start:i + 1])
            match = NAME.search(head)
            if match is None or lines[start].lstrip().startswith(("#", "//")):
                i += 1
                continue
            sig_indent = len(lines[start]) - len(lines[start].lstrip(" "))
            end = i + 1
            while end < len(lines) and not (lines[end].startswith(" " * sig_indent + "}") and
                                            (len(lines[end]) == sig_indent + 1 or lines[end][sig_indent + 1] in ";) /")):
                end += 1
            if end < len(lines):
                out.append((start + 1, match.group(1), end - start + 1))
                i = end + 1
                continue
        i += 1
    return out


def sources():
    files = subprocess.run(["git", "ls-files", "*.cc", "*.h"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    test_code = ("tests/", "props/", "bench/", "fuzz/", "formats/pyconfig/ast_dump_main.cc")
    return [f for f in files if not f.endswith("_test.cc") and not f.startswith(test_code)]


def read_allow():
    allowed = {}
    if not os.path.exists(ALLOW):
        return allowed
    with open(ALLOW, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            key, sep, why = line.partition(" -- ")
            if not sep or not why.strip():
                sys.exit(f"{ALLOW}:{n}: expected 'FILE NAME -- why it is longer', got {line!r}")
            allowed[tuple(key.split())] = why.strip()
    return allowed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=70)
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    allowed = read_allow()
    over, seen, bad = [], set(), 0
    for path in sources():
        for line, name, length in functions(os.path.join(ROOT, path)):
            if length > args.limit:
                over.append((length, path, line, name))
    for length, path, line, name in sorted(over, reverse=True):
        key = (path, name)
        if args.list:
            print(f"{path}:{line} {name} {length}")
        elif key in allowed:
            seen.add(key)
        else:
            print(f"function length: {path}:{line} {name} is {length} lines (limit {args.limit}): split it, or "
                  f"name it in scripts/function_length_allow.txt with the reason")
            bad += 1
    if args.list:
        return 0
    for key in sorted(set(allowed) - seen):
        print(f"function length: {ALLOW} names {key[0]} {key[1]}, which is no longer over {args.limit} lines: "
              f"remove it from the list")
        bad += 1
    print(f"function length: {len(over)} function(s) over {args.limit} lines, {len(seen)} allowed, {bad} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
