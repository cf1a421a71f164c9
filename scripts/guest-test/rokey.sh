#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# A static key that is read-only after init (define_static_key_ro!, in
# .data..ro_after_init as C's DEFINE_STATIC_KEY_FALSE_RO()): once the
# kernel runs, enabling or disabling it is refused with EPERM and a
# warning, and nothing faults. (KUnit runs before init memory is freed,
# where such a key may still change.)
b=/sys/kernel/debug/text_poke_bench/run

. /tests/cases.inc

rc=0
c=read_only_key_refused_after_init
why=
for v in 1 0; do
	if err=$(echo "rokey $v" 2>&1 > $b); then
		why="$why; rokey $v was accepted"
	else
		case "$err" in
		*"not permitted"*) ;;
		*) why="$why; rokey $v failed with '$err', not EPERM" ;;
		esac
	fi
done
n=$(dmesg | grep -c "is read-only after init")
[ "$n" = 2 ] || why="$why; $n warnings naming the read-only key, not 2"
# The warnings were expected: out of the log the other tests check.
dmesg -c > /dev/null
if [ -z "$why" ]; then ok $c; else fail $c "${why#; }"; fi
exit $rc
