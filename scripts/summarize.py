#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Count host and KUnit results and print the closing line of `make test`.

Usage: summarize.py --cargo LOG [--checks LOG] --kunit JSON [--kunit JSON ...]
                    [--kunit-of JSON SUITE ...]
                    [--guest LOG ...] [--cases LOG ...]
                    --suite NAME [--suite NAME ...]

Every --kunit file is one boot of the kernel; each must have run every suite.
A --kunit-of file is a boot that ran one suite, SUITE, which it must have run.
Every --guest file is a boot's kernel log: each ftrace startup self-test
("Testing ...: PASSED") counts as a case; an oops, BUG, panic, or a warning
other than the one the static key suite triggers on purpose fails the run.
Every --cases file is the log of a boot with user space (scripts/guest-test.sh):
each "@@ case NAME ok" line counts as a passed case, each "@@ case NAME
FAILED..." as a failed one, and a log without "@@ end" as a problem.

Exits non-zero on any failure, on an expected suite that did not run, or on
missing results (a build that failed, a guest that crashed or timed out).
"""
import argparse
import json
import re
import sys


def cargo_counts(path):
    """Sum the `test result:` lines of a cargo test log."""
    passed = failed = skipped = runs = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.search(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored", line)
            if m:
                runs += 1
                passed += int(m.group(1))
                failed += int(m.group(2))
                skipped += int(m.group(3))
    return passed, failed, skipped, runs


def kunit_cases(group, prefix=""):
    """Yield (suite, case, status) for every test case in a kunit.py JSON tree."""
    for case in group.get("test_cases", []):
        yield prefix, case["name"], case["status"]
    for sub in group.get("sub_groups", []):
        yield from kunit_cases(sub, sub["name"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cargo", required=True)
    ap.add_argument("--kunit", action="append", required=True)
    ap.add_argument("--kunit-of", nargs=2, action="append", default=[],
                    metavar=("JSON", "SUITE"))
    ap.add_argument("--checks")
    ap.add_argument("--guest", action="append", default=[])
    ap.add_argument("--cases", action="append", default=[])
    ap.add_argument("--suite", action="append", default=[])
    args = ap.parse_args()
    problems = []

    try:
        hp, hf, hs, runs = cargo_counts(args.cargo)
        if runs == 0:
            problems.append("host tests: no cargo test result found")
    except OSError as e:
        hp = hf = hs = 0
        problems.append(f"host tests: {e}")

    # Lint checks: one "check: NAME: ok|FAILED" line each.
    cp = cf = 0
    if args.checks:
        try:
            with open(args.checks, encoding="utf-8", errors="replace") as f:
                for line in f:
                    if line.startswith("check:"):
                        if line.rstrip().endswith(": ok"):
                            cp += 1
                        else:
                            cf += 1
            if cp + cf == 0:
                problems.append("lint: no check ran")
        except OSError as e:
            problems.append(f"lint: {e}")

    kp = kf = ks = 0
    boots = [(path, args.suite) for path in args.kunit]
    boots += [(path, [suite]) for path, suite in args.kunit_of]
    for path, suites in boots:
        try:
            with open(path, encoding="utf-8") as f:
                tree = json.load(f)
        except (OSError, ValueError) as e:
            problems.append(f"KUnit: no results in {path} ({e}): "
                            "the build failed or the guest crashed")
            continue
        seen = {}
        for suite, case, status in kunit_cases(tree):
            seen[suite] = seen.get(suite, 0) + 1
            if status == "PASS":
                kp += 1
            elif status == "SKIP":
                ks += 1
            else:
                kf += 1
                print(f"KUnit ({path}): {suite}.{case}: {status}")
        for suite in suites:
            if not seen.get(suite):
                problems.append(f"KUnit suite {suite} did not run ({path})")

    # Boot-time self-tests and kernel complaints, from the guest logs.
    gp = gf = 0
    for path in args.guest:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError as e:
            problems.append(f"guest log: {e}")
            continue
        for line in lines:
            if re.search(r"Testing [^:]*: PASSED", line):
                gp += 1
            elif re.search(r"Testing [^:]*:.*FAILED", line):
                gf += 1
                print(f"self-test ({path}): {line.strip()}")
            elif re.search(r"Oops|BUG:|Kernel panic|WARNING:", line):
                gf += 1
                print(f"guest ({path}): {line.strip()}")

    # Tests with user space: "@@ case NAME ok|FAILED...", then "@@ end".
    up = uf = 0
    for path in args.cases:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError as e:
            problems.append(f"user-space tests: {e}")
            continue
        for line in lines:
            m = re.match(r"@@ case (\S+) (.*)$", line)
            if not m:
                continue
            if m.group(2) == "ok":
                up += 1
            else:
                uf += 1
                print(f"user-space test ({path}): {m.group(1)} {m.group(2)}")
        if not any(line.startswith("@@ end ") for line in lines):
            problems.append(f"user-space tests: the guest did not finish ({path})")
        elif up + uf == 0:
            problems.append(f"user-space tests: no case ran ({path})")

    for p in problems:
        print(f"error: {p}")
    print(f"host: {hp} passed, {hf} failed, {hs} skipped; lint: {cp} passed, {cf} failed; "
          f"KUnit: {kp} passed, {kf} failed, {ks} skipped; "
          f"boot self-tests: {gp} passed, {gf} failed; "
          f"user space: {up} passed, {uf} failed")
    failed = hf + cf + kf + gf + uf + len(problems)
    print(f"{hp + cp + kp + gp + up} passed, {failed} failed, {hs + ks} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
