#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""List the static branch and static call sites in the danger zone of a vmlinux.

A CPU coming from user space takes its deferred work in context tracking
(arch/x86/kernel/ct_work_rs.c); what it runs before that, the entry code,
lives in .entry.text and .noinstr.text (objtool keeps noinstr code calling
only noinstr code). A site there must not change under a CPU that deferred
its sync: the Rust batch never defers a batch that writes those sections, so
such a flip still interrupts every isolated CPU. This check warns about every
site there whose key can be flipped after boot; keys in .data..ro_after_init
cannot be (they are read-only once init is done). A static call trampoline
called from there counts as a site of its key.

Usage: danger-zone.py VMLINUX [--expect-warning KEY]... [--strict]

Prints one line per key; "warning:" lines for keys that can be flipped.
Exits 1 with --strict if there is any warning, or if a key named by
--expect-warning is not warned about (the check's own test); 2 on bad input.
"""
import argparse
import bisect
import struct
import subprocess
import sys


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
    ap.add_argument("--expect-warning", action="append", default=[], metavar="KEY")
    ap.add_argument("--strict", action="store_true")
    args = ap.parse_args()

    elf = Elf(args.vmlinux)
    syms, text, data = symbols(args.vmlinux, args.nm)
    need = ["__noinstr_text_start", "__noinstr_text_end", "__entry_text_start",
            "__entry_text_end", "__start_ro_after_init", "__end_ro_after_init",
            "__start___jump_table", "__stop___jump_table"]
    missing = [n for n in need if n not in syms]
    if missing:
        die(f"{args.vmlinux} has no {', '.join(missing)}: not an x86-64 vmlinux with jump labels?")
    zones = [(syms["__noinstr_text_start"], syms["__noinstr_text_end"]),
             (syms["__entry_text_start"], syms["__entry_text_end"])]
    ro = (syms["__start_ro_after_init"], syms["__end_ro_after_init"])

    def in_zone(addr):
        return any(a <= addr < b for a, b in zones)

    keys = {}  # key address -> [kind, set of functions, sites]

    def note(kind, code, key):
        if not in_zone(code):
            return
        k = keys.setdefault(key, [kind, set(), 0])
        k[1].add(owner(text, code))
        k[2] += 1

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
    names = {owner(data, k) for k in keys}
    for t in sorted(tramps):
        if f"__SCK__{t}" not in names:
            key = syms.get(f"__SCK__{t}")
            if key is None:
                die(f"no key __SCK__{t} for the trampoline __SCT__{t}")
            keys[key] = ["static call trampoline", {f"__SCT__{t}"}, 1]

    warned = set()
    total = sum(k[2] for k in keys.values())
    print(f"danger-zone: {total} static branch and static call sites in "
          f".noinstr.text and .entry.text, of {len(keys)} keys")
    for key, (kind, funcs, n) in sorted(keys.items(), key=lambda kv: owner(data, kv[0])):
        name = owner(data, key)
        where = ", ".join(sorted(funcs))
        if ro[0] <= key < ro[1]:
            print(f"  ok: {name} ({kind}, {n} sites: {where}): read-only after init")
        else:
            warned.add(name)
            print(f"  warning: {name} ({kind}, {n} sites: {where}) can be flipped after "
                  f"boot: a flip of it is never deferred, and interrupts every isolated CPU")
    rc = 0
    for k in args.expect_warning:
        if not any(w == k or w.endswith(k) for w in warned):
            print(f"danger-zone: error: expected a warning about {k}, got none", file=sys.stderr)
            rc = 1
    if args.strict and warned:
        rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
