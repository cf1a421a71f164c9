#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Demo scenarios "flip", "lookup", "txn" and "scale", run inside the
# guest: every implementation, switched at run time on this one boot, flips
# the benchmark keys and reports the counters, the IPIs each CPU received
# (/proc/interrupts, CAL) and the cost. One "@@ result" line per
# measurement; the host turns them into results/demo.json.
#
# Usage: bench.sh SCENARIO...   (flip, lookup, txn, scale)
m=/sys/kernel/debug/text_poke/mode
b=/sys/kernel/debug/text_poke_bench/run
for f in $m $b; do
	if [ ! -e $f ]; then
		echo "@@ error bench: $f missing (CONFIG_TEXT_POKE_RS_BENCH off?)"
		exit 1
	fi
done
ncpu=$(grep -c ^processor /proc/cpuinfo)

# The CAL counts of every CPU, comma-separated.
cal() {
	awk -v n="$ncpu" '$1 == "CAL:" {
		s = $2; for (i = 3; i <= n + 1; i++) s = s "," $i; print s }' /proc/interrupts
}

# Flips for a measurement: serial takes 3 sync rounds per site.
flips() {
	case "$1:$2" in
	serial:1024) echo 4 ;;
	serial:256) echo 8 ;;
	*:1024) echo 10 ;;
	*:256) echo 20 ;;
	*:56) echo 40 ;;
	*:8) echo 100 ;;
	*) echo 200 ;;
	esac
}

# measure KIND MODE SITES
measure() {
	if ! echo "$2" > $m; then
		echo "@@ error $1: cannot switch to text_poke=$2"
		return 1
	fi
	n=$(flips "$2" "$3")
	# Two flips first, not counted: the first flip after a switch of
	# implementation pays for what the switch left behind.
	echo "flip $3 2" > $b
	before=$(cal)
	if ! echo "$1 $3 $n" > $b; then
		echo "@@ error $1: '$1 $3 $n' failed with text_poke=$2"
		return 1
	fi
	after=$(cal)
	echo "@@ result scenario=$scenario cpus=$ncpu $(tr '\n' ' ' < $b | sed 's/\([a-z_]*\) \([^ ]*\) */\1=\2 /g')cal_before=$before cal_after=$after"
}

rc=0
for scenario in "$@"; do
	case $scenario in
	flip) modes="serial c rust" ;;
	lookup) modes="c rust" ;;
	scale)
		echo "@@ progress scale: 56 sites on $ncpu vCPUs, serial c rust"
		for mode in serial c rust; do
			measure flip "$mode" 56 || rc=1
		done
		echo "@@ done scale cpus=$ncpu"
		continue
		;;
	txn)
		echo "@@ progress txn: 8 keys x 64 sites, one by one and as one transaction, c and rust"
		for mode in c rust; do
			# Two flips first, not counted, as in measure().
			if ! echo $mode > $m || ! echo "txn 2" > $b || ! echo "txn 4" > $b; then
				echo "@@ error txn: 'txn 4' failed with text_poke=$mode"
				rc=1
				continue
			fi
			echo "@@ result scenario=txn cpus=$ncpu $(tr '\n' ' ' < $b | sed 's/\([a-z_]*\) \([^ ]*\) */\1=\2 /g')"
		done
		echo "@@ done txn"
		continue
		;;
	*)
		echo "@@ error unknown scenario $scenario"
		rc=1
		continue
		;;
	esac
	echo "@@ progress $scenario: modes $modes, 1 to 1024 sites"
	for sites in 1 8 56 256 1024; do
		for mode in $modes; do
			measure "$scenario" "$mode" "$sites" || rc=1
		done
	done
	echo "@@ done $scenario"
done
echo rust > $m
exit $rc
