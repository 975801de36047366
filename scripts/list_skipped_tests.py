#!/usr/bin/env python3
"""Lists every skipped test of a ctest run, with why, from ctest's JUnit report
(`ctest --output-junit FILE`; scripts/run_tests.sh writes one and calls this):

  - a ctest test that did not run: skipped by SKIP_RETURN_CODE (a script that exits 77 says why
    on its output: the line that says "skip", else its last line), by GoogleTest's GTEST_SKIP
    (gtest_discover_tests maps "[  SKIPPED ]" to a ctest skip; the reason is GTEST_SKIP's
    message), disabled, or not run for another reason ctest gives;
  - a GoogleTest case skipped inside a ctest test that ran (a test that runs a whole GoogleTest
    binary passes when some of its cases skip): each "[  SKIPPED ]" case with its message.

    scripts/list_skipped_tests.py build/ctest_junit.xml
prints "Skipped tests: none" or "Skipped tests (N):" and one "  NAME: REASON" line each.
Exit status 0, or 2 when the report cannot be read.
"""
import re
import sys
import xml.etree.ElementTree as ET

# GoogleTest prints, for GTEST_SKIP() << "why":
#   path/to/test.cc:84: Skipped
#   why (one or more lines)
#   [  SKIPPED ] Suite.Name (0 ms)
SKIP_HEADER = re.compile(r"^\S.*:\d+: Skipped$")
SKIPPED_CASE = re.compile(r"^\[  SKIPPED \] (\S+) \(\d+ ms\)$")


def gtest_skips(output):
    """(case name, message) of each GoogleTest case the output says was skipped."""
    found = []
    message = None
    for line in output.splitlines():
        if SKIP_HEADER.match(line):
            message = []
            continue
        case = SKIPPED_CASE.match(line)
        if case:
            text = " ".join(part.strip() for part in (message or []) if part.strip())
            found.append((case.group(1), text or "GTEST_SKIP() without a message"))
            message = None
            continue
        if message is not None:
            if line.startswith("[ "):  # another GoogleTest line: the message ended
                message = None
            else:
                message.append(line)
    return found


def script_reason(output, fallback):
    """Why a script skipped: its line that says so, else its last line, else ctest's note."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    said = [line for line in lines if "skip" in line.lower()]
    if said:
        return said[-1]
    if lines:
        return lines[-1]
    return fallback


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        root = ET.parse(sys.argv[1]).getroot()
    except (OSError, ET.ParseError) as error:
        print(f"Skipped tests: unknown (no readable ctest report {sys.argv[1]}: {error})")
        return 2
    skipped = []
    for case in root.iter("testcase"):
        name = case.get("name", "?")
        status = case.get("status", "")
        output = case.findtext("system-out") or ""
        marker = case.find("skipped")
        cases = gtest_skips(output)
        if status == "notrun" or marker is not None:
            note = marker.get("message", "") if marker is not None else ""
            if cases:
                # One ctest test per GoogleTest case (gtest_discover_tests): the case's own name.
                for gtest_name, why in cases:
                    skipped.append((gtest_name, why))
            elif status == "disabled" or note == "Disabled":
                skipped.append((name, "disabled (ctest DISABLED property)"))
            else:
                skipped.append((name, script_reason(output, note or "ctest did not run it")))
        else:
            for gtest_name, why in cases:
                skipped.append((f"{name} / {gtest_name}", why))
    if not skipped:
        print("Skipped tests: none")
        return 0
    print(f"Skipped tests ({len(skipped)}):")
    for name, why in skipped:
        print(f"  {name}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
