#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Safe Rust cannot reach a module's key after the module is gone. A
# transaction holding a key of text_poke_mod_rs.ko keeps the module loaded:
# rmmod fails until the transaction is committed (the key then flips) or
# dropped. A rate-limited key of the module is refused a rate limit, so no
# deferred decrement can leave delayed work in it.
name=text_poke_mod_rs
d=/sys/kernel/debug/$name

. /tests/cases.inc
plan 2
# The refused rate limit warns (deferred.rs).
expect_warnings 'rust/kernel/jump_label/key/deferred\.rs'
# report CASE WHY: the case's line.
report() { if [ -z "$2" ]; then ok "$1"; else fail "$1" "${2#; }"; fi; }
listed() { grep -q "^$name " /proc/modules; }

rc=0
insmod /lib/modules/$name.ko || error "cannot load $name.ko"
t=module_key_in_transaction_pins_module
why=
echo open > $d/txn || why="; cannot open a transaction on the module's key"
rmmod $name 2>/dev/null && why="$why; rmmod succeeded with a transaction open on the module's key"
if listed; then
	[ "$(cat $d/txn)" = open ] || why="$why; the transaction is '$(cat $d/txn)', not open"
	echo commit > $d/txn || why="$why; the commit failed"
	[ "$(cat $d/false_key)" = 1 ] || why="$why; the commit did not enable the key"
	echo 0 > $d/false_key
	echo open > $d/txn && echo drop > $d/txn || why="$why; cannot open and drop a transaction"
	[ "$(cat $d/false_key)" = 0 ] || why="$why; a dropped transaction changed the key"
	rmmod $name || why="$why; rmmod failed once no transaction was open"
	insmod /lib/modules/$name.ko || error "cannot load $name.ko again"
fi
report $t "$why"

t=module_key_refused_rate_limit
why=
listed || insmod /lib/modules/$name.ko || error "cannot load $name.ko again"
n0=$(dmesg | grep -c "a module's key cannot be rate-limited")
echo rate_limit > $d/txn 2>/dev/null && why="; a key of the module took a rate limit"
n=$(($(dmesg | grep -c "a module's key cannot be rate-limited") - n0))
[ "$n" = 1 ] || why="$why; $n warnings naming the refusal, not 1"
report $t "$why"
rmmod $name || error "rmmod $name failed"
# The refusal's warning was expected: past the mark the other tests check
# from.
log_mark
exit $rc
