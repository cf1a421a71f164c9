#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# A key whose sites span the kernel image and a module
# (text_poke_batch_span_key: one site in the image, 16 in text_poke_mod_rs.ko).
# One corrupted site, in the module or in the image, refuses the whole
# flip, through the Rust API, static_key_enable() and static_key_slow_inc():
# nothing is written anywhere, the count is unchanged, the refusal is
# logged, and once the site is repaired the key flips. In every mode; with
# text_poke_batch=c only through the Rust API, since upstream's update BUG()s on
# the C calls. Then a module whose site disagrees with its key
# (text_poke_mod_bad.ko): loaded while the key is enabled it is refused and
# nothing of it stays registered; loaded while the key is disabled it stops
# every flip of the key until it is unloaded.
name=text_poke_mod_rs
s=/sys/kernel/debug/$name/span
m=/sys/kernel/debug/text_poke_batch/mode

. /tests/cases.inc
# 6 refusal cases each in rust and serial, 2 in c; 2 module cases each in
# rust and serial.
plan 18
# Each refused flip warns (jump_label.rs).
expect_warnings 'arch/x86/kernel/text_poke_batch/jump_label\.rs'
# The refusals logged so far.
refusals() { dmesg | grep -c "cannot be flipped: flip refused, nothing written"; }
# report CASE WHY: the case's line.
report() { if [ -z "$2" ]; then ok "$1"; else fail "$1" "${2#; }"; fi; }
# The state that says: count $1, every site right, $2 for a corrupted one.
want() { echo "count $1 image 0 module 0 corrupted $2"; }

rc=0
insmod /lib/modules/$name.ko || error "cannot load $name.ko"
for mode in rust serial c; do
	echo $mode > $m || error "cannot switch to text_poke_batch=$mode"
	apis="enable c_enable c_inc"
	[ $mode = c ] && apis=enable
	for where in image module; do
		for api in $apis; do
			t=span_refused_${where}_${api}_$mode
			case $api in
			enable) off=disable ;;
			c_enable) off=c_disable ;;
			c_inc) off=c_dec ;;
			esac
			why=
			echo "corrupt $where" > $s || why="; cannot corrupt the $where's site"
			n0=$(refusals)
			# static_key_enable() returns nothing; the others the refusal.
			if echo $api > $s 2>/dev/null && [ $api != c_enable ]; then
				why="$why; $api was not refused"
			fi
			[ "$(cat $s)" = "$(want 0 1)" ] ||
				why="$why; after the refused $api: $(cat $s), not $(want 0 1)"
			[ $(($(refusals) - n0)) = 1 ] ||
				why="$why; $(($(refusals) - n0)) refusals logged, not 1"
			echo repair > $s
			echo $api > $s || why="$why; $api failed once the site was repaired"
			[ "$(cat $s)" = "$(want 1 0)" ] ||
				why="$why; after $api: $(cat $s), not $(want 1 0)"
			echo $off > $s || why="$why; $off failed"
			[ "$(cat $s)" = "$(want 0 0)" ] ||
				why="$why; after $off: $(cat $s), not $(want 0 0)"
			report $t "$why"
		done
	done
done

bad=text_poke_mod_bad
for mode in rust serial; do
	echo $mode > $m
	t=span_module_refused_at_load_$mode
	why=
	echo enable > $s || why="; cannot enable the key"
	if insmod /lib/modules/$bad.ko 2>/dev/null; then
		why="$why; $bad.ko loaded while its site disagrees with its enabled key"
		rmmod $bad
	fi
	grep -q "^$bad " /proc/modules && why="$why; $bad is still listed"
	dmesg | grep -q "jump_label: $bad: its static key sites could not be set" ||
		why="$why; no message names $bad"
	[ "$(cat $s)" = "$(want 1 0)" ] || why="$why; after the load: $(cat $s), not $(want 1 0)"
	echo disable > $s || why="$why; the key cannot be disabled after the refused load"
	[ "$(cat $s)" = "$(want 0 0)" ] || why="$why; after disable: $(cat $s), not $(want 0 0)"
	report $t "$why"

	t=span_module_site_refuses_flips_$mode
	why=
	insmod /lib/modules/$bad.ko || why="; $bad.ko does not load with its key disabled"
	echo enable > $s 2>/dev/null && why="$why; the key was enabled over $bad's site"
	[ "$(cat $s)" = "$(want 0 0)" ] || why="$why; after the refused enable: $(cat $s), not $(want 0 0)"
	rmmod $bad || why="$why; rmmod $bad failed"
	echo enable > $s || why="$why; enable failed once $bad was unloaded"
	[ "$(cat $s)" = "$(want 1 0)" ] || why="$why; after enable: $(cat $s), not $(want 1 0)"
	echo disable > $s
	report $t "$why"
done
echo rust > $m
rmmod $name || error "rmmod $name failed"
# The refusals' warnings were expected: past the mark the other tests check
# from.
log_mark
exit $rc
