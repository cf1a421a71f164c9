#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# /init of make test's user-space boots: mount what the tests read, run
# every /tests/*.sh (or those jlrs_tests= names), power off. Every line
# the host parses starts with "@@".
#
# Each test runs between "@@ run NAME" and "@@ done NAME STATUS" (then
# "@@ time NAME SECONDS", how long it took) and declares first the cases
# it reports ("@@ plan NAME N", cases.inc); one that reported other than
# its plan, exited non-zero with no case failed, or was killed gets a
# failed case "NAME-complete" saying so. The boot ends with "@@ end 0",
# or "@@ end 1" after any failure.
/bin/busybox --install -s /bin
mount -t devtmpfs devtmpfs /dev
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t debugfs debugfs /sys/kernel/debug
echo "@@ boot ok $(uname -r) cpus=$(grep -c ^processor /proc/cpuinfo)"
rc=0
planned=0
reported=0
tally=/tmp/jlrs-tally

# incomplete NAME WHY: test NAME did not report as it planned.
incomplete() {
	echo "@@ case $1-complete FAILED: $2"
	rc=1
}

# kmsg: the kernel log's lines since the last kmsg, each as "@@ kmsg
# LINE", for the host, whose console shows warnings only (loglevel=4),
# so that it sees every warning, splat and sanitizer report. The log is
# never cleared (the boot's log_buf_len= holds it whole).
kmsg_seen=0
kmsg() {
	dmesg > /tmp/jlrs-kmsg-all
	tail -n +$((kmsg_seen + 1)) /tmp/jlrs-kmsg-all | sed 's/^/@@ kmsg /'
	kmsg_seen=$(wc -l < /tmp/jlrs-kmsg-all)
}
# The boot's own log, before the first test.
kmsg

# run NAME FILE: runs the test FILE, then holds what it reported (the
# lines cases.inc wrote to $tally) against its plan.
run() {
	echo "@@ run $1"
	: > $tally
	t0=$(cut -d. -f1 /proc/uptime)
	JLRS_TALLY=$tally sh "$2"
	st=$?
	echo "@@ done $1 $st"
	echo "@@ time $1 $(($(cut -d. -f1 /proc/uptime) - t0)) s"
	kmsg
	[ $st = 0 ] || rc=1
	plans=$(grep -c '^@@ plan ' $tally)
	p=$(sed -n 's/^@@ plan [^ ]* \([0-9][0-9]*\)$/\1/p' $tally)
	n=$(grep -c '^@@ case ' $tally)
	failed=$(grep -c '^@@ case [^ ]* FAILED' $tally)
	err=$(sed -n 's/^@@ error [^:]*: //p' $tally | tail -n 1)
	reported=$((reported + n))
	why=
	if [ "$plans" = 0 ]; then
		why="no plan (cases.inc's plan N), cases reported: $n"
	elif [ "$plans" != 1 ] || [ -z "$p" ]; then
		why="$plans plan lines, not one 'plan N', cases reported: $n"
	else
		planned=$((planned + p))
		[ "$n" = "$p" ] || why="reported $n of its $p planned cases"
	fi
	if [ $st -gt 128 ]; then
		why="${why:+$why; }killed by signal $((st - 128))"
	elif [ $st != 0 ] && [ "$failed" = 0 ]; then
		why="${why:+$why; }exit $st with no case failed"
	elif [ -n "$why" ]; then
		why="$why; exit $st"
	fi
	[ -z "$why" ] || incomplete "$1" "$why${err:+: $err}"
}

# jlrs_tests=a,b on the command line: only /tests/a.sh and /tests/b.sh.
only=$(sed -n 's/.*jlrs_tests=\([^ ]*\).*/\1/p' /proc/cmdline | tr , ' ')
for t in $only; do
	[ -f /tests/$t.sh ] || incomplete "$t" "jlrs_tests= names it, and there is no /tests/$t.sh"
done
for t in /tests/*.sh; do
	name=$(basename "$t" .sh)
	if [ -n "$only" ]; then
		case " $only " in
		*" $name "*) ;;
		*) continue ;;
		esac
	fi
	run "$name" "$t"
done
# With the deferral audit: after every test, no deferred work was lost.
grep -q '^skipped_at_entry ' /sys/kernel/debug/context_tracking_work/stats 2>/dev/null &&
	run audit /tests/audit.inc
# With kmemleak (make test's PREEMPT_RT build): after every test, no object
# allocated by this project's code is left unreferenced.
[ -e /sys/kernel/debug/kmemleak ] && run kmemleak /tests/kmemleak.inc
kmsg
echo "@@ info boot planned=$planned reported=$reported"
[ "$planned" = "$reported" ] || rc=1
echo "@@ end $rc"
# reboot -f does not wait for the console: the end of a long log, still
# in the tty's buffer, would be lost. stty sets the console's mode again
# with TCSADRAIN, which waits until its output is sent.
stty "$(stty -g)" 2> /dev/null || sleep 1
# With -no-reboot, QEMU exits when the guest reboots.
reboot -f
