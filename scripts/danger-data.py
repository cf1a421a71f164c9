#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Check what the entry code of a vmlinux reads and writes before it takes its deferred work.

A CPU in user space may have a kernel TLB flush deferred to it
(kernel/context_tracking_work/word.c): until its next kernel entry takes the work
word (ct_work_words), its TLB may still map a vmalloc or vmap range that
was freed and reused since. Entry code before that point, the data side of
the danger zone, must touch no memory such a range can hold. It may touch:

  stack    the entry stacks, and the task's own stack (rsp, and what
           cpu_current_top_of_stack points to): vmalloc'd with VMAP_STACK,
           but mapped before the task last entered user space here, and
           not freed while it runs;
  percpu   per-CPU data of the first chunk (%gs, or this_cpu_off plus a
           per-CPU symbol): the kernel image or direct-mapped memory
           (deferral is refused at boot if the first chunk is vmapped);
  image    the kernel image's own data (RIP-relative, absolute, or a
           constant address);
  current  the task_struct (current_task): slab, direct-mapped.

A pointer loaded from any of these, and a register the entry code got from
user space, may point anywhere: a load or store through it is an error. The
check follows registers through every function of .entry.text and
.noinstr.text on a path from an entry point to the work word's load (the
"chain"), from its start to that load or to its call of the next function
of the chain, and through every function in those sections such a path
calls before that, whole; calls out of those sections are left out, since
objtool's noinstr validation allows them only where instrumentation is,
after context tracking's hook. Arguments follow the chain: a function's
argument registers hold what its callers on the chain pass.

Usage: danger-data.py VMLINUX [--nm NM] [--objdump OBJDUMP] [--distrust KIND]

