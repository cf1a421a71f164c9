#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Flips refused under fault injection leave every key's count and text in
# agreement. The benchmark enables its 1024-site key, and its eight 64-site
# keys as one transaction, with the 1st, 2nd, ... fault-injection point the
# enable reaches failing (/proc/self/fail-nth's rule: failslab,
# fail_page_alloc and fail_text_poke_batch points alike), until an enable gets
# past them all, and checks every site against its key after each attempt.
# The batch's growth allocates with GFP_KERNEL, which failslab and
# fail_page_alloc leave alone unless told otherwise. C's static_key_enable(),
# _disable(), _slow_inc() and _slow_dec() of the 1024-site key, which
# cannot tell their callers of a refusal, go through the same points and
# must each leave the count asked for, every site in agreement with it.
d=/sys/kernel/debug
run=$d/text_poke_bench/run

. /tests/cases.inc
plan 4
rc=0
fault_knobs on
get() { echo "$out" | awk -v k="$1" '$1 == k { print $2 }'; }

for what in 1024 txn; do
	t=faults_keep_count_and_text_$what
	if ! echo "faults $what" > $run; then
		fail $t "the benchmark refused 'faults $what'"
		continue
	fi
	out=$(cat $run)
	injected=$(get injected) refused=$(get refused) wrong=$(get wrong)
	echo "$t: $injected faults injected, $refused enables refused, $wrong wrong"
	if [ "$wrong" != 0 ]; then
		fail $t "$wrong keys whose sites disagreed with them, or enables failed otherwise"
	elif [ "${refused:-0}" -lt 1 ]; then
		fail $t "no enable was refused: no fault reached the update"
	else
		ok $t
	fi
done

t=faults_c_callers_never_lose_a_flip_1024
if echo "cfaults 1024" > $run; then
	out=$(cat $run)
	injected=$(get injected) lost=$(get refused) wrong=$(get wrong)
	echo "$t: $injected faults injected, $lost calls that left another count, $wrong wrong"
	if [ "$wrong" != 0 ]; then
		fail $t "$wrong calls after which the key's sites disagreed with it"
	elif [ "$lost" != 0 ]; then
		fail $t "$lost C calls did not leave the count they were asked for"
	elif [ "${injected:-0}" -lt 4 ]; then
		fail $t "faults injected into $injected calls only: none reached the update"
	else
		ok $t
	fi
else
	fail $t "the benchmark refused 'cfaults 1024'"
fi

fault_knobs off
# A write that did not land warns, once for each batch put back: no other
# warning, and no BUG, may come of the faults. Then the expected warnings
# leave the log the other tests check.
no_other_warning faults_no_other_warning 'arch/x86/kernel/text_poke_batch/batch.rs'
exit $rc
