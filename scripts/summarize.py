#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Count host and KUnit results and print the closing line of `make test`.

Usage: summarize.py --project-code | --lockless-mask-writers
       summarize.py [--cargo LOG] [--checks LOG] --kunit JSON [--kunit JSON ...]
                    [--kunit-of JSON SUITE ...]
                    [--guest LOG ...] [--cases LOG ... --tree DIR]
                    [--suite NAME ...] [--expected FILE --run NAME]

--expected names a TOML file (scripts/expected.toml) that declares what a
run NAME (--run: main for make test, matrix for make test-matrix) must
show: the suites every --kunit boot runs (with --suite's), how many cases
some suites have, how many ftrace self-tests and lint checks pass, and, for
every run, each case that may be skipped, where, and why. A missing suite, a
count that differs and a skip it does not declare each fail the run.

The host tests' cargo log (--cargo) and the lint log (--checks) are
counted when given (make test gives them, make test-matrix does not).
Every --kunit file is one boot of the kernel; each must have run every suite.
A --kunit-of file is a boot that ran one suite, SUITE, which it must have run
(or several, named in SUITE with commas).
Every --guest file is a boot's kernel log: each ftrace startup self-test
("Testing ...: PASSED") counts as a case; an oops, BUG (KASAN's and KCSAN's
reports among them), panic, UBSAN report, or a warning that no line "@@
expect-warnings TEST REGEX" of its boot declares (a user-space test's
expect_warnings, or a KUnit case's pr_warn()) fails the run; but a KCSAN report
of a data race between two functions outside this project (PROJECT_CODE,
below), or against the writer of a CPU mask read without a lock by design
(LOCKLESS_MASK_WRITERS), is upstream 7.2's own: noted, not failed.
Every --cases file is the log of boots with user space (scripts/guest-test.sh),
each a KTAP document that the KTAP parser of the kernel tree --tree
(tools/testing/kunit/kunit_parser.py) reads: its cases count as passed,
failed or skipped, and a test failed with its cases passed (init.sh's
verdict on a test that did not report its plan, exited non-zero with no
case failed, or was killed) as a failed case. What KTAP cannot say is
checked here: each boot starts with a line "@@ host boot I/N tests=A,B,...:
ARGS" and must run every test it names, each test must report the cases its
plan announces, the boot must end (the helpers' "# Totals:" line, whose
counts must be the log's), and all N boots must be there. Anything else is
a problem, one line each that names the log and the boot.

Exits non-zero on any failure, on an expected suite that did not run, or on
missing results (a build that failed, a guest that crashed or timed out).
"""
import argparse
import io
import json
import os
import re
import sys
import tomllib

# What this project's code is called in the first line of a KCSAN report,
# "BUG: KCSAN: data-race in A / B" (or "in A", when KCSAN saw only the
# value change and not the other access): its own C functions and every Rust
# symbol (mangled, "_R..."), and the upstream functions its hook patches
# change or its code shares (jump labels, static calls, context tracking,
# the LRU batches of mm/swap.c). A race between two functions outside it
# is upstream 7.2's own, which the KCSAN build's boots can hit whatever
# this project does (in 7.2: d_alloc_parallel() / simple_lookup(),
# __module_address() / do_init_module(), alloc_pid() / copy_process(),
# copy_mm() / percpu_counter_destroy_many(), irq_proc_emit_counts() alone):
# noted, not failed. POSIX ERE, for the guest's grep too.
PROJECT_CODE = (r"text_poke|ct_work|jump_label|static_key|static_call|qpw|lru_add|"
                r"folio_batch|context_tracking| ct_| _R|smp_text_poke|poke_int3")
# The writers of the CPU masks the kernel reads without a lock by design:
# cpu_online() and for_each_online_cpu() read cpu_online_mask while a CPU
# comes or goes, without the hotplug lock that set_cpu_online() runs under
# (upstream's LRU drain walks the online CPUs so). KCSAN reports such a
# read against the writer's marked update; the race is the mask's design,
# not the reader's: noted, not failed, whoever the reader is.
LOCKLESS_MASK_WRITERS = r"(^| )set_cpu_online(\+| |$)"


def upstream_race(line):
    """Whether the line opens a KCSAN report of functions outside this project: two, or one
    for a race whose other side KCSAN did not catch ("A" alone)."""
    m = re.search(r"BUG: KCSAN: data-race in (\S+)(?: / (\S+))?", line)
    if not m:
        return False
    sides = " " + m.group(1) + " " + (m.group(2) or "")
    return not re.search(PROJECT_CODE, sides) or bool(re.search(LOCKLESS_MASK_WRITERS, sides))


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


def user_boots(lines):
    """Split a --cases log into its boots.

    Returns ([[label, tests, lines], ...], boots meant): a boot starts at
    guest-test.sh's "@@ host boot I/N tests=...: ARGS" line; a log without
    one is one boot.
    """
    boots = []
    meant = None
    for line in lines:
        m = re.search(r"@@ host boot (\d+)/(\d+) tests=([^:\s]*):?\s*(.*)$", line)
        if m:
            # The boot before may have ended mid-line (a guest's last words cut short by its
            # reset): what precedes the line is that boot's.
            if m.start() > 0 and boots:
                boots[-1][2].append(line[:m.start()])
            meant = int(m.group(2))
            label = f"boot {m.group(1)}/{m.group(2)}"
            if m.group(4):
                label += f" ({m.group(4)})"
            boots.append([label, [t for t in m.group(3).split(",") if t], []])
            continue
        if not boots:
            boots.append(["boot 1", [], []])
        boots[-1][2].append(line)
    return boots, meant


def boot_lines(lines, k):
    """The lines of the boot whose "@@ host boot" line is lines[k] (k -1: the lines before the
    first such line, a log of one boot without them)."""
    end = next((j for j in range(k + 1, len(lines))
                if re.search(r"@@ host boot \d+/\d+", lines[j])), len(lines))
    return lines[max(k, 0):end]


def user_boot(where, tests, lines, ktap):
    """Count one user-space boot's cases, from its KTAP document as the kernel's parser reads
    it (ktap: tools/testing/kunit/kunit_parser.py, what kunit.py parse runs, whose JSON would
    drop a test's own result, its plan and the diagnostics); and check what KTAP cannot say:
    that the boot ended, ran every test the host meant it to, and each test its plan.

    Returns (passed, failed, skipped, problems, the names of the cases skipped).
    """
    out = io.StringIO()
    boot = ktap.parse_run_tests(lines, ktap.Printer(output=out))
    problems = []
    ran = [t for t in boot.subtests if t.name]

    def why(test):
        """The diagnostic "# NAME: why" before the test's result (which the parser gives the
        cases it found missing, if any)."""
        log = test.log + [l for c in test.subtests if not c.name for l in c.log]
        return next((l.strip()[len(test.name) + 4:] for l in reversed(log)
                     if l.strip().startswith(f"# {test.name}: ")), "")

    for t in ran:
        cases = [c for c in t.subtests if c.name]
        for c in cases:
            if c.status == ktap.TestStatus.FAILURE:
                print(f"user-space test ({where}): {t.name}.{c.name} failed: {why(c)}")
        if why(t) or t.status == ktap.TestStatus.FAILURE and all(c.ok_status() for c in cases):
            # init.sh's verdict: the test did not report its plan, exited non-zero with no case
            # failed, or was killed; or it is not there.
            print(f"user-space test ({where}): {t.name} failed: {why(t)}")
        if t.subtests and t.expected_count is None:
            problems.append(f"{where}: {t.name}: no plan (cases.inc's plan N), "
                            f"cases reported: {len(cases)}")
        elif t.subtests and t.expected_count != len(cases):
            problems.append(f"{where}: {t.name}: reported {len(cases)} of its "
                            f"{t.expected_count} planned cases")
    totals = [l for l in lines if l.startswith("# Totals: ")]
    if not totals:
        cut = [t for t in ran if t.status == ktap.TestStatus.TEST_CRASHED]
        if cut:
            n = sum(bool(c.name) for c in cut[0].subtests)
            at = f"in {cut[0].name}, after {n} of its {cut[0].expected_count} planned cases"
        elif ran:
            at = f"after {ran[-1].name}"
        elif boot.status == ktap.TestStatus.FAILURE_TO_PARSE_TESTS:
            at = "before user space started"
        else:
            at = "before any test ran"
        problems.append(f"{where}: no '# Totals:' line: the guest crashed, hung or timed "
                        f"out {at}")
    else:
        missing = [t for t in tests if t not in [r.name for r in ran]]
        if missing:
            problems.append(f"{where}: {', '.join(missing)} never ran")
        failed = sum(not t.ok_status() for t in ran)
        if f" pass:{len(ran) - failed} fail:{failed} " not in totals[-1]:
            problems.append(f"{where}: the guest's '{totals[-1]}', and the log holds "
                            f"{len(ran) - failed} tests passed, {failed} failed")
        if not problems:
            # What else the kernel's parser finds wrong with the document.
            problems += [f"{where}: KTAP: {e}"
                         for e in re.findall(r"\[ERROR\] Test: (.*)", out.getvalue())]
    skipped = [c.name for t in ran for c in t.subtests if c.status == ktap.TestStatus.SKIPPED]
    c = boot.counts
    return c.passed, c.failed + c.crashed, c.skipped, problems, skipped


def main():
    if sys.argv[1:] == ["--project-code"]:
        # For the guest's own check of the kernel log
        # (scripts/guest-test/cases.inc).
        print(PROJECT_CODE)
        return 0
    if sys.argv[1:] == ["--lockless-mask-writers"]:
        # The same check's exception (scripts/guest-test/cases.inc).
        print(LOCKLESS_MASK_WRITERS)
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--cargo")
    ap.add_argument("--kunit", action="append", default=[])
    ap.add_argument("--kunit-of", nargs=2, action="append", default=[],
                    metavar=("JSON", "SUITE"))
    ap.add_argument("--checks")
    ap.add_argument("--guest", action="append", default=[])
    ap.add_argument("--cases", action="append", default=[])
    ap.add_argument("--tree")
    ap.add_argument("--suite", action="append", default=[])
    ap.add_argument("--expected")
    ap.add_argument("--run")
    args = ap.parse_args()
    problems = []

    # What the run declares it must show.
    expect, skips = {}, []
    if args.expected:
        try:
            with open(args.expected, "rb") as f:
                declared = tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError) as e:
            print(f"error: {args.expected}: {e}")
            return 1
        if args.run not in declared:
            print(f"error: {args.expected} declares no run '{args.run}'")
            return 1
        expect = declared[args.run]
        args.suite += [s for s in expect.get("suites", []) if s not in args.suite]
        skips = declared.get("skip", [])
        for d in skips:
            if not (d.get("case") and d.get("where") and d.get("reason")):
                print(f"error: {args.expected}: a skip without case, where or reason: {d}")
                return 1

    def undeclared_skip(name, where):
        """Whether no [[skip]] of the declarations allows case `name` to be skipped in
        `where` (a log's path, and a user-space boot's label)."""
        return args.expected and not any(
            d["case"] == name and re.search(d["where"], where) for d in skips)

    hp = hf = hs = 0
    if args.cargo:
        try:
            hp, hf, hs, runs = cargo_counts(args.cargo)
            if runs == 0:
                problems.append("host tests: no cargo test result found")
        except OSError as e:
            problems.append(f"host tests: {e}")
    if not args.kunit and not args.kunit_of:
        problems.append("no KUnit results given (--kunit or --kunit-of)")

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
    boots += [(path, suite.split(",")) for path, suite in args.kunit_of]
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
                if undeclared_skip(f"{suite}.{case}", path):
                    problems.append(f"KUnit ({path}): {suite}.{case} skipped, and "
                                    f"{args.expected} does not declare that skip")
            else:
                kf += 1
                print(f"KUnit ({path}): {suite}.{case}: {status}")
        for suite in suites:
            if not seen.get(suite):
                problems.append(f"KUnit suite {suite} did not run ({path})")
        for suite, n in expect.get("cases", {}).items():
            if seen.get(suite) and seen[suite] != n:
                problems.append(f"KUnit suite {suite} ran {seen[suite]} cases, "
                                f"{args.expected} declares {n} ({path})")

    # Boot-time self-tests and kernel complaints, from the guest logs.
    gp = gf = selftests = 0
    for path in args.guest:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError as e:
            problems.append(f"guest log: {e}")
            continue
        # A test that warns on purpose declares it, for its boot ("@@ expect-warnings TEST
        # REGEX", cases.inc's expect_warnings): a "WARNING:" line matching REGEX there is
        # expected. Each "@@ host boot" line starts a boot.
        expected = []
        on_purpose = 0
        for k, line in enumerate(lines):
            if re.search(r"@@ host boot \d+/\d+", line):
                expected = [re.compile(m.group(1))
                            for m in (re.match(r"@@ expect-warnings \S+ (.+)$", l)
                                      for l in boot_lines(lines, k)) if m]
            elif k == 0:
                expected = [re.compile(m.group(1))
                            for m in (re.match(r"@@ expect-warnings \S+ (.+)$", l)
                                      for l in boot_lines(lines, -1)) if m]
            if line.startswith("# kmsg ") and re.search(r"Testing [^:]*:", line):
                # The kernel log, printed again by the guest: counted on the console.
                pass
            elif re.search(r"Testing [^:]*: PASSED", line):
                gp += 1
                selftests += 1
            elif re.search(r"Testing [^:]*:.*FAILED", line):
                gf += 1
                selftests += 1
                print(f"self-test ({path}): {line.strip()}")
            elif upstream_race(line):
                print(f"note: guest ({path}): upstream's data race: {line.strip()}")
            elif "WARNING:" in line and any(r.search(line) for r in expected):
                on_purpose += 1
            elif re.search(r"Oops|BUG:|Kernel panic|WARNING:|UBSAN:", line):
                gf += 1
                print(f"guest ({path}): {line.strip()}")
            elif re.match(r"(/init|/stop\.sh|/tests/\S+|sh): (line \d+: |can't )", line):
                # The guest's shell: a command its init or a test does not have, a file it
                # writes that is not there (a redirection's error, which no 2>/dev/null
                # after it hides), a syntax error.
                gf += 1
                print(f"guest ({path}): the guest's shell: {line.strip()}")
        if on_purpose:
            print(f"note: guest ({path}): {on_purpose} warnings the tests caused on purpose, "
                  "each of a kind its test declared")

    # Tests with user space: each boot's KTAP document.
    up = uf = us = 0
    if args.cases:
        if not args.tree:
            print("error: --cases needs --tree, the kernel tree whose KTAP parser reads them")
            return 1
        sys.path.insert(0, os.path.join(args.tree, "tools", "testing", "kunit"))
        import kunit_parser
    for path in args.cases:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError as e:
            problems.append(f"user-space tests: {e}")
            continue
        boots, meant = user_boots(lines)
        cases = 0
        for label, tests, blines in boots:
            p, f, s, bp, names = user_boot(f"{path}, {label}", tests, blines, kunit_parser)
            up, uf, us, cases = up + p, uf + f, us + s, cases + p + f + s
            problems += [f"user-space tests, {b}" for b in bp]
            problems += [f"user-space tests, {path}, {label}: {n} skipped, and "
                         f"{args.expected} does not declare that skip"
                         for n in names if undeclared_skip(n, f"{path} {label}")]
        for i in range(len(boots), meant or 0):
            problems.append(f"user-space tests, {path}, boot {i + 1}/{meant}: "
                            "did not run (guest-test.sh stopped before it)")
        if cases == 0:
            problems.append(f"user-space tests: no case ran ({path})")

    if "selftests" in expect and selftests != expect["selftests"]:
        problems.append(f"{selftests} ftrace startup self-tests ran, {args.expected} "
                        f"declares {expect['selftests']}")
    if "checks" in expect and cp + cf != expect["checks"]:
        problems.append(f"{cp + cf} lint checks ran, {args.expected} declares {expect['checks']}")

    for p in problems:
        print(f"error: {p}")
    print(f"host: {hp} passed, {hf} failed, {hs} skipped; lint: {cp} passed, {cf} failed; "
          f"KUnit: {kp} passed, {kf} failed, {ks} skipped; "
          f"boot self-tests: {gp} passed, {gf} failed; "
          f"user space: {up} passed, {uf} failed, {us} skipped")
    failed = hf + cf + kf + gf + uf + len(problems)
    print(f"{hp + cp + kp + gp + up} passed, {failed} failed, {hs + ks + us} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
