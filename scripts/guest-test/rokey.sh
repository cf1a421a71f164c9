#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# A static key that is read-only after init (define_static_key_ro!, in
# .data..ro_after_init as C's DEFINE_STATIC_KEY_FALSE_RO()): once the
# kernel runs, enabling or disabling it is refused with EPERM and a
# warning, and nothing faults. (KUnit runs before init memory is freed,
# where such a key may still change.) The same for such a key of a module
# (text_poke_mod_rs.ko): its init enables it, and once the init has
# returned a change is refused, the key and its sites unchanged.
b=/sys/kernel/debug/text_poke_bench/run
name=text_poke_mod_rs
d=/sys/kernel/debug/$name

. /tests/cases.inc
plan 2
# Each refused change warns (ro.rs).
expect_warnings 'rust/kernel/jump_label/key/ro\.rs'
# The warnings naming a read-only key so far.
warnings() { dmesg | grep -c "is read-only after init"; }
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
	# "VALUE wrong WRONG" of the key, from the module's state file.
	ro() { awk '$1 == "ro_key" { print $2, $4 }' $d/state; }
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
# The warnings were expected: past the mark the other tests check from.
log_mark
exit $rc
