#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Check that the functions the text-poke protocol relies on to serialize do so.

A sync round of a text-poke batch is only a sync if every CPU it reaches runs a
serializing instruction before it reports the round done: the IPI handler
(text_poke_batch_do_sync_core(), arch/x86/kernel/text_poke_batch.c) before it
returns to the IPI's sender, and a CPU that was deferred the round
(ct_work_sync_core(), kernel/context_tracking_work/word.c) before it
reports the work run. Single-threaded TCG keeps cross-modified code coherent
with or without it, so no test that runs the code can see a sync_core() go
missing; this check reads the built image instead.

For each function, every path from its entry to where it returns (a RET, or
a jump to another function: the return thunk, a tail call) must pass one of
the instructions that serialize (IRET, SERIALIZE, CPUID, a write to a control
register, INVD, WBINVD). Jumps are followed wherever they go, into the
alternatives' auxiliary code that static_cpu_has() jumps to and back, and
both ways of every conditional jump: whichever way the CPU's features pick,
the path serializes.

Usage: serialize-check.py VMLINUX [--nm NM] [--objdump OBJDUMP]
                          [--function NAME]... [--not-serializing MNEMONIC]...

Prints each path that returns without serializing and exits 1 if there is
any; 0 with one line per function otherwise; 2 on bad input (a function
missing from the image, an indirect jump it cannot follow). With
--not-serializing, that instruction does not count: the check's own test,
which must then find the paths.
"""
import argparse
import re
import subprocess
import sys

FUNCTIONS = ["text_poke_batch_do_sync_core", "ct_work_sync_core"]
SERIALIZING = {"iretq", "iret", "iretl", "serialize", "cpuid", "invd", "wbinvd"}
LINE = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")
TARGET = re.compile(r"^(?:0x)?([0-9a-f]+)\b")


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode:
        sys.exit(f"serialize-check: {' '.join(cmd[:2])} failed: {r.stderr.strip()[:200]}")
    return r.stdout


class Image:
    def __init__(self, vmlinux, nm, objdump):
        self.vmlinux, self.objdump = vmlinux, objdump
        self.symbols = {}
        self.starts = set()
        for line in run([nm, "-S", vmlinux]).splitlines():
            f = line.split()
            if len(f) == 4 and f[2] in "tTW":
                addr, size = int(f[0], 16), int(f[1], 16)
                self.symbols.setdefault(f[3], (addr, size))
                self.starts.add(addr)
        self.insns = {}

    def decode(self, start, stop):
        out = run([self.objdump, "-d", "--no-show-raw-insn", "--no-leading-headers",
                   f"--start-address={start:#x}", f"--stop-address={stop:#x}", self.vmlinux])
        order = []
        for line in out.splitlines():
            m = LINE.match(line)
            if not m or m.group(2).endswith(">:"):
                continue
            addr = int(m.group(1), 16)
            self.insns[addr] = (m.group(2), m.group(3).split("#")[0].strip())
            order.append(addr)
        for a, b in zip(order, order[1:]):
            self.insns[a] += (b,)
        return order

    def insn(self, addr):
        """(mnemonic, operands, next address) of the instruction at addr."""
        if addr not in self.insns or len(self.insns[addr]) < 3:
            self.decode(addr, addr + 64)
        if addr not in self.insns or len(self.insns[addr]) < 3:
            sys.exit(f"serialize-check: cannot decode the instruction at {addr:#x}")
        return self.insns[addr]


def successors(image, addr, own):
    """Where the CPU may go after the instruction at addr: addresses, or None for a
    return to the caller."""
    mnem, ops, nxt = image.insn(addr)
    if mnem.startswith("ret"):
        return [None]
    if mnem in ("ud2", "int3"):
        return []
    if mnem.startswith("j"):
        m = TARGET.match(ops)
        if not m:
            sys.exit(f"serialize-check: an indirect jump at {addr:#x} ({mnem} {ops}): "
                     "cannot follow it")
        target = int(m.group(1), 16)
        # Another function's start: the return thunk, or a tail call.
        leaves = target in image.starts and target != own
        out = [None] if leaves else [target]
        if mnem != "jmp":
            out.append(nxt)
        return out
    return [nxt]


def unserialized_paths(image, name, serializing):
    own, size = image.symbols[name]
    image.decode(own, own + size)
    bad = []
    seen = set()
    stack = [(own, False, (own,))]
    while stack:
        addr, done, path = stack.pop()
        if (addr, done) in seen:
            continue
        seen.add((addr, done))
        mnem = image.insn(addr)[0]
        done = done or mnem in serializing or (mnem.startswith("mov") and
                                               re.search(r",\s*%cr\d$", image.insn(addr)[1]))
        for nxt in successors(image, addr, own):
            if nxt is None:
                if not done:
                    bad.append(path)
            elif len(path) < 4096:
                stack.append((nxt, done, path + (nxt,)))
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("vmlinux")
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--objdump", default="objdump")
    ap.add_argument("--function", action="append")
    ap.add_argument("--not-serializing", action="append", default=[])
    args = ap.parse_args()
    image = Image(args.vmlinux, args.nm, args.objdump)
    serializing = SERIALIZING - set(args.not_serializing)
    names = args.function or FUNCTIONS
    missing = [n for n in names if n not in image.symbols]
    if missing:
        print(f"serialize-check: not in {args.vmlinux}: {', '.join(missing)}", file=sys.stderr)
        return 2
    rc = 0
    for name in names:
        bad = unserialized_paths(image, name, serializing)
        for path in bad:
            rc = 1
            steps = " -> ".join(f"{a:#x} {image.insn(a)[0]}" for a in path[-8:])
            print(f"{name}: returns without serializing: ... {steps}")
        if not bad:
            print(f"{name}: every path serializes before it returns")
    return rc


if __name__ == "__main__":
    sys.exit(main())
