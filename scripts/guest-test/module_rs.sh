#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# A Rust module with static keys of its own and Rust sites on a C key of
# the kernel image (text_poke_mod_rs.ko), in every text_poke_batch= mode:
# - loaded and unloaded again and again on CPU 0 while CPU 1 flips the C
#   key (its sites in the module come and go with each load) and CPU 2
#   flips the module's own keys through its debugfs files, which also come
#   and go: every load must find its own sites right (the module refuses
#   to load otherwise) and every flip of its keys succeed;
# - then, with nothing flipping, every site of every key follows its key;
# - a transaction holding the C key while the module, holding that key's
#   only sites, is unloaded: the commit writes none of the freed text;
# - afterwards a flip of the C key writes no site, and the log holds no
#   warning.
name=text_poke_mod_rs
d=/sys/kernel/debug/$name
b=/sys/kernel/debug/text_poke_bench/run
m=/sys/kernel/debug/text_poke_batch/mode
loads=6

. /tests/cases.inc
plan 7
# The value of figure $1 in the benchmark's last run.
fig() { sed -n "s/^$1 //p" $b; }
# Line $1 of the module's state: "VALUE WRONG".
state() { awk -v k="$1" '$1 == k { print $2, $4 }' $d/state; }

rc=0
for mode in rust serial c; do
	c=module_rs_load_unload_$mode
	if ! echo $mode > $m || ! echo "modkey 0" > $b; then
		fail $c "cannot switch to text_poke_batch=$mode"
		skip module_rs_txn_unload_$mode "cannot switch to text_poke_batch=$mode"
		continue
	fi
	why=
	# CPU 1: the C key, on and off, until told to stop.
	rm -f /tmp/stop
	taskset -c 1 sh -c "while [ ! -f /tmp/stop ]; do echo 'modkey 1' > $b; echo 'modkey 0' > $b; done" &
	ckey=$!
	# CPU 2: the module's keys, whenever its files are there.
	taskset -c 2 sh -c "while [ ! -f /tmp/stop ]; do
		for v in 1 0; do
			echo \$v 2>/dev/null > $d/false_key
			echo \$((1 - v)) 2>/dev/null > $d/true_key
		done
		usleep 1000
	done" &
	own=$!
	i=0
	while [ $i -lt $loads ]; do
		i=$((i + 1))
		taskset -c 0 insmod /lib/modules/$name.ko || { why="$why; load $i failed"; break; }
		# Flips from here too, racing CPU 2's: each must succeed.
		for v in 1 0; do
			echo $v > $d/false_key || why="$why; load $i: cannot set false_key to $v"
		done
		taskset -c 0 rmmod $name || { why="$why; unload $i failed"; break; }
	done
	touch /tmp/stop
	wait $ckey $own
	# Nothing flips now: load once more and check every site.
	if insmod /lib/modules/$name.ko; then
		for on in 1 0; do
			echo $on > $d/false_key
			echo $on > $d/true_key
			echo "modkey $on" > $b || why="$why; modkey $on failed"
			[ "$(fig entries)" = 16 ] ||
				why="$why; modkey $on wrote $(fig entries) sites, not the module's 16"
			for k in false_key true_key c_key; do
				set -- $(state $k)
				[ "$1 $2" = "$on 0" ] ||
					why="$why; $k set to $on: value $1, $2 of 16 sites wrong"
			done
		done
	else
		why="$why; the last load failed"
	fi
	if [ -z "$why" ]; then ok $c; else fail $c "${why#; }"; fi

	# A transaction holding the C key while the module with its only sites
	# goes: the commit, after the unload, writes nothing.
	c=module_rs_txn_unload_$mode
	why=
	echo "modtxn 1500" > $b &
	txn=$!
	usleep 300000
	rmmod $name || why="$why; rmmod with the transaction open failed"
	wait $txn || why="$why; the commit failed"
	[ "$(fig entries)" = 0 ] || why="$why; the commit wrote $(fig entries) sites of the unloaded module"
	# The key did change: a new load's sites follow it, enabled.
	if insmod /lib/modules/$name.ko; then
		set -- $(state c_key)
		[ "$1 $2" = "1 0" ] || why="$why; after the commit the C key is $1 with $2 of 16 sites wrong"
		rmmod $name || why="$why; rmmod failed"
	else
		why="$why; the load after the commit failed"
	fi
	echo "modkey 0" > $b
	echo "modkey 1" > $b
	[ "$(fig entries)" = 0 ] || why="$why; a flip after rmmod wrote $(fig entries) sites"
	echo "modkey 0" > $b
	if [ -z "$why" ]; then ok $c; else fail $c "${why#; }"; fi
done
echo rust > $m
no_warning module_rs_no_warning
exit $rc
