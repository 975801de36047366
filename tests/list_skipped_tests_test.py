#!/usr/bin/env python3
"""scripts/list_skipped_tests.py on a ctest JUnit report written here in the shape ctest 3.25
writes (status run / notrun / fail, <skipped message=...>, <system-out>): a GTEST_SKIP case
discovered as its own ctest test, a script that exits 77, a disabled test, a GoogleTest case
skipped inside a passing test, and a run with no skip."""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "list_skipped_tests.py")

GTEST_SKIPPED = """Running main() from gtest_main.cc
[ RUN      ] BackendContract/Nccl.Reductions
/src/tests/backend_test.cc:84: Skipped
this build has no NCCL
[  SKIPPED ] BackendContract/Nccl.Reductions (0 ms)
[  PASSED  ] 0 tests.
[  SKIPPED ] 1 test, listed below:
[  SKIPPED ] BackendContract/Nccl.Reductions
"""

WHOLE_BINARY = """[ RUN      ] Suite.Runs
[       OK ] Suite.Runs (1 ms)
[ RUN      ] Suite.NeedsAGpu
/src/tests/gpu_test.cc:12: Skipped
no CUDA device
  (set CUDA_VISIBLE_DEVICES)
[  SKIPPED ] Suite.NeedsAGpu (0 ms)
[ RUN      ] Suite.Bare
/src/tests/gpu_test.cc:20: Skipped

[  SKIPPED ] Suite.Bare (0 ms)
[  PASSED  ] 1 test.
"""


def case(name, status, output, skipped=None):
    marker = f'<skipped message="{skipped}"/>' if skipped is not None else ""
    text = output.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return f'<testcase name="{name}" classname="{name}" time="0.1" status="{status}">{marker}<system-out>{text}</system-out></testcase>'


def run(cases):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "report.xml")
        with open(path, "w", encoding="utf-8") as f:
            f.write('<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="x" tests="1">' + "".join(cases) + "</testsuite>")
        done = subprocess.run([sys.executable, SCRIPT, path], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout


def main():
    out = run(
        [
            case("BackendContract.Reductions&lt;BackendContract/Nccl. # TypeParam = X&gt;", "notrun", GTEST_SKIPPED,
                 "SKIP_REGULAR_EXPRESSION_MATCHED"),
            case("format", "notrun", "skipped: clang-format is version 15; the style is checked with clang-format 14\n",
                 "SKIP_RETURN_CODE=77"),
            case("old_check", "disabled", "", "Disabled"),
            case("gpu_test_all", "run", WHOLE_BINARY),
            case("passes", "run", "[       OK ] A.B (1 ms)\n"),
        ]
    )
    expected = [
        "Skipped tests (5):",
        "  BackendContract/Nccl.Reductions: this build has no NCCL",
        "  format: skipped: clang-format is version 15; the style is checked with clang-format 14",
        "  old_check: disabled (ctest DISABLED property)",
        "  gpu_test_all / Suite.NeedsAGpu: no CUDA device (set CUDA_VISIBLE_DEVICES)",
        "  gpu_test_all / Suite.Bare: GTEST_SKIP() without a message",
    ]
    assert out.splitlines() == expected, out
    assert run([case("passes", "run", "[       OK ] A.B (1 ms)\n")]).strip() == "Skipped tests: none"
    with tempfile.TemporaryDirectory() as tmp:
        missing = subprocess.run([sys.executable, SCRIPT, os.path.join(tmp, "none.xml")], capture_output=True,
                                 text=True, check=False)
        assert missing.returncode == 2 and missing.stdout.startswith("Skipped tests: unknown"), missing.stdout
    print("ok")


if __name__ == "__main__":
    main()
