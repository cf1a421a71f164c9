#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""make series: the overlay as a git format-patch series against the pristine
base tree, and its check.

  series.py --pristine DIR --src DIR --top DIR --work DIR --out DIR [--build CMD]

--work holds a git repository of the pristine tree (made once, tagged
"base"). The series is built there from scripts/series.list: each patch
applies its hook patch (patches/), adds its overlay files and names them in
the MAINTAINERS entry. It is exported with a cover letter to --out, then
checked: applied with git am to the base again, the result compared file by
file with the work tree the tests build (--src, the applied overlay: every
file the series touches must be identical and no other file may differ),
scripts/checkpatch.pl --strict run on every patch (no error, warning or
check), with --bisect-build, every prefix of the series built in turn
(each patch applied on the ones before it, incrementally, in that build
directory, with the configuration --bisect-config after olddefconfig drops
what the prefix does not define yet), and with --build, the command run in
the applied tree. Prints one "series:" line per step; exits non-zero on the
first failure.
"""

import argparse
import difflib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

ENTRY = "JUMP_LABEL_RS (RUST TEXT POKING, STATIC KEYS AND ISOLATION)"
LISTS = ("linux-kernel@vger.kernel.org", "rust-for-linux@vger.kernel.org")
# Every file is named on its own: with a directory pattern, a later patch adding a file there
# would leave MAINTAINERS untouched, and checkpatch asks about every patch that adds files.


def die(msg):
    print(f"series: FAILED: {msg}", flush=True)
    sys.exit(1)


def git(work, *args, env=None, capture=False):
    r = subprocess.run(["git", "-C", work, *args], env=env, text=True,
                       stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    if r.returncode:
        die(f"git {' '.join(args[:3])}: {r.stderr.strip()[-600:]}")
    return r.stdout if capture else None


def read_list(top):
    """The sections of scripts/series.list: (hook or None, message or None, files)."""
    sections = []
    cur = None
    in_msg = False
    with open(os.path.join(top, "scripts/series.list")) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("== "):
                name = line[3:].strip()
                cur = {"hook": None if name == "new" else name, "msg": [], "files": []}
                in_msg = name == "new"
                sections.append(cur)
            elif cur is None or (not in_msg and (not line or line.startswith("#"))):
                continue
            elif in_msg:
                if line == "--":
                    in_msg = False
                else:
                    cur["msg"].append(line)
            else:
                cur["files"].append(line.strip())
    return sections


def pattern_re(pattern):
    """A series.list pattern as a regular expression: "*" matches within a directory, "**/"
    any number of directories, anything else itself."""
    out = ""
    for part in re.split(r"(\*\*/|\*)", pattern):
        out += {"**/": "(?:[^/]+/)*", "*": "[^/]*"}.get(part, re.escape(part))
    return re.compile(out + r"\Z")


def assign_files(sections, have):
    """Gives each overlay file in `have` to its section of scripts/series.list, whose lines are
    paths or patterns: a path names its file, a pattern takes every file no path names that it
    matches, in the first section whose pattern does. Dies, naming them, if a file is in no
    section, a path is named twice or is not in the overlay, or a pattern matches nothing."""
    for s in sections:
        s["parts"] = [f for f in s["files"] if PART.match(f)]
        s["files"] = [f for f in s["files"] if not PART.match(f)]
    paths = [f for s in sections for f in s["files"] if "*" not in f]
    problems = []
    twice = sorted({f for f in paths if paths.count(f) > 1})
    if twice:
        problems.append(f"named twice: {twice}")
    missing = sorted(set(paths) - set(have))
    if missing:
        problems.append(f"not in the overlay: {missing}")
    named = set(paths)
    for s in sections:
        s["patterns"] = [(f, pattern_re(f)) for f in s["files"] if "*" in f]
        s["files"] = [f for f in s["files"] if "*" not in f]
    used = set()
    unplaced = []
    for f in have:
        if f in named:
            continue
        for s in sections:
            hit = next((p for p, r in s["patterns"] if r.match(f)), None)
            if hit:
                s["files"].append(f)
                used.add(hit)
                break
        else:
            unplaced.append(f)
    if unplaced:
        problems.append(f"in no patch (name them, or a pattern of theirs): {unplaced}")
    idle = [p for s in sections for p, _ in s["patterns"] if p not in used]
    if idle:
        problems.append(f"patterns that match no file: {idle}")
    if problems:
        die("scripts/series.list and the overlay differ: " + "; ".join(problems))
    for s in sections:
        s["files"].sort()


# A part of a file that a later patch adds: "PATH /A/" (the one line matching A) or
# "PATH /A/,/B/" (from it to the first line after it matching B), "PATH /A/,$" (to the file's
# end).
PART = re.compile(r"(\S+)\s+/(.*?)/(?:,(/(.*)/|\$))?\Z")


def part_lines(path, lines, spec):
    """The indexes of the lines of `path` (its `lines`) that the part `spec` names. Dies if
    its first pattern does not match exactly one line, or its end matches none after it. In a
    Rust file, the attributes and doc comments just above the first line belong to the part."""
    m = PART.match(spec)
    first, end = m.group(2), m.group(4)
    try:
        a, b = re.compile(first), re.compile(end) if end is not None else None
    except re.error as e:
        die(f"scripts/series.list: '{spec}': {e}")
    hits = [i for i, l in enumerate(lines) if a.search(l)]
    if len(hits) != 1:
        die(f"scripts/series.list: '{spec}': /{first}/ matches {len(hits)} lines of {path}, "
            "not one")
    # A file that ends with a newline splits into its lines and an empty string after them.
    n = len(lines) - 1 if lines and lines[-1] == "" else len(lines)
    start = stop = hits[0]
    # In Rust, an item's attributes and doc comments come with it.
    while path.endswith(".rs") and start > 0 and \
            lines[start - 1].strip().startswith(("#[", "///")):
        start -= 1
    if m.group(3) == "$":
        stop = n - 1
    elif b is not None:
        stop = next((i for i in range(start + 1, n) if b.search(lines[i])), None)
        if stop is None:
            die(f"scripts/series.list: '{spec}': no line of {path} after line {start + 1} "
                f"matches /{end}/")
    return range(start, stop + 1)


def assign_parts(sections, top):
    """For every file some part of which a later patch adds: its lines' patches (the index of
    the section adding each line). Dies, naming it, if a part is of a file no earlier patch
    adds, or two parts share a line."""
    owner = {f: i for i, s in enumerate(sections) for f in s["files"]}
    out = {}
    for i, s in enumerate(sections):
        for spec in s["parts"]:
            path = PART.match(spec).group(1)
            if path not in owner or owner[path] >= i:
                die(f"scripts/series.list: '{spec}': no patch before this one adds {path}")
            if path not in out:
                with open(os.path.join(top, path)) as f:
                    lines = f.read().split("\n")
                out[path] = {"lines": lines, "patch": [owner[path]] * len(lines)}
            o = out[path]
            for n in part_lines(path, o["lines"], spec):
                if o["patch"][n] != owner[path]:
                    die(f"scripts/series.list: '{spec}': line {n + 1} of {path} is in "
                        "another part too")
                o["patch"][n] = i
    return out


def file_at(part, k):
    """A file with parts as patch `k` leaves it: the lines of patches up to `k`. Where a part
    left out sat between two blank lines, or after the file's last blank line, one blank line
    goes too: the file has no two in a row and does not end with one."""
    out = []
    gap = False
    last = len(part["lines"]) - 1
    for i, (line, p) in enumerate(zip(part["lines"], part["patch"])):
        if p > k:
            gap = True
            continue
        if gap and not line.strip() and (not out or not out[-1].strip()) and i < last:
            continue
        if gap and i == last and line == "" and out and not out[-1].strip():
            out.pop()
        gap = False
        out.append(line)
    return "\n".join(out)


def hook_message(path):
    """A hook patch's commit message: its subject and body, without the trailers' '---'."""
    with open(path) as f:
        text = f.read()
    head, _, rest = text.partition("\n\n")
    m = re.search(r"^Subject: (?:\[PATCH[^\]]*\] )?(.*(?:\n .*)*)", head, re.M)
    if not m:
        die(f"{path}: no Subject")
    subject = " ".join(s.strip() for s in m.group(1).split("\n"))
    body = rest.split("\n---\n", 1)[0].rstrip()
    return subject + "\n\n" + body + "\n"


def touched_by(path):
    with open(path) as f:
        return set(re.findall(r"^\+\+\+ b/(\S+)", f.read(), re.M))


def overlay_files(top):
    dirs = ["Documentation", "arch", "include", "init", "kernel", "lib", "mm", "rust",
            "samples", "tools"]
    out = []
    for d in dirs:
        for root, _, files in os.walk(os.path.join(top, d)):
            for name in files:
                if name.endswith((".orig", ".rej", "~")):
                    continue
                out.append(os.path.relpath(os.path.join(root, name), top))
    return sorted(out)


def maintainers(pristine_text, files, author):
    """MAINTAINERS with the entry naming `files`, in its place in alphabetical order."""
    entry = [ENTRY, f"M:\t{author}"] + [f"L:\t{ml}" for ml in LISTS] + ["S:\tMaintained"]
    entry += [f"F:\t{f}" for f in sorted(files)]
    lines = pristine_text.split("\n")
    start = next(i for i, l in enumerate(lines) if l.startswith("3C59X NETWORK DRIVER"))
    titles = [i for i in range(start, len(lines) - 1)
              if lines[i - 1] == "" and re.match(r"^[A-Z0-9]", lines[i])
              and re.match(r"^[A-Z]:\t", lines[i + 1])]
    # Between two entries that sort around it, the first of them with the same initial (the
    # file is not quite sorted).
    places = [b for a, b in zip(titles, titles[1:]) if lines[a] < ENTRY < lines[b]]
    same = [b for b in places if lines[titles[titles.index(b) - 1]][0] == ENTRY[0]]
    if not places:
        die("no place for the MAINTAINERS entry")
    i = (same or places)[0]
    return "\n".join(lines[:i] + entry + [""] + lines[i:])


def base_repo(pristine, work, env):
    if os.path.isdir(os.path.join(work, ".git")):
        git(work, "checkout", "-q", "-f", "--detach", "base", env=env)
        git(work, "clean", "-q", "-f", "-d", "-x", env=env)
        return
    print("series: making the base repository (once)", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(pristine, work, symlinks=True)
    git(work, "init", "-q", env=env)
    git(work, "add", "-f", "-A", env=env)
    git(work, "commit", "-q", "-m", "Linux base", env=env)
    git(work, "tag", "base", env=env)


def main():
    ap = argparse.ArgumentParser()
    for a in ("pristine", "src", "top", "work", "out"):
        ap.add_argument(f"--{a}", required=True)
    ap.add_argument("--version", default="")
    ap.add_argument("--build", default="")
    ap.add_argument("--built", default="",
                    help="what built the tested tree already: the applied tree, found identical "
                         "to it, is not built again")
    ap.add_argument("--bisect-build", default="",
                    help="build every prefix of the series in this build directory")
    ap.add_argument("--bisect-config", default="", help="the .config of those builds")
    ap.add_argument("--bisect-seed", default="",
                    help="a build of --src with that configuration, which those builds start from")
    ap.add_argument("--make-opt", action="append", default=[],
                    help="an option of make for those builds (LLVM=..., RUSTC=...)")
    ap.add_argument("--write-maintainers", default="",
                    help="only write the MAINTAINERS hook patch listing every overlay file")
    args = ap.parse_args()
    top, work = args.top, args.work
    if args.write_maintainers:
        write_maintainers_hook(args.pristine, top, args.write_maintainers)
        return

    author = git(top, "log", "-1", "--format=%an <%ae>", capture=True).strip()
    name, email = re.match(r"(.*) <(.*)>", author).groups()
    env = dict(os.environ, GIT_AUTHOR_NAME=name, GIT_AUTHOR_EMAIL=email,
               GIT_COMMITTER_NAME=name, GIT_COMMITTER_EMAIL=email,
               GIT_AUTHOR_DATE="2026-01-01T00:00:00Z",
               GIT_COMMITTER_DATE="2026-01-01T00:00:00Z")

    sections = read_list(top)
    assign_files(sections, overlay_files(top))
    parts = assign_parts(sections, top)
    with open(os.path.join(top, "patches/series")) as f:
        hooks = [l.strip() for l in f if l.strip() and not l.startswith("#")]
    # The MAINTAINERS hook is what the series builds a patch at a time.
    hooks = [h for h in hooks if touched_by(os.path.join(top, "patches", h)) != {"MAINTAINERS"}]
    used = [s["hook"] for s in sections if s["hook"]]
    if sorted(used) != sorted(hooks) or len(set(used)) != len(used):
        die("scripts/series.list must name every hook patch of patches/series once")

    # 1. The series, one commit per section.
    base_repo(args.pristine, work, env)
    with open(os.path.join(work, "MAINTAINERS")) as f:
        pristine_maint = f.read()
    added = []
    for k, s in enumerate(sections):
        if s["hook"]:
            hook = os.path.join(top, "patches", s["hook"])
            r = subprocess.run(["git", "-C", work, "apply", "--whitespace=nowarn", hook],
                               stderr=subprocess.PIPE, text=True)
            if r.returncode:
                die(f"{s['hook']} does not apply in series order: {r.stderr.strip()}")
            msg = hook_message(hook)
        else:
            msg = "\n".join(s["msg"]).strip() + "\n\nSigned-off-by: " + author + "\n"
        for f in s["files"]:
            os.makedirs(os.path.dirname(os.path.join(work, f)), exist_ok=True)
            shutil.copy2(os.path.join(top, f), os.path.join(work, f))
        for f, part in parts.items():
            if k in part["patch"]:
                with open(os.path.join(work, f), "w") as out:
                    out.write(file_at(part, k))
        if s["files"]:
            added += s["files"]
            with open(os.path.join(work, "MAINTAINERS"), "w") as f:
                f.write(maintainers(pristine_maint, added, author))
        git(work, "add", "-f", "-A", env=env)
        r = subprocess.run(["git", "-C", work, "commit", "-q", "-F", "-"], input=msg,
                           text=True, env=env, stderr=subprocess.PIPE)
        if r.returncode:
            die(f"commit of '{msg.splitlines()[0]}': {r.stderr.strip()}")
    git(work, "branch", "-q", "-f", "series", "HEAD", env=env)

    # 2. Exported, with a cover letter.
    shutil.rmtree(args.out, ignore_errors=True)
    git(work, "format-patch", "-q", "--cover-letter", "--no-signature", "-o", args.out,
        "base..series", env=env)
    patches = sorted(p for p in os.listdir(args.out) if p.endswith(".patch"))
    cover = os.path.join(args.out, patches[0])
    with open(os.path.join(top, "scripts/series-cover.txt")) as f:
        text = f.read()
    if text.startswith("SPDX-License-Identifier:"):
        text = text.split("\n", 1)[1]
    blurb_subject, _, blurb = text.partition("\n\n")
    with open(cover) as f:
        text = f.read()
    text = text.replace("*** SUBJECT HERE ***", blurb_subject.strip())
    text = text.replace("*** BLURB HERE ***", blurb.strip() + "\n" + figures(top))
    with open(cover, "w") as f:
        f.write(text)
    print(f"series: {len(patches) - 1} patches and a cover letter in {args.out}", flush=True)
    sizes = []
    for p in patches[1:]:
        with open(os.path.join(args.out, p), errors="replace") as f:
            added = sum(1 for l in f if l.startswith("+") and not l.startswith("+++"))
        sizes.append((added, p))
    print("series: the largest patches (lines added): " + ", ".join(
        f"{n} {p[:4]}" for n, p in sorted(sizes, reverse=True)[:4]), flush=True)

    # 3. Applied with git am to the base, and compared with the tested tree.
    git(work, "checkout", "-q", "-f", "--detach", "base", env=env)
    git(work, "clean", "-q", "-f", "-d", "-x", env=env)
    r = subprocess.run(["git", "-C", work, "am", "-q", *[os.path.join(args.out, p)
                                                         for p in patches[1:]]],
                       env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode:
        subprocess.run(["git", "-C", work, "am", "--abort"], stderr=subprocess.DEVNULL)
        die(f"git am: {r.stdout.strip()[-600:]}")
    touched = git(work, "diff", "--name-only", "base", "HEAD", capture=True).split()
    with open(os.path.join(args.src, ".jlrs-manifest")) as f:
        manifest = {l.strip() for l in f if l.strip()}
    want = (set(manifest) | {"MAINTAINERS"}) - {".jlrs-manifest"}
    differ = [p for p in sorted(set(touched) | want)
              if not os.path.exists(os.path.join(args.src, p))
              or not os.path.exists(os.path.join(work, p))
              or open(os.path.join(args.src, p), "rb").read()
              != open(os.path.join(work, p), "rb").read()]
    if differ or set(touched) != want:
        die(f"the applied series is not the tested tree (a MAINTAINERS difference: the entry "
            f"of patches/ must list every overlay file): differs {differ}, "
            f"only in the series {sorted(set(touched) - want)}, "
            f"only in the tree {sorted(want - set(touched))}")
    print(f"series: git am on the base: ok, the {len(touched)} files it touches are the "
          "tested tree's", flush=True)

    # 4. checkpatch --strict on every patch.
    # checkpatch runs the tree's scripts/spdxcheck.py, which needs the system's python3
    # (python3-ply).
    cp_env = dict(os.environ, PATH="/usr/bin:" + os.environ.get("PATH", ""))
    bad = []
    for p in patches[1:]:
        r = subprocess.run(["perl", "scripts/checkpatch.pl", "--strict", "--no-summary",
                            "--terse", os.path.join(args.out, p)], cwd=work, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=cp_env)
        if r.returncode or r.stdout.strip():
            bad.append(f"{p}: {r.stdout.strip()[:800]}")
    if bad:
        die("checkpatch --strict:\n" + "\n".join(bad))
    print(f"series: checkpatch --strict: ok ({len(patches) - 1} patches)", flush=True)

    # 5. Every prefix built, if asked.
    if args.bisect_build:
        bisect(work, env, args.bisect_build, args.bisect_config, args.make_opt, args.src,
               args.bisect_seed)

    # 6. Built, if asked.
    if args.built:
        print(f"series: build of the applied series: ok (the tree of {args.built})",
              flush=True)
    elif args.build:
        r = subprocess.run(args.build, shell=True, cwd=work)
        if r.returncode:
            die(f"the build of the applied series failed (exit {r.returncode})")
        print("series: build of the applied series: ok", flush=True)


def bisect(work, env, build, config, make_opts, src, seed):
    """Builds every prefix of the series (the commits base..series of `work`) in `build`, one
    after the other, each incrementally on the one before. They are built in the tested tree
    `src` itself, which step 3 found to be the whole series, starting from a copy of `seed`, a
    build of `src` with `config`: so the walk goes from the last patch down to the first, and
    each step rewrites only the files that patch changes, and rebuilds only what they reach,
    where a tree of its own would build the first prefix from nothing. Every file of `src` it
    rewrites is put back afterwards, content, mode and modification time, so that the other
    builds of `src` see no change. Each prefix starts from `config`; olddefconfig drops the
    options the prefix does not define yet. A prefix whose tree was built with that
    configuration before (the stamps beside `build`) is not built again, nor one that differs
    from the longer prefix built before it only in files the build does not read (build_reads):
    its build is that one's. Dies naming the first patch that does not build."""
    commits = git(work, "rev-list", "--reverse", "base..series", capture=True).split()
    # The configuration's options and values, whatever their order in the file.
    with open(config) as f:
        options = sorted(l for l in f.read().splitlines() if l.startswith("CONFIG_"))
    key_cfg = hashlib.sha1("\n".join(options).encode()).hexdigest()[:16]
    stamps = build.rstrip("/") + ".built"
    built = set()
    # (Older runs kept them inside the build directory, which the walk now replaces.)
    for path in (stamps, os.path.join(build, ".jlrs-bisect-built")):
        try:
            with open(path) as f:
                built |= set(f.read().split())
        except OSError:
            pass
    with open(stamps, "w") as f:
        f.write("".join(k + "\n" for k in sorted(built)))
    todo = []
    for i, c in enumerate(commits, 1):
        tree = git(work, "rev-parse", c + "^{tree}", capture=True).strip()
        if f"{tree}:{key_cfg}" not in built:
            todo.append((i, c, f"{tree}:{key_cfg}"))
    start = time.time()
    if todo:
        shutil.rmtree(build, ignore_errors=True)
        r = subprocess.run(["cp", "-a", seed, build])
        if r.returncode:
            die(f"cannot copy {seed} to {build}")
    make = ["make", f"O={build}", "ARCH=x86_64", *make_opts]
    jobs = f"-j{os.cpu_count() or 1}"
    # What the walk rewrites in src: path -> (its stat, or None if the series has no such file).
    saved = {}
    cur = "series"

    def goto(c):
        """Makes src the tree of commit c, from the tree of commit cur."""
        changed = git(work, "diff", "--no-renames", "--name-only", "-z", cur, c,
                      capture=True).split("\0")
        for path in filter(None, changed):
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

    again = 0
    reads = None
    try:
        for i, c, key in reversed(todo):
            subject = git(work, "log", "-1", "--format=%s", c, capture=True).strip()
            changed = [p for p in git(work, "diff", "--no-renames", "--name-only", "-z", cur, c,
                                      capture=True).split("\0") if p]
            if reads is None:
                reads = build_reads(build, src)
            # The patch changes no file the build read (its command files name them), no
            # Kconfig, Makefile or build tool, and adds none: make would rebuild nothing, and
            # the prefix builds as the longer one did.
            if not any(p in reads or re.match(r"(scripts|tools)/|(.*/)?(Kconfig|Makefile|Kbuild)[^/]*$", p) or
                       not os.path.lexists(os.path.join(src, p)) for p in changed):
                goto(c)
                cur = c
                built.add(key)
                with open(stamps, "a") as f:
                    f.write(key + "\n")
                why = (f"patch {i + 1} changes no file the build reads" if changed else
                       "the tested tree, built already")
                print(f"series: patch {i}/{len(commits)} builds on the ones before it "
                      f"({why}): {subject}", flush=True)
                continue
            goto(c)
            cur = c
            reads = None
            shutil.copy(config, os.path.join(build, ".config"))
            log = os.path.join(build, f"bisect-{i:02d}.log")
            t0 = time.time()
            with open(log, "w") as f:
                r = subprocess.run([*make, "olddefconfig"], cwd=src, stdout=f,
                                   stderr=subprocess.STDOUT)
                if not r.returncode:
                    r = subprocess.run([*make, jobs, "vmlinux", "modules"], cwd=src, stdout=f,
                                       stderr=subprocess.STDOUT)
            if r.returncode:
                with open(log, errors="replace") as f:
                    tail = [l for l in f.read().splitlines() if l.strip()][-15:]
                die(f"patch {i}/{len(commits)} does not build on the ones before it: {subject} "
                    f"(log: {log}):\n" + "\n".join(tail))
            built.add(key)
            with open(stamps, "a") as f:
                f.write(key + "\n")
            again += 1
            print(f"series: patch {i}/{len(commits)} builds on the ones before it "
                  f"({time.time() - t0:.0f} s): {subject}", flush=True)
    finally:
        # src back to the whole series, each file as it was.
        for path, st in saved.items():
            dst = os.path.join(src, path)
            if st is None:
                if os.path.lexists(dst):
                    os.remove(dst)
                continue
            blob = subprocess.run(["git", "-C", work, "cat-file", "blob", f"series:{path}"],
                                  stdout=subprocess.PIPE, check=True)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst, "wb") as f:
                f.write(blob.stdout)
            os.chmod(dst, st.st_mode & 0o7777)
            os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
    print(f"series: every prefix of the {len(commits)} patches builds ({again} built now, "
          f"{len(commits) - again} as before, {time.time() - start:.0f} s)", flush=True)


