#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Module loads failing at every fault-injection point they reach: the
# Rust module with static keys of its own and sites on a C key of the
# kernel image (text_poke_mod_rs.ko) is loaded with the 1st, 2nd, ...
# fault-injection point its finit_module() reaches failing
# (/proc/thread-self/fail-nth: failslab and fail_page_alloc, GFP_KERNEL
# allocations too, and fail_text_poke_batch's writes), until a load gets past
# them all. A load that fails must say so, -ENOMEM for an allocation (with
# upstream's warnings when jump_label_add_module()'s fails), -EIO for a
# write of its sites, and leave nothing behind: no module, and a flip of
# the C key
# after it writes no site (a site of the failed module kept in the key's
# list would be written in freed text). A load that goes through although
# a point failed (one the loader can do without) is checked as any load:
# the C key's flips write the module's 16 sites, and it unloads. The log
# holds no other warning afterwards.
name=text_poke_mod_rs
ko=/lib/modules/$name.ko
d=/sys/kernel/debug
b=$d/text_poke_bench/run

. /tests/cases.inc
plan 2
rc=0
fig() { sed -n "s/^$1 //p" $b; }
for f in $b $ko /demo/syscalls /proc/self/fail-nth; do
	[ -e $f ] || error "$f missing (the bench, the module or CONFIG_FAULT_INJECTION off?)"
done
echo rust > $d/text_poke_batch/mode
fault_knobs on

t=modfaults_leave_nothing
why=
failed=0 loaded=0 errs=
n=1
while [ $n -le 5000 ]; do
	out=$(/demo/syscalls modload $ko $n 2>&1) || { why="$why; attempt $n: $out"; break; }
	set -- $out
	ret=$2 left=$4
	if [ "$ret" = 0 ]; then
		loaded=$((loaded + 1))
		for on in 1 0; do
			echo "modkey $on" > $b || why="$why; attempt $n: modkey $on failed"
			[ "$(fig entries)" = 16 ] ||
				why="$why; attempt $n: modkey $on wrote $(fig entries) sites, not the module's 16"
		done
		rmmod $name || { why="$why; attempt $n: the module does not unload"; break; }
	else
		failed=$((failed + 1))
		case " $errs " in *" $ret "*) ;; *) errs="$errs $ret" ;; esac
		[ ! -e /sys/module/$name ] || why="$why; attempt $n failed ($ret) and left the module"
		for on in 1 0; do
			echo "modkey $on" > $b || why="$why; attempt $n: modkey $on failed"
			[ "$(fig entries)" = 0 ] ||
				why="$why; attempt $n failed ($ret), and modkey $on wrote $(fig entries) sites"
		done
	fi
	[ -z "$why" ] || break
	# The load got past every point: none failed.
	[ "$left" = 0 ] || break
	n=$((n + 1))
done
info "$t attempts=$n failed=$failed loaded_anyway=$loaded errors=${errs# }"
[ "$left" != 0 ] || why="$why; still failing after $n attempts"
[ "$ret" = 0 ] || why="$why; the load past every point failed ($ret)"
[ $failed -gt 0 ] || why="$why; no load failed: no fault reached the loader"
for e in $errs; do
	[ "$e" = -12 ] || [ "$e" = -5 ] || why="$why; a failed load returned $e, not -ENOMEM or -EIO"
done
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi

fault_knobs off
# jump_label_add_module() out of memory warns, as upstream's does, and so
# does the jump_label_del_module() that undoes it, for the keys it had not
# reached (upstream's "No memory during module load"); a write that did not
# land warns once for its batch, put back (batch.rs): no other warning,
# and no BUG, may come of the faults. Then the expected warnings leave the
# log the other tests check.
no_other_warning modfaults_no_other_warning \
	'at jump_label_module_notify\+|at jump_label_del_module\+|arch/x86/kernel/text_poke_batch/batch.rs'
exit $rc
