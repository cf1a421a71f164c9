#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# A static key that is read-only after init (define_static_key_ro!, in
# .data..ro_after_init as C's DEFINE_STATIC_KEY_FALSE_RO()): once the
# kernel runs, enabling or disabling it is refused with EPERM and a
# warning, and nothing faults. (KUnit runs before init memory is freed,
# where such a key may still change.) The same for such a key of a module
# (text_poke_mod_rs.ko): its init enables it, and once the init has
# returned a change is refused, the key and its sites unchanged, even one
# that started while the init ran.
b=/sys/kernel/debug/text_poke_bench/run
name=text_poke_mod_rs
d=/sys/kernel/debug/$name

. /tests/cases.inc
plan 3
# Each refused change warns (ro.rs).
expect_warnings 'rust/kernel/jump_label/key/ro\.rs'
# The warnings naming a read-only key so far.
warnings() { dmesg | grep -c "is read-only after init"; }
# "VALUE WRONG" of the module's read-only key, from its state file.
ro() { awk '$1 == "ro_key" { print $2, $4 }' $d/state; }
# refused CMD FILE: writing CMD to FILE fails with EPERM; prints what went
# wrong.
refused() {
	if err=$(echo "$1" 2>&1 > "$2"); then
		echo "; '$1' was accepted"
	else
		case "$err" in
		*"not permitted"*) ;;
		*) echo "; '$1' failed with '$err', not EPERM" ;;
		esac
	fi
}

rc=0
c=read_only_key_refused_after_init
why=
n0=$(warnings)
for v in 1 0; do
	why="$why$(refused "rokey $v" $b)"
done
n=$(($(warnings) - n0))
[ "$n" = 2 ] || why="$why; $n warnings naming the read-only key, not 2"
if [ -z "$why" ]; then ok $c; else fail $c "${why#; }"; fi

c=module_read_only_key_refused_after_init
why=
if insmod /lib/modules/$name.ko; then
	[ "$(ro)" = "1 0" ] || why="$why; after init the key and its sites are '$(ro)', not enabled"
	n0=$(warnings)
	for v in 0 1; do
		why="$why$(refused $v $d/ro_key)"
	done
	[ "$(ro)" = "1 0" ] || why="$why; after the refused writes the key and its sites are '$(ro)'"
	n=$(($(warnings) - n0))
	[ "$n" = 2 ] || why="$why; $n warnings naming the module's key, not 2"
	rmmod $name || why="$why; rmmod failed"
else
	why="$why; the load failed"
fi
if [ -z "$why" ]; then ok $c; else fail $c "${why#; }"; fi
# A change of the module's key that was decided while its init ran and
# made after the init returned: the module's init starts one on a work
# item while the test holds jump_label_mutex (holdjl), and returns; the
# module goes live and makes its .data..ro_after_init read-only, before
# the work item gets the mutex or after it. The change must be refused
# with EPERM and a warning, the key and its sites unchanged: decided
# before the mutex, it would be made on read-only memory (an oops) or let
# through after the init returned.
c=module_read_only_key_decided_under_the_lock
why=
race=/sys/kernel/debug/text_poke_stress/ro_race
done=/tmp/insmod.done
rm -f $done
echo Y > $race
n0=$(warnings)
(insmod /lib/modules/$name.ko && echo 0 > $done || echo 1 > $done) &
pid=$!
# Its init waits for the mutex to be held.
i=0
while [ "$(cat /sys/module/$name/initstate 2>/dev/null)" != coming ] && [ $i -lt 100 ]; do
	usleep 100000
	i=$((i + 1))
done
echo "holdjl 2000" > $b || why="$why; holdjl failed"
wait $pid
echo N > $race
if [ "$(cat $done 2>/dev/null)" = 0 ]; then
	r=$(awk '$1 == "ro_race" { print $2 }' $d/state)
	[ "$r" = -1 ] || why="$why; the change made after the init returned gave '$r', not -1 (EPERM)"
	[ "$(ro)" = "1 0" ] || why="$why; afterwards the key and its sites are '$(ro)', not enabled"
	n=$(($(warnings) - n0))
	[ "$n" = 1 ] || why="$why; $n warnings naming the module's key, not 1"
	rmmod $name || why="$why; rmmod failed"
else
	why="$why; the load failed"
fi
if [ -z "$why" ]; then ok $c; else fail $c "${why#; }"; fi
# The warnings were expected: past the mark the other tests check from.
log_mark
exit $rc
