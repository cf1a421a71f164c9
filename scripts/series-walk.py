#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Builds every prefix of the series, the commits base..HEAD of --work (scripts/series.sh).

  series-walk.py --work DIR --src DIR --build DIR --seed DIR [--make-opt OPT]...

They are built in the tested tree --src, which is the whole series, from a copy of --seed (a
build of --src): the walk goes from the last patch to the first, each step rewriting only the
files that patch changes and rebuilding only what they reach, each with the seed's .config
after olddefconfig drops what the prefix does not define yet. A patch that changes no file the
build read (its .cmd files name them), no Kconfig, Makefile or build tool, and adds none,
builds as the longer prefix did. A prefix built before with that configuration (the stamps in
BUILD.built) is not built again. The last patch is built too, every .c, .S and .rs file the
series changes touched first, so that each is compiled once in that configuration: a compiler
or objtool warning that names a file the series changes fails the prefix whose build prints it.
Every file of --src the walk rewrites or touches is put back, content, mode and time. Dies
naming the first patch that does not build, or builds with such a warning.
"""

import argparse
import hashlib
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import time


def die(msg):
    print(f"series: FAILED: {msg}", flush=True)
    sys.exit(1)


def git(work, *args):
    r = subprocess.run(["git", "-C", work, *args], text=True, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if r.returncode:
        die(f"git {' '.join(args[:3])}: {r.stderr.strip()[-600:]}")
    return r.stdout


def warnings(log, ours):
    """The warnings of the build log `log` that name a file of the regular expression `ours`:
    each with the lines after it that say where (scripts/build-warnings.py)."""
    spec = importlib.util.spec_from_file_location(
        "build_warnings", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                       "build-warnings.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with open(log, errors="replace") as f:
        return mod.warning_blocks(f.read().splitlines(), ours)[0]


def build_reads(build, src):
    """The files of `src`, relative to it, that the .cmd files of `build` name."""
    reads = set()
    prefix = src.rstrip("/") + "/"
    for root, _, files in os.walk(build):
        for name in files:
            if name.startswith(".") and name.endswith(".cmd"):
                with open(os.path.join(root, name), errors="replace") as f:
                    reads |= {w.strip(":\\")[len(prefix):] for w in f.read().split()
                              if w.strip(":\\").startswith(prefix)}
    return reads


def main():
    ap = argparse.ArgumentParser()
    for a in ("work", "src", "build", "seed"):
        ap.add_argument(f"--{a}", required=True)
    ap.add_argument("--make-opt", action="append", default=[])
    args = ap.parse_args()
    work, src, build = args.work, args.src, args.build
    commits = git(work, "rev-list", "--reverse", "base..HEAD").split()
    tip = commits[-1]
    config = os.path.join(args.seed, ".config")
    with open(config) as f:
        options = sorted(l for l in f.read().splitlines() if l.startswith("CONFIG_"))
    # "w": a stamp of a walk that fails a prefix on its warnings; older ones are not reused.
    key_cfg = hashlib.sha1("\n".join(options).encode()).hexdigest()[:16] + "w"
    stamps = build.rstrip("/") + ".built"
    try:
        with open(stamps) as f:
            built = set(f.read().split())
    except OSError:
        built = set()
    todo = [(i, c, git(work, "rev-parse", c + "^{tree}").strip() + ":" + key_cfg)
            for i, c in enumerate(commits, 1)]
    todo = [t for t in todo if t[2] not in built]
    start = time.time()
    if todo:
        shutil.rmtree(build, ignore_errors=True)
        if subprocess.run(["cp", "-a", args.seed, build]).returncode:
            die(f"cannot copy {args.seed} to {build}")
        shutil.copy(config, build + ".config")
    make = ["make", f"O={build}", "ARCH=x86_64", *args.make_opt]
    saved = {}  # path -> its stat in src, or None if the whole series has no such file
    cur = tip
    # The files the series changes: a warning naming one fails the walk. Its sources are
    # touched once, so that the first prefix built compiles every one of them.
    ours_files = [p for p in git(work, "diff", "--no-renames", "--name-only", "-z", "base",
                                 tip).split("\0") if p]
    ours = re.compile(r"(^|[\s/])(" + "|".join(map(re.escape, ours_files)) + r")\b")
    fresh = bool(todo)
    if fresh:
        now = time.time()
        for path in ours_files:
            dst = os.path.join(src, path)
            if re.search(r"\.(c|S|rs)$", path) and os.path.exists(dst):
                saved[path] = os.stat(dst)
                os.utime(dst, (now, now))

    def goto(c):
        """Makes src the tree of commit c, from the tree of commit cur: the files it changes."""
        changed = [p for p in git(work, "diff", "--no-renames", "--name-only", "-z", cur,
                                  c).split("\0") if p]
        for path in changed:
            dst = os.path.join(src, path)
            if path not in saved:
                saved[path] = os.stat(dst) if os.path.lexists(dst) else None
            blob = subprocess.run(["git", "-C", work, "cat-file", "blob", f"{c}:{path}"],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            if blob.returncode:
                os.remove(dst)
                continue
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst, "wb") as f:
                f.write(blob.stdout)
        return changed

    def stamp(key):
        with open(stamps, "a") as f:
            f.write(key + "\n")

    again = 0
    reads = None
    try:
        for i, c, key in reversed(todo):
            subject = git(work, "log", "-1", "--format=%s", c).strip()
            if reads is None:
                reads = build_reads(build, src)
            changed = goto(c)
            cur = c
            if not fresh and not any(
                    p in reads or re.match(r"(scripts|tools)/|(.*/)?(Kconfig|Makefile|Kbuild)"
                                           r"[^/]*$", p)
                    or not os.path.lexists(os.path.join(src, p)) for p in changed):
                stamp(key)
                print(f"series: patch {i}/{len(commits)} builds (it changes no file the build "
                      f"of patch {i + 1} read): {subject}" if changed else
                      f"series: patch {i}/{len(commits)} builds (the tested tree): {subject}",
                      flush=True)
                continue
            reads = None
            shutil.copy(build + ".config", os.path.join(build, ".config"))
            log = build.rstrip("/") + f"-{i:02d}.log"
            t0 = time.time()
            with open(log, "w") as f:
                r = subprocess.run([*make, "olddefconfig"], cwd=src, stdout=f,
                                   stderr=subprocess.STDOUT)
                if not r.returncode:
                    r = subprocess.run([*make, f"-j{os.cpu_count() or 1}", "vmlinux", "modules"],
                                       cwd=src, stdout=f, stderr=subprocess.STDOUT)
            if r.returncode:
                with open(log, errors="replace") as f:
                    tail = [l for l in f.read().splitlines() if l.strip()][-15:]
                die(f"patch {i}/{len(commits)} does not build on the ones before it: {subject} "
                    f"(log: {log}):\n" + "\n".join(tail))
            warned = warnings(log, ours)
            if warned:
                die(f"patches 1-{i} of {len(commits)} build with a warning naming a file the "
                    f"series changes (log: {log}):\n" + "\n".join(warned[:40]))
            fresh = False
            stamp(key)
            again += 1
            print(f"series: patch {i}/{len(commits)} builds ({time.time() - t0:.0f} s): "
                  f"{subject}", flush=True)
    finally:
        for path, st in saved.items():
            dst = os.path.join(src, path)
            if st is None:
                if os.path.lexists(dst):
                    os.remove(dst)
                continue
            blob = subprocess.run(["git", "-C", work, "cat-file", "blob", f"{tip}:{path}"],
                                  stdout=subprocess.PIPE, check=True)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst, "wb") as f:
                f.write(blob.stdout)
            os.chmod(dst, st.st_mode & 0o7777)
            os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
    print(f"series: every prefix of the {len(commits)} patches builds ({again} built now, "
          f"{len(commits) - again} as before, {time.time() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    # A walk stopped by a signal still puts the tree back.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda n, _: sys.exit(128 + n))
    main()