def build_reads(build, src):
    """The files of `src` the build in `build` read: every path under `src` its kbuild command
    files (.*.cmd: each target's sources and the headers and Rust files it depends on)
    name, relative to `src`."""
    reads = set()
    prefix = src.rstrip("/") + "/"
    for root, _, files in os.walk(build):
        for name in files:
            if not (name.startswith(".") and name.endswith(".cmd")):
                continue
            try:
                with open(os.path.join(root, name), errors="replace") as f:
                    text = f.read()
            except OSError:
                continue
            for word in text.split():
                word = word.strip(":\\")
                if word.startswith(prefix):
                    reads.add(word[len(prefix):])
    return reads


def write_maintainers_hook(pristine, top, path):
    """Writes the hook patch that adds the MAINTAINERS entry with every overlay file."""
    author = git(top, "log", "-1", "--format=%an <%ae>", capture=True).strip()
    name, email = re.match(r"(.*) <(.*)>", author).groups()
    with open(os.path.join(pristine, "MAINTAINERS")) as f:
        old = f.read()
    new = maintainers(old, overlay_files(top), author)
    diff = difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                "a/MAINTAINERS", "b/MAINTAINERS", n=3)
    body = "".join(diff)
    added = sum(1 for l in body.splitlines() if l.startswith("+") and not l.startswith("+++"))
    body = body.replace("--- a/MAINTAINERS\n+++ b/MAINTAINERS\n",
                        "diff --git a/MAINTAINERS b/MAINTAINERS\n--- a/MAINTAINERS\n"
                        "+++ b/MAINTAINERS\n", 1)
    with open(path, "w") as f:
        f.write(f"""From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: {name}
 <{email}>
Date: Tue, 24 Nov 2026 09:00:00 +0000
Subject: [PATCH] MAINTAINERS: add an entry for jump_label_rs

List the files of the Rust text-poke batch, the Rust static keys, the
deferred work of isolated CPUs and qpw under one entry.

Signed-off-by: {author}
---
 MAINTAINERS | {added} {"+" * min(added, 60)}
 1 file changed, {added} insertions(+)

{body}-- 
2.39.5

""")


