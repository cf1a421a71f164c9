#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# A transaction open while a module is COMING, committed after the module
# went live and its init text was freed: the module's init site must have
# seen the key's value as its count said, and the commit must write the
# module's core sites only, never its freed init text. The module's sites
# over pages of their own (module text, mapped a run of pages at a time by
# the Rust batch) must hold what the key says after every flip. And the
# module's init text is not freed while a key update that may write it is
# in flight, also when the module's init returns in the middle of flips
# and transactions of its key, load after load.
name=text_poke_mod_test
p=/sys/module/$name/parameters
b=/sys/kernel/debug/text_poke_bench/run
m=/sys/kernel/debug/text_poke_batch/mode

. /tests/cases.inc
plan 5
# The value of figure $1 in the benchmark's last run.
fig() { sed -n "s/^$1 //p" $b; }
# Waits until the module runs its init function, which waits for the test:
# false after ten seconds.
coming() {
	i=0
	while [ "$(cat /sys/module/$name/initstate 2>/dev/null)" != coming ] && [ $i -lt 500 ]; do
		usleep 20000
		i=$((i + 1))
	done
	[ $i -lt 500 ]
}

rc=0
for mode in rust serial c; do
	t=module_init_text_$mode
	if ! echo $mode > $m; then
		fail $t "cannot switch to text_poke_batch=$mode"
		continue
	fi
	insmod /lib/modules/$name.ko &
	pid=$!
	if ! coming; then
		fail $t "the module never reached its init function"
		wait $pid
		rmmod $name 2>/dev/null
		continue
	fi
	echo "modtxn 1000" > $b
	txn=$?
	wait $pid
	ins=$?
	entries=$(fig entries)
	pages=$(cat $p/page_sites)
	count=$(cat $p/init_count)
	init=$(cat $p/init_taken)
	core=$(cat $p/core_taken)
	why=
	[ $txn = 0 ] && [ $ins = 0 ] || why="$why; modtxn exit $txn, insmod exit $ins"
	# Whoever sees the count sees the text: the init site branched iff the
	# count it ran with was positive.
	if [ "$count" -gt 0 ] 2>/dev/null; then want=Y; else want=N; fi
	[ "$init" = $want ] ||
		why="$why; the init site ran with count $count and taken=$init: value and text disagree"
	[ "$count" = 0 ] || why="$why; the key changed before the commit (count $count)"
	[ "$core" = 1 ] || why="$why; the core site does not branch after the commit"
	[ "$entries" = $((pages + 1)) ] ||
		why="$why; the commit wrote $entries sites, not the module's $((pages + 1)) live sites"
	[ "$(cat $p/pages_wrong)" = 0 ] ||
		why="$why; after the commit $(cat $p/pages_wrong) of $pages sites over pages are wrong"
	# The key flips back and forth: every site follows every flip.
	for on in 0 1 0 1 0; do
		echo "modkey $on" > $b || why="$why; modkey $on failed"
		[ "$(cat $p/core_taken)" = $on ] || why="$why; modkey $on: the core site does not follow"
		w=$(cat $p/pages_wrong)
		[ "$w" = 0 ] || why="$why; modkey $on: $w of $pages sites over pages are wrong"
	done
	# The module goes, and its sites go with it.
	rmmod $name || why="$why; rmmod failed"
	echo "modkey 1" > $b && [ "$(fig entries)" = 0 ] ||
		why="$why; a flip after rmmod wrote $(fig entries) sites"
	echo "modkey 0" > $b
	if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi
done
echo rust > $m

# The module's init function returns while jump_label_mutex is held, as by
# a key update that found the module COMING and is writing its init sites:
# the module goes live, but must not go on to free its init text (which it
# does right after) until the update is over. The jump-label LIVE notifier
# orders the two (arch/x86/kernel/text_poke_batch/jump_label.rs): an update that
# released the mutex before its last write, or a notifier that did not
# take it for LIVE, fails this.
t=module_init_text_waits_for_update
why=
done=/tmp/insmod.done
rm -f $done
(insmod /lib/modules/$name.ko && echo 0 > $done || echo 1 > $done) &
pid=$!
if coming; then
	echo "holdjl 3000" > $b &
	hold=$!
	usleep 1500000
	state=$(cat /sys/module/$name/initstate 2>/dev/null)
	[ "$state" = live ] || why="$why; the module is '$state' 1.5 s after its init function returned, not live"
	[ ! -e $done ] ||
		why="$why; insmod returned while a key update held jump_label_mutex: the init text can be freed under it"
	wait $hold || why="$why; holdjl failed"
	wait $pid
	[ "$(cat $done 2>/dev/null)" = 0 ] || why="$why; insmod failed"
	rmmod $name || why="$why; rmmod failed"
else
	why="; the module never reached its init function"
	wait $pid
	rmmod $name 2>/dev/null
fi
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi
# The module's init function returns, the module goes live and its init
# text is freed, while its key flips back and forth (every fourth flip a
# transaction), each flip made while it is COMING writing its init sites:
# five loads in each mode. Every flip goes through, every site of the
# module is right afterwards, and the kernel says nothing (a write to
# freed init text warns or oopses, or trips KASAN where it is built).
t=module_init_text_races_flips
why=
loads=0
for mode in rust serial c; do
	echo $mode > $m || { why="$why; cannot switch to text_poke_batch=$mode"; continue; }
	for i in 1 2 3 4 5; do
		insmod /lib/modules/$name.ko &
		pid=$!
		if ! coming; then
			why="$why; $mode load $i: the module never reached its init function"
			wait $pid
			rmmod $name 2>/dev/null
			continue
		fi
		echo "modrace 40" > $b || why="$why; $mode load $i: modrace failed"
		[ "$(fig refused)" = 0 ] || why="$why; $mode load $i: $(fig refused) flips refused"
		wait $pid || why="$why; $mode load $i: insmod failed"
		[ "$(cat $p/core_taken)" = 0 ] ||
			why="$why; $mode load $i: the core site branches with the key disabled"
		w=$(cat $p/pages_wrong)
		[ "$w" = 0 ] || why="$why; $mode load $i: $w sites over pages are wrong"
		rmmod $name || why="$why; $mode load $i: rmmod failed"
		loads=$((loads + 1))
	done
done
echo rust > $m
info "$t loads=$loads"
if [ -z "$why" ]; then ok $t; else fail $t "${why#; }"; fi
exit $rc
