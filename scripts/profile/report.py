#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The report of scripts/profile.sh: guest instructions per function, per
flip and per site, from the TCG plugin's dump of the profiled flips and the
kernel's System.map; with --blocks FUNCTION, also that function's
translation blocks (offset, length, instructions per site)."""
import argparse
import bisect
import collections
import subprocess

p = argparse.ArgumentParser()
p.add_argument('--map', required=True)
p.add_argument('--dump', required=True)
p.add_argument('--flips', type=int, required=True)
p.add_argument('--sites', type=int, required=True)
p.add_argument('--top', type=int, default=30)
p.add_argument('--blocks', default=None)
a = p.parse_args()

syms = []
with open(a.map) as f:
    for line in f:
        addr, kind, name = line.split()[:3]
        if kind in 'tTwW' and not name.startswith('__pfx_'):
            syms.append((int(addr, 16), name))
syms.sort()
starts = [s for s, _ in syms]


def symbol(vaddr):
    i = bisect.bisect_right(starts, vaddr) - 1
    return syms[i] if i >= 0 else (0, '?')


def demangled(names):
    """Rust v0 and C++ names demangled by LLVM's c++filt, if there is one."""
    names = list(names)
    for tool in ('llvm-cxxfilt-22', 'llvm-cxxfilt'):
        try:
            out = subprocess.run([tool], input='\n'.join(names), capture_output=True,
                                 text=True, check=True).stdout.splitlines()
        except (OSError, subprocess.CalledProcessError):
            continue
        if len(out) == len(names):
            return dict(zip(names, out))
    return {n: n for n in names}


funcs = collections.Counter()
blocks = collections.Counter()
with open(a.dump) as f:
    for line in f:
        vaddr, insns, executed = line.split()
        start, name = symbol(int(vaddr, 16))
        funcs[name] += int(executed)
        if a.blocks and name == a.blocks:
            blocks[(int(vaddr, 16) - start, int(insns))] += int(executed)

per_flip = a.flips
per_site = a.flips * a.sites
total = sum(funcs.values())
print(f'{a.flips} flips of {a.sites} sites: {total / per_flip:,.0f} guest instructions '
      f'a flip, {total / per_site:,.1f} a site (every CPU, all the guest ran)')
print(f'{"per flip":>12} {"per site":>9}  function')
top = funcs.most_common(a.top)
pretty = demangled(name for name, _ in top)
for name, n in top:
    print(f'{n / per_flip:12,.0f} {n / per_site:9.1f}  {pretty[name][:110]}')
    if name != pretty[name]:
        print(f'{"":23}{name}')
if a.blocks:
    print(f'blocks of {a.blocks}:')
    for (off, insns), n in sorted(blocks.items()):
        print(f'  +{off:#06x} {insns:3d} insns {n / per_site:9.2f} a site')