def figures(top):
    """The measured figures for the cover letter, from results/demo.json."""
    try:
        with open(os.path.join(top, "results/demo.json")) as f:
            d = json.load(f)
    except (OSError, ValueError):
        return ""
    rev = (d.get("revisions") or {}).get("flip", d.get("revision", "?"))
    out = [f"Measured with make demo (results/, revision {rev}): QEMU TCG,",
           "4 vCPUs, -icount shift=0, all modes in one boot of one image; cost in",
           "guest instructions, the best of many flips.", ""]
    cost = {(r["mode"], r["sites"]): r for r in d.get("flip", [])}
    sizes = sorted({n for _, n in cost})
    if sizes:
        out.append("  sites per key           " + "".join(f"{n:>8}" for n in sizes))
        for label, mode in (("sync rounds, rust", "rust"), ("sync rounds, upstream", "c")):
            out.append(f"  {label:<24}" + "".join(
                f"{cost[(mode, n)]['ipi_rounds_per_flip']:>8g}" for n in sizes))
        out.append("  flip cost, rust/upstream" + "".join(
            f"{cost[('rust', n)]['cost_min'] / cost[('c', n)]['cost_min']:>8.3f}"
            for n in sizes))
    rows = d.get("isolation", {}).get("rows", [])
    iso = {(r["defer"], r["sites"]): r["cal_per_flip_isolated"] for r in rows
           if r["mode"] == "rust"}
    if iso:
        out += ["", "  IPIs per flip per isolated CPU in user space, deferral off / on:"]
        for n in sorted({n for _, n in iso}):
            out.append(f"    {n:>5} sites: {iso.get(('off', n), '?')} / {iso.get(('on', n), '?')}")
    entry = {e["variant"]: e["instr_per_call"] for e in d.get("entry", [])}
    off = entry.get("getpid() on CPU 2, deferral off")
    on = entry.get("getpid() on CPU 2, deferral on")
    if off and on:
        out += ["", f"  getpid() on an isolated CPU, deferral off / on: {off} / {on} "
                    f"instructions ({(on / off - 1) * 100:+.1f}%)"]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    # A run stopped by a signal (CI's time limit, a kill of the run) still
    # puts the source tree back from the prefix the walk had reached.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda n, _: sys.exit(128 + n))
    main()