Prints every access through a register that holds none of the above, with
its function and instruction, and exits 1 if there is any; 0 with a
summary line otherwise, and for a kernel that does not defer kernel TLB
flushes (nothing to check); 2 on bad input. With --distrust KIND, a
register of that kind counts as unsafe too: the check's own test, which
must then find the entry code's accesses of that kind.
"""
import argparse
import bisect
import importlib.util
import os
import re
import struct
import subprocess
import sys

# What a register holds: one of the safe kinds, a scalar, or anything.
SAFE = {"stack", "percpu", "image", "current"}
SCALAR, ANY = "scalar", "any"
# Per-CPU variables whose value is itself known: the per-CPU base, the
# current task, the top of the task's stack.
PERCPU_VALUE = {"this_cpu_off": "percpu", "current_task": "current",
                "const_current_task": "current", "cpu_current_top_of_stack": "stack",
                "const_cpu_current_top_of_stack": "stack"}
# Per-CPU fields whose value is known, by (variable, offset): the TSS's
# sp0, the top of the task's stack.
PERCPU_FIELD = {("cpu_tss_rw", 4): "stack"}
WORD = "ct_work_words"
# Static keys that are on wherever work is deferred: context tracking's,
# which CPU isolation (nohz_full=) turns on. Their sites are followed the
# way they take then; those of other keys, both ways.
KEYS_ON = {"context_tracking_key"}
# Functions of the entry text that run before the work word only on paths
# the check cannot tell apart, and why what they touch there is safe. They
# are not followed.
REASONS = {
    "exc_double_fault": "a double fault kills the kernel; its one way back "
                        "(espfix64) is from kernel mode, on the espfix stack",
    "fixup_bad_iret": "copies the IRET frame that faulted, on the entry stack "
                      "(the cpu_entry_area, mapped at boot), to the task's stack",
}
# Functions that load or store the work word on no way to a kernel TLB
# flush, and why: they are not in the chain.
NOT_TO_FLUSH = {
    "ct_idle_enter": "marks the word idle, and an idle CPU is never deferred a "
                     "kernel TLB flush (Work::IDLE in ct_work.rs)",
    "ct_idle_exit": "takes an idle CPU's word, which holds no kernel TLB flush",
}
# What those functions return: fixup_bad_iret() the frame it built on the
# task's stack (below cpu_tss_rw.x86_tss.sp0).
RETURNS = {"fixup_bad_iret": "stack"}
ARGS = ["rdi", "rsi", "rdx", "rcx", "r8", "r9"]
CLOBBERED = ["rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11"]
REG64 = {}
for r in ["ax", "bx", "cx", "dx", "si", "di", "bp", "sp"]:
    for n in ["r" + r, "e" + r, r]:
        REG64[n] = "r" + r
for r, lo in [("ax", "al"), ("bx", "bl"), ("cx", "cl"), ("dx", "dl"),
              ("si", "sil"), ("di", "dil"), ("bp", "bpl"), ("sp", "spl")]:
    REG64[lo] = "r" + r
for i in range(8, 16):
    for s in ["", "d", "w", "b"]:
        REG64[f"r{i}{s}"] = f"r{i}"
MEM = re.compile(r"(%gs:)?(-?0x[0-9a-f]+|-?\d+)?\((%\w+)?(?:,(%\w+)(?:,\d)?)?\)")


def die(msg):
    print(f"danger-data: error: {msg}", file=sys.stderr)
    sys.exit(2)


def run(cmd):
    try:
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        die(f"{cmd[0]} failed: {e}")


class Insn:
    def __init__(self, addr, mnem, ops, target):
        self.addr, self.mnem, self.ops, self.target = addr, mnem, ops, target
        self.next = None


def disassemble(args, start, stop):
    """Functions of [start, stop): name -> list of Insn, in address order."""
    out = run([args.objdump, "-d", "--no-show-raw-insn", f"--start-address={start:#x}",
               f"--stop-address={stop:#x}", args.vmlinux])
    funcs, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"^([0-9a-f]+) <(\S+)>:$", line)
        if m:
            cur = funcs.setdefault(m.group(2), [])
            continue
        m = re.match(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$", line)
        if not m or cur is None:
            continue
        addr, mnem, rest = int(m.group(1), 16), m.group(2), m.group(3)
        if mnem in ("lock", "rep", "repz", "repnz") and rest:
            mnem, _, rest = rest.partition("\t")
            mnem = mnem.strip()
        rest = rest.split("#")[0].strip()
        target = None
        t = re.match(r"^0x([0-9a-f]+) <([^>+]+)(\+0x[0-9a-f]+)?>$", rest)
        if t:
            target = (int(t.group(1), 16), t.group(2))
        cur.append(Insn(addr, mnem, rest, target))
    for insns in funcs.values():
        for a, b in zip(insns, insns[1:]):
            a.next = b.addr
    return funcs


def split_ops(ops):
    """AT&T operands, split at the commas outside parentheses."""
    out, depth, cur = [], 0, ""
    for ch in ops:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("vmlinux")
    ap.add_argument("--nm", default="llvm-nm-22")
    ap.add_argument("--objdump", default="llvm-objdump-22")
    ap.add_argument("--distrust", choices=sorted(SAFE))
    args = ap.parse_args()
    safe = SAFE - {args.distrust}

    syms, table = {}, []
    for line in run([args.nm, "-n", "--defined-only", args.vmlinux]).splitlines():
        p = line.split()
        if len(p) == 3:
            a = int(p[0], 16)
            syms.setdefault(p[2], a)
            table.append((a, p[2]))
    addrs = [a for a, _ in table]
    need = ["__noinstr_text_start", "__noinstr_text_end", "__entry_text_start",
            "__entry_text_end", WORD, "this_cpu_off"]
    missing = [n for n in need if n not in syms]
    if missing:
        die(f"{args.vmlinux} has no {', '.join(missing)}: not an x86-64 vmlinux with "
            "CONFIG_CONTEXT_TRACKING_WORK_SYNC_CORE?")
    if "ct_work_tlb_needs_ipi" not in syms:
        print("danger-data: this kernel does not defer kernel TLB flushes: nothing to check")
        return 0

    def symbol(addr):
        i = bisect.bisect_right(addrs, addr) - 1
        return (table[i][1], addr - table[i][0]) if i >= 0 else ("?", 0)

    funcs = disassemble(args, syms["__noinstr_text_start"], syms["__noinstr_text_end"])
    funcs.update(disassemble(args, syms["__entry_text_start"], syms["__entry_text_end"]))
    funcs = {n: f for n, f in funcs.items() if f and not n.startswith("__pfx_")}

    # Jump label sites: a NOP or a JMP that may be either, followed both ways.
    spec = importlib.util.spec_from_file_location(
        "danger_zone", os.path.join(os.path.dirname(os.path.abspath(__file__)), "danger-zone.py"))
    dz = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dz)
    elf = dz.Elf(args.vmlinux)
    if "__start___jump_table" not in syms:
        die(f"{args.vmlinux} has no __jump_table")
    start, stop = syms["__start___jump_table"], syms["__stop___jump_table"]
    jt = elf.read(start, stop - start)
    jump_sites = {}  # site -> (target, "jmp", "nop" or None for either)
    for off in range(0, len(jt), 16):
        code, target, key = struct.unpack_from("<iiq", jt, off)
        a = start + off
        way = None
        if symbol((a + 8 + key) & ~3 & (2**64 - 1))[0] in KEYS_ON:
            # On: a JMP unless the site is the likely branch.
            way = "nop" if (a + 8 + key) & 1 else "jmp"
        jump_sites[a + code] = (a + 4 + target, way)

    def gs_symbol(insn, op):
        """The per-CPU symbol a %gs operand names, or None."""
        m = MEM.search(op)
        if not m or not m.group(1):
            return None
        disp = int(m.group(2) or "0", 0)
        if m.group(3) == "%rip":
            return symbol(insn.next + disp)[0] if insn.next else None
        if not m.group(3):
            return symbol(disp & (2**64 - 1))[0]
        return None

    def reads_word(insn):
        return any(gs_symbol(insn, op) == WORD for op in split_ops(insn.ops))

    def calls(name):
        """The functions of the entry text it calls, or jumps to (a tail call)."""
        return {i.target[1] for i in funcs[name]
                if i.target and (i.mnem.startswith("call") or i.mnem == "jmp") and
                i.target[1] != name and i.target[1] in funcs}

    # The chain: functions that load the work word, or call one that does.
    chain = {n for n, f in funcs.items()
             if n not in NOT_TO_FLUSH and any(reads_word(i) for i in f)}
    while True:
        more = {n for n in funcs
                if n not in chain and n not in NOT_TO_FLUSH and calls(n) & chain}
        if not more:
            break
        chain |= more
    if not chain:
        die(f"no function of the entry text loads {WORD}")

    errors = []     # the errors of the function being analysed
    reports = {}    # function -> its errors, from its last analysis
    arg_kinds = {}  # function -> {arg register: kind}, joined over its callers
    analysed = {}   # function -> the argument kinds it was analysed with

    def join(a, b):
        return a if a == b else ANY

    def kind_of_load(insn, src, regs):
        sym = gs_symbol(insn, src)
        if sym is not None:
            return PERCPU_VALUE.get(sym, ANY)
        # this_cpu_off plus a per-CPU symbol, and an offset into it.
        m = MEM.search(src)
        if m and m.group(3) and not m.group(4) and \
                regs.get(REG64.get(m.group(3)[1:]), ANY) == "percpu":
            name, off = symbol(int(m.group(2) or "0", 0) & (2**64 - 1))
            return PERCPU_FIELD.get((name, off), ANY)
        return ANY

    def check_mem(name, insn, op, regs):
        m = MEM.search(op)
        if not m or m.group(1) or insn.mnem.startswith(("lea", "nop", "prefetch")):
            return
        base = m.group(3)
        if base is None or base == "%rip":
            return
        base = REG64.get(base[1:])
        kind = "stack" if base == "rsp" else regs.get(base, ANY)
        if kind not in safe:
            errors.append(f"{name}+{insn.addr - syms.get(name, insn.addr):#x}: "
                          f"{insn.mnem} {insn.ops}: through %{base}, which holds {kind}")

    def user_mode_test(insn, seen):
        """Whether insn tests regs->cs & 3 (user_mode()), from memory or a register."""
        if not insn.mnem.startswith("test"):
            return False
        ops = split_ops(insn.ops)
        if len(ops) != 2 or ops[0] != "$0x3":
            return False
        if re.match(r"^0x88\(%\w+\)$", ops[1]):
            return True
        r = REG64.get(ops[1][1:]) if ops[1].startswith("%") else None
        return r is not None and seen.get(insn.addr, {}).get(r) == "cs"

    def analyse(name, entry_regs, in_chain):
        """Follows the registers through the function's code before the work word."""
        insns = funcs[name]
        at = {i.addr: k for k, i in enumerate(insns)}
        work = [(0, dict(entry_regs))]
        seen = {}
        while work:
            k, regs = work.pop()
            while k < len(insns):
                insn = insns[k]
                old = seen.get(insn.addr)
                if old is not None:
                    merged = {r: join(old.get(r, ANY), regs.get(r, ANY))
                              for r in set(old) | set(regs)}
                    if merged == old:
                        break
                    regs = merged
                seen[insn.addr] = dict(regs)
                if in_chain and reads_word(insn):
                    break
                ops = split_ops(insn.ops)
                for op in ops:
                    check_mem(name, insn, op, regs)
                m = insn.mnem
                if m.startswith("call"):
                    callee = insn.target[1] if insn.target else None
                    if callee is None:
                        errors.append(f"{name}+{insn.addr - syms.get(name, insn.addr):#x}: "
                                      f"indirect call {insn.ops} before the work word")
                    elif callee in REASONS:
                        pass
                    elif callee in funcs:
                        kinds = {r: regs.get(r, ANY) for r in ARGS}
                        old = arg_kinds.get(callee)
                        arg_kinds[callee] = kinds if old is None else \
                            {r: join(old[r], kinds[r]) for r in ARGS}
                        if in_chain and callee in chain:
                            break
                    for r in CLOBBERED:
                        regs[r] = ANY
                    regs["rax"] = RETURNS.get(callee, ANY)
                    k += 1
                    continue
                if m.startswith("ret") or m.startswith("ud2") or \
                        (m.startswith("jmp") and insn.target and
                         insn.target[1] not in (name,) and insn.target[1] in funcs and
                         insn.target[1] != name):
                    # A return, or a tail call: the callee gets our registers.
                    if m.startswith("jmp") and insn.target:
                        callee = insn.target[1]
                        kinds = {r: regs.get(r, ANY) for r in ARGS}
                        old = arg_kinds.get(callee)
                        arg_kinds[callee] = kinds if old is None else \
                            {r: join(old[r], kinds[r]) for r in ARGS}
                    break
                if insn.addr in jump_sites and insn.mnem.startswith(("nop", "jmp")):
                    target, way = jump_sites[insn.addr]
                    dest = at.get(target)
                    if way != "nop" and dest is not None:
                        work.append((dest, dict(regs)))
                    if way == "jmp":
                        break
                    k += 1
                    continue
                if m in ("je", "jne") and k > 0 and user_mode_test(insns[k - 1], seen):
                    # user_mode(regs): (regs->cs & 3) != 0. The kernel-mode
                    # way is not an entry from user space: not followed.
                    dest = at.get(insn.target[0]) if insn.target else None
                    if m == "jne":
                        if dest is not None:
                            k = dest
                            continue
                        break
                    k += 1
                    continue
                if m.startswith("j"):
                    if insn.target is None:
                        if not insn.ops.startswith("0x"):
                            errors.append(f"{name}: indirect jump {insn.ops} before the work word")
                        break
                    dest = at.get(insn.target[0])
                    if dest is None:
                        break  # out of the function: a thunk, or the return thunk
                    if m == "jmp":
                        k = dest
                        continue
                    work.append((dest, dict(regs)))
                    k += 1
                    continue
                # Register results.
                dst = ops[-1] if ops else ""
                if m.startswith(("cmp", "test", "bt", "push", "nop")) and not \
                        m.startswith("cmpxchg"):
                    dst = ""  # reads its operands only
                if dst.startswith("%") and dst[1:] in REG64:
                    r = REG64[dst[1:]]
                    wide = dst[1:] == r or (dst[1:].startswith("r") and dst[1:][-1].isdigit())
                    src = ops[0] if len(ops) > 1 else ""
                    if r == "rsp":
                        pass
                    elif not wide:
                        regs[r] = SCALAR
                    elif m in ("movq", "mov"):
                        if src.startswith("$"):
                            regs[r] = "image"
                        elif src.startswith("%") and src[1:] in REG64:
                            regs[r] = "stack" if REG64[src[1:]] == "rsp" else \
                                regs.get(REG64[src[1:]], ANY)
                        else:
                            regs[r] = kind_of_load(insn, src, regs)
                    elif m.startswith("lea"):
                        mm = MEM.search(src)
                        base = mm.group(3) if mm else None
                        if base is None or base == "%rip":
                            regs[r] = "image"
                        else:
                            b = REG64.get(base[1:])
                            regs[r] = "stack" if b == "rsp" else regs.get(b, ANY)
                    elif m.startswith(("add", "sub", "and", "or", "shl", "shr", "sar",
                                       "inc", "dec", "neg", "not")):
                        if src.startswith("%") and src[1:] in REG64 and \
                                regs.get(r, ANY) not in SAFE:
                            regs[r] = regs.get(REG64[src[1:]], ANY)
                    elif m.startswith("xor") and src == dst:
                        regs[r] = SCALAR
                    elif m.startswith("pop"):
                        regs[r] = ANY
                    else:
                        regs[r] = ANY
                    if m.startswith("mov") and re.match(r"^0x88\(%\w+\)$", src):
                        regs[r] = "cs"  # regs->cs, for user_mode()
                k += 1

    # The chain first, from the functions no function of the chain calls
    # (the entry points: their registers are user space's), then what it
    # calls, until nothing changes.
    called = set().union(*(calls(n) for n in chain))
    for n in chain - set(REASONS):
        if n not in called:
            arg_kinds.setdefault(n, {r: ANY for r in ARGS})
    for _ in range(20):
        todo = [n for n in arg_kinds if analysed.get(n) != arg_kinds[n]]
        if not todo:
            break
        for n in todo:
            analysed[n] = dict(arg_kinds[n])
            errors.clear()
            analyse(n, arg_kinds[n], n in chain)
            reports[n] = list(errors)
    unique = sorted({e for es in reports.values() for e in es})
    for e in unique:
        print(f"error: {e}")
    print(f"danger-data: {len(chain)} functions on a path to the work word, "
          f"{len(analysed)} analysed, {len(unique)} unsafe accesses")
    return 1 if unique else 0


if __name__ == "__main__":
    sys.exit(main())
