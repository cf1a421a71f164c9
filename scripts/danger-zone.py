#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Check the static branch and static call sites in the danger zone of a vmlinux.

A CPU coming from user space or idle takes its deferred work in context
tracking (kernel/context_tracking_work/word.c); what it runs before that, the
entry code and the idle code, lives in .entry.text, .noinstr.text and
.cpuidle.text (objtool keeps noinstr and cpuidle code calling only noinstr
or cpuidle code and static call trampolines). A site there, or a
trampoline called from there, must not change under a CPU that deferred its
sync: the sender never defers a batch that writes any byte of the ranges in
the image's ct_work_danger_text[], the very table it reads. This check
reads that table from the image and fails if any site in the danger zone, or
any trampoline called from it, is outside it: a flip of that key could be
deferred. It also notes every such key that can be flipped after boot (a
flip of it interrupts every isolated and idle CPU); keys in .data..ro_after_init
cannot be.

Usage: danger-zone.py VMLINUX [--strict] [--drop-range I]... [--expect-error KEY]...

Prints one line per key: "ok:", "note:" (flippable after boot, never
deferred) or "error:" (a flip may be deferred). Exits 1 with --strict if
there is any error, or if a key named by --expect-error has none (the
check's own test: with --drop-range I, the rule's range I is left out, as a
broken rule would; KEY may be part of a name); 2 on bad input.
"""
import argparse
import bisect
import struct
import subprocess
import sys


# CT_WORK_DANGER_RANGES (include/linux/context_tracking_work.h).
RANGES = 3


def die(msg):
    print(f"danger-zone: error: {msg}", file=sys.stderr)
    sys.exit(2)


class Elf:
    def __init__(self, path):
        try:
            with open(path, "rb") as f:
                self.data = f.read()
        except OSError as e:
            die(f"cannot read {path}: {e.strerror}")
        d = self.data
        if d[:4] != b"\x7fELF" or d[4] != 2 or d[5] != 1:
            die(f"{path} is not a 64-bit little-endian ELF file")
        shoff, = struct.unpack_from("<Q", d, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", d, 0x3A)
        self.sections = []
        for i in range(shnum):
            off = shoff + i * shentsize
            _, sh_type, _, addr, offset, size = struct.unpack_from("<IIQQQQ", d, off)
            if sh_type != 8 and addr:  # not SHT_NOBITS
                self.sections.append((addr, offset, size))

    def read(self, addr, size):
        for start, offset, length in self.sections:
            if start <= addr and addr + size <= start + length:
                o = offset + addr - start
                return self.data[o:o + size]
        die(f"address {addr:#x} is in no section of the file")


def symbols(path, nm):
    try:
        out = subprocess.run([nm, "-n", "--defined-only", path], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        die(f"{nm} failed on {path}: {e}")
    syms = {}
    text, data = [], []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue
        addr, kind, name = int(parts[0], 16), parts[1], parts[2]
        syms.setdefault(name, addr)
        if name.startswith("__pfx_"):
            continue
        (text if kind in "tT" else data).append((addr, name))
    return syms, text, data


def owner(table, addr):
    i = bisect.bisect_right(table, (addr, "\uffff")) - 1
    return table[i][1] if i >= 0 else "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("vmlinux")
    ap.add_argument("--nm", default="llvm-nm-22")
    ap.add_argument("--objdump", default="llvm-objdump-22")
    ap.add_argument("--expect-error", action="append", default=[], metavar="KEY")
    ap.add_argument("--drop-range", action="append", default=[], type=int, metavar="I")
    ap.add_argument("--strict", action="store_true")
    args = ap.parse_args()

    elf = Elf(args.vmlinux)
    syms, text, data = symbols(args.vmlinux, args.nm)
    need = ["__noinstr_text_start", "__noinstr_text_end", "__entry_text_start",
            "__entry_text_end", "__cpuidle_text_start", "__cpuidle_text_end",
            "__start_ro_after_init", "__end_ro_after_init",
            "__start___jump_table", "__stop___jump_table", "ct_work_danger_text"]
    missing = [n for n in need if n not in syms]
    if missing:
        die(f"{args.vmlinux} has no {', '.join(missing)}: not an x86-64 vmlinux with jump labels?")
    zones = [(syms["__noinstr_text_start"], syms["__noinstr_text_end"]),
             (syms["__entry_text_start"], syms["__entry_text_end"]),
             (syms["__cpuidle_text_start"], syms["__cpuidle_text_end"])]
    ro = (syms["__start_ro_after_init"], syms["__end_ro_after_init"])
    # The sender's rule: CT_WORK_DANGER_RANGES (3) [start, end) pairs of
    # unsigned long.
    raw = elf.read(syms["ct_work_danger_text"], RANGES * 16)
    rule = [struct.unpack_from("<QQ", raw, 16 * i) for i in range(RANGES)]
    for i in args.drop_range:
        if not 0 <= i < len(rule):
            die(f"--drop-range {i}: the rule has ranges 0 to {len(rule) - 1}")
    rule = [r for i, r in enumerate(rule) if i not in args.drop_range]
    for a, b in rule:
        if not a < b:
            die(f"ct_work_danger_text holds an empty or reversed range {a:#x}-{b:#x}")

    def refused(a, b):
        """Whether the rule refuses to defer a batch writing [a, b)."""
        return any(s <= a and b <= e for s, e in rule)

    def in_zone(addr):
        return any(a <= addr < b for a, b in zones)

    keys = {}  # key address -> [kind, set of functions, sites, sites not refused]

    def note(kind, code, key):
        if not in_zone(code):
            return
        k = keys.setdefault(key, [kind, set(), 0, 0])
        k[1].add(owner(text, code))
        k[2] += 1
        # A jump or a call is 5 bytes; a NOP there, 2 or 5.
        if not refused(code, code + 5):
            k[3] += 1

    start, stop = syms["__start___jump_table"], syms["__stop___jump_table"]
    table = elf.read(start, stop - start)
    for off in range(0, len(table), 16):
        code, _, key = struct.unpack_from("<iiq", table, off)
        a = start + off
        note("static branch", a + code, (a + 8 + key) & ~3 & (2**64 - 1))
    if "__start_static_call_sites" in syms:
        start, stop = syms["__start_static_call_sites"], syms["__stop_static_call_sites"]
        table = elf.read(start, stop - start)
        for off in range(0, len(table), 8):
            code, key = struct.unpack_from("<ii", table, off)
            a = start + off
            note("static call", a + code, (a + 4 + key) & ~3 & (2**64 - 1))

    # A static call reached through its trampoline from the danger zone: the
    # trampoline is rewritten by the same batch as the key's sites.
    tramps = set()
    for a, b in zones:
        try:
            out = subprocess.run([args.objdump, "-d", "--no-show-raw-insn",
                                  f"--start-address={a:#x}", f"--stop-address={b:#x}",
                                  args.vmlinux], check=True, capture_output=True,
                                 text=True).stdout
        except (OSError, subprocess.CalledProcessError) as e:
            die(f"{args.objdump} failed on {args.vmlinux}: {e}")
        for line in out.splitlines():
            if "<__SCT__" in line and ("call" in line or "jmp" in line):
                tramps.add(line.split("<__SCT__", 1)[1].split(">", 1)[0].split("+", 1)[0])
    for t in sorted(tramps):
        key, tramp = syms.get(f"__SCK__{t}"), syms.get(f"__SCT__{t}")
        if key is None or tramp is None:
            die(f"no key __SCK__{t} or no trampoline __SCT__{t}")
        # The trampoline: a JMP or RET and a 3-byte UD1, 8 bytes.
        bad = 0 if refused(tramp, tramp + 8) else 1
        k = keys.get(key)
        if k is None:
            keys[key] = ["static call trampoline", {f"__SCT__{t}"}, 1, bad]
        else:
            k[1].add(f"__SCT__{t}")
            k[2] += 1
            k[3] += bad

    errors = set()
    total = sum(k[2] for k in keys.values())
    print(f"danger-zone: {total} static branch and static call sites in "
          f".noinstr.text (with .cpuidle.text), .entry.text and trampolines called from "
          f"there, of {len(keys)} keys; the sender's rule: "
          + ", ".join(f"{a:#x}-{b:#x}" for a, b in rule))
    # Idle code lies within the noinstr range (NOINSTR_TEXT in
    # include/asm-generic/vmlinux.lds.h): the rule covers it only so.
    idle = zones[2]
    if idle[0] < idle[1] and not refused(*idle):
        errors.add(".cpuidle.text")
        print(f"  error: .cpuidle.text {idle[0]:#x}-{idle[1]:#x} is outside the sender's "
              f"rule: a batch that writes idle code may be deferred to an idle CPU")
    for key, (kind, funcs, n, bad) in sorted(keys.items(), key=lambda kv: owner(data, kv[0])):
        name = owner(data, key)
        where = ", ".join(sorted(funcs))
        if bad:
            errors.add(name)
            print(f"  error: {name} ({kind}, {n} sites: {where}): {bad} of them outside "
                  f"ct_work_danger_text[]: a flip of it may be deferred to a CPU that "
                  f"runs them before it takes its sync")
        elif ro[0] <= key < ro[1]:
            print(f"  ok: {name} ({kind}, {n} sites: {where}): never deferred, and "
                  f"read-only after init")
        else:
            print(f"  note: {name} ({kind}, {n} sites: {where}): never deferred; it can be "
                  f"flipped after boot, and a flip of it interrupts every isolated and idle CPU")
    rc = 0
    for k in args.expect_error:
        if not any(k in w for w in errors):
            print(f"danger-zone: error: expected an error about {k}, got none", file=sys.stderr)
            rc = 1
    if args.strict and errors and not args.expect_error:
        rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
