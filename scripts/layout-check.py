#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The layout of Rust static-key sites, checked in the linked kernel.

  layout-check.py VMLINUX SYSTEM_MAP OBJDUMP READELF

For every __jump_table entry whose site is in a Rust function of the static-key
sample, of the static-key KUnit tests or of the text-poke batch's KUnit suite:

- a site that starts out falling through (the entry's NOP flag, bit 1 of its
  key field) holds a 2- or 5-byte NOP: the hot path falls through it;
- no instruction of the function loads from or otherwise names the key: the
  test is the NOP or JMP alone;
- the fall-through path does not jump away at once (a JMP within the function
  right after the site would cost the hot path a taken branch); where the
  other direction (the entry's target) is placed is counted: out of line,
  after the hot path's exit or before the site, or where both paths meet
  (a direction with no code of its own, as in a function returning the
  branch's value).

A regression in rustc's code generation or in the site macro fails the check.
Prints one line per failure and a summary; exits non-zero on a failure or if
fewer sites than expected were found.
"""

import bisect
import re
import subprocess
import sys

# Rust crates (mangled path fragments) whose sites are checked, and how many
# sites at least each must have.
CRATES = {
    "15rust_static_key": 64,          # samples/rust/rust_static_key.rs
    "10jump_label3key5tests": 8,      # the rust_static_key KUnit suite
    "15text_poke_batch5kunit": 1024,  # the text_poke_batch KUnit suite
}

NOP2 = bytes([0x66, 0x90])
NOP5 = bytes([0x0f, 0x1f, 0x44, 0x00, 0x00])


def run(*args):
    return subprocess.run(args, check=True, text=True, stdout=subprocess.PIPE).stdout


def sections(vmlinux, readelf):
    """Name -> (address, file offset, size) of vmlinux's sections."""
    out = {}
    for line in run(readelf, "-S", "-W", vmlinux).splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)",
                     line)
        if m:
            out[m.group(1)] = (int(m.group(2), 16), int(m.group(3), 16), int(m.group(4), 16))
    return out


def main():
    vmlinux, system_map, objdump, readelf = sys.argv[1:5]
    secs = sections(vmlinux, readelf)
    with open(vmlinux, "rb") as f:
        image = f.read()

    def read(addr, n):
        for a, off, size in secs.values():
            if a and a <= addr and addr + n <= a + size:
                return image[off + addr - a:off + addr - a + n]
        return None

    syms = []
    bounds = {}
    with open(system_map) as f:
        for line in f:
            a, t, name = line.split()[:3]
            if t in "tTW":
                syms.append((int(a, 16), name))
            elif name in ("__start___jump_table", "__stop___jump_table"):
                bounds[name] = int(a, 16)
    syms.sort()
    addrs = [a for a, _ in syms]

    def function_of(addr):
        i = bisect.bisect_right(addrs, addr) - 1
        if i < 0:
            return None
        return syms[i][0], syms[i + 1][0] if i + 1 < len(syms) else syms[i][0] + 4096, syms[i][1]

    jt_addr = bounds["__start___jump_table"]
    table = read(jt_addr, bounds["__stop___jump_table"] - jt_addr)
    sites = []
    for e in range(0, len(table), 16):
        raw = table[e:e + 16]
        code_rel, target_rel = (int.from_bytes(raw[i:i + 4], "little", signed=True)
                                for i in (0, 4))
        key_rel = int.from_bytes(raw[8:16], "little", signed=True)
        at = jt_addr + e
        code, target, key = at + code_rel, at + 4 + target_rel, at + 8 + key_rel
        fn = function_of(code)
        if not fn:
            continue
        crate = next((c for c in CRATES if c in fn[2]), None)
        if crate:
            sites.append((crate, fn, code, target, key & ~3, bool(key & 2)))

    # Disassemble the functions that hold sites, one objdump run per crate.
    listing = {}
    for crate in CRATES:
        fns = [s[1] for s in sites if s[0] == crate]
        if not fns:
            continue
        lo, hi = min(f[0] for f in fns), max(f[1] for f in fns)
        out = run(objdump, "-d", "--no-show-raw-insn", f"--start-address={lo:#x}",
                  f"--stop-address={hi:#x}", vmlinux)
        for line in out.splitlines():
            m = re.match(r"([0-9a-f]{16}):\s+(.*)$", line)
            if m:
                listing[int(m.group(1), 16)] = m.group(2)
    insns = sorted(listing)

    failures = []
    counts = dict.fromkeys(CRATES, 0)
    placed = dict.fromkeys(("after", "before", "join"), 0)
    for crate, (start, end, name), code, target, key, nop in sites:
        counts[crate] += 1
        where = f"{name}+{code - start:#x}"
        head = read(code, 5)
        size = 2 if head[:2] == NOP2 or head[0] == 0xeb else 5
        if nop and head[:2] != NOP2 and head != NOP5:
            failures.append(f"{where}: starts falling through but holds {head.hex()}, not a NOP")
            continue
        if not nop:
            rel = (int.from_bytes(head[1:2], "little", signed=True) if size == 2 else
                   int.from_bytes(head[1:5], "little", signed=True))
            if head[0] not in (0xeb, 0xe9) or code + size + rel != target:
                failures.append(f"{where}: starts branching but holds {head.hex()}, "
                                "not a JMP to its target")
                continue
        i0 = bisect.bisect_left(insns, start)
        i1 = bisect.bisect_left(insns, end)
        for a in insns[i0:i1]:
            for ref in re.findall(r"0x([0-9a-f]{16})", listing[a]):
                if key <= int(ref, 16) < key + 16:
                    failures.append(f"{where}: {a - start:#x}: '{listing[a]}' names the key")
        after = listing.get(code + size, "")
        m = re.match(r"jmp\s+0x([0-9a-f]+)", after)
        if m and start <= int(m.group(1), 16) < end:
            failures.append(f"{where}: the fall-through path jumps away at once ('{after}')")
            continue
        if target < code:
            placed["before"] += 1
            continue
        i = bisect.bisect_left(insns, code + size)
        while i < len(insns) and insns[i] < target:
            if re.match(r"(jmp|ret|ud2|int3)\b", listing[insns[i]]):
                placed["after"] += 1
                break
            i += 1
        else:
            # The fall-through path runs on into the target: the other direction has no code
            # of its own (it only skips some), and the target is where both paths meet.
            placed["join"] += 1

    for f in failures:
        print(f"layout: FAILED: {f}")
    short = [f"{c}: {counts[c]} sites, {n} expected" for c, n in CRATES.items() if counts[c] < n]
    for s in short:
        print(f"layout: FAILED: too few sites found: {s}")
    print(f"layout: {len(sites)} Rust sites checked "
          f"({', '.join(f'{c} {n}' for c, n in counts.items())}), {len(failures)} wrong; "
          f"the other direction out of line after the hot path's exit at {placed['after']}, "
          f"before the site at {placed['before']}, a join of both paths at {placed['join']}")
    return 1 if failures or short else 0


if __name__ == "__main__":
    sys.exit(main())
