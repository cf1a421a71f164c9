#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The warnings of a kernel build's log that name a file the series changes.

  build-warnings.py LOG MANIFEST [--touch SRC]

MANIFEST lists those files, one path a line, relative to the source tree
(.jlrs-manifest, written by scripts/apply-overlay.sh). Prints each compiler
or objtool warning of LOG that names one (or, objtool's about vmlinux.o, a
function of the project), with the lines after it that say where (rustc's
"--> file:line"), and exits 1 if there is any. Builds are
incremental: a log shows the warnings of what it rebuilt only, and the next
build of the same directory would not show them again. So with --touch, the
files named (an object's source for objtool's) get the time of now in SRC,
and the next build compiles them again, and warns again, until they are
fixed.
"""

import argparse
import os
import re
import sys


# objtool's warnings about vmlinux.o name a function, not a file: those of
# the project's functions (as scripts/check.sh reads them).
OBJTOOL = re.compile(r"objtool.*(static_key|jump_label_rs|text_poke_batch|ct_work|"
                     r"context_tracking_work|tlb_defer|qpw)")


def warning_blocks(lines, ours, objtool=None):
    """The compiler and objtool warnings of the build log `lines` in which the regular expression
    `ours` finds a file (its last group), or whose first line `objtool` matches: each with the
    lines after it that say where (rustc's "--> file:line"), and the set of files found.
    scripts/series-walk.py reads its prefixes' logs with it too."""
    def warns(line):
        return re.match(r"warning\b(?!: \d+ warnings? emitted)", line) or ": warning: " in line

    out, named = [], set()
    for i, line in enumerate(lines):
        if not warns(line):
            continue
        block = [line]
        if line.startswith("warning"):
            for more in lines[i + 1:i + 5]:
                if warns(more):
                    break
                block.append(more)
        hits = [m.group(m.lastindex) for l in block for m in ours.finditer(l)]
        if hits or (objtool and objtool.search(line)):
            out += block
            named.update(hits)
    return out, named


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("manifest")
    ap.add_argument("--touch", metavar="SRC")
    args = ap.parse_args()
    try:
        with open(args.manifest) as f:
            ours_files = [l.strip() for l in f if l.strip()]
        with open(args.log, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        print(f"build-warnings: {e}", file=sys.stderr)
        return 2
    if not ours_files:
        print(f"build-warnings: {args.manifest} names no file", file=sys.stderr)
        return 2
    # A file of ours, or the object built from one ("dir/name.o" for "dir/name.c").
    names = set(ours_files)
    names |= {os.path.splitext(p)[0] + ".o" for p in ours_files
              if re.search(r"\.(c|S|rs)$", p)}
    ours = re.compile(r"(?:^|[\s/'\"(])(" + "|".join(map(re.escape, sorted(names, key=len,
                                                                          reverse=True)))
                      + r")\b")
    out, named = warning_blocks(lines, ours, OBJTOOL)
    if not out:
        return 0
    print("\n".join(out))
    if args.touch:
        for p in sorted(named):
            srcs = [p] if not p.endswith(".o") else \
                [p[:-2] + ext for ext in (".c", ".S", ".rs")]
            for s in srcs:
                path = os.path.join(args.touch, s)
                if os.path.exists(path):
                    os.utime(path)
    return 1


if __name__ == "__main__":
    sys.exit(main())
