#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# /init of make test's user-space boots: mount what the tests read, run
# every /tests/*.sh (or those jlrs_tests= names), power off.
#
# The boot prints one KTAP document (Documentation/dev-tools/ktap.rst)
# with the kernel's helpers (/tests/ktap_helpers.sh): its plan, the count
# of tests it runs, then each test as a subtest, "# Subtest: NAME", its
# cases (cases.inc) and its result, "ok I NAME" or "not ok I NAME". A test
# that reported other than its plan, exited non-zero with no case failed,
# or was killed fails, a diagnostic "# NAME: why" before its result; as
# does a test jlrs_tests= names that is not there. The kernel log's new
# lines follow each test, "# kmsg LINE". The boot ends with the helpers'
# "# Totals: pass:P fail:F ...", F the tests failed.
/bin/busybox --install -s /bin
mount -t devtmpfs devtmpfs /dev
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t debugfs debugfs /sys/kernel/debug
. /tests/ktap_helpers.sh
tally=/tmp/jlrs-tally

# msg WORDS: a diagnostic line, without pathname expansion (the helpers
# echo their arguments unquoted).
msg() {
	set -f
	ktap_print_msg "$@"
	set +f
}

# kmsg: the kernel log's lines since the last kmsg, each as "# kmsg
# LINE", for the host, whose console shows warnings only (loglevel=4),
# so that it sees every warning, splat and sanitizer report. The log is
# never cleared (the boot's log_buf_len= holds it whole).
kmsg_seen=0
kmsg() {
	dmesg > /tmp/jlrs-kmsg-all
	tail -n +$((kmsg_seen + 1)) /tmp/jlrs-kmsg-all | sed 's/^/# kmsg /'
	kmsg_seen=$(wc -l < /tmp/jlrs-kmsg-all)
}

# run NAME FILE: runs the test FILE as subtest NAME, then holds what it
# reported (the KTAP lines cases.inc wrote to $tally) against its plan.
run() {
	echo "  # Subtest: $1"
	: > $tally
	t0=$(cut -d. -f1 /proc/uptime)
	JLRS_TALLY=$tally sh "$2"
	st=$?
	msg "$1 took $(($(cut -d. -f1 /proc/uptime) - t0)) s, exit $st"
	kmsg
	plans=$(grep -c '^ *1\.\.' $tally)
	p=$(sed -n 's/^ *1\.\.\([0-9][0-9]*\)$/\1/p' $tally)
	n=$(grep -cE '^ *(not )?ok ' $tally)
	failed=$(grep -c '^ *not ok ' $tally)
	err=$(sed -n 's/^ *# error: //p' $tally | tail -n 1)
	why=
	if [ "$plans" = 0 ]; then
		why="no plan (cases.inc's plan N), cases reported: $n"
	elif [ "$plans" != 1 ] || [ -z "$p" ]; then
		why="$plans plan lines, not one 'plan N', cases reported: $n"
	elif [ "$n" != "$p" ]; then
		why="reported $n of its $p planned cases"
	fi
	if [ $st -gt 128 ]; then
		why="${why:+$why; }killed by signal $((st - 128))"
	elif [ $st != 0 ] && [ "$failed" = 0 ]; then
		why="${why:+$why; }exit $st with no case failed"
	elif [ -n "$why" ]; then
		why="$why; exit $st"
	fi
	[ -z "$why" ] || msg "$1: $why${err:+: $err}"
	if [ -z "$why" ] && [ $st = 0 ] && [ "$failed" = 0 ]; then
		ktap_test_pass "$1"
	else
		ktap_test_fail "$1"
	fi
}

# The tests: jlrs_tests=a,b on the command line, only /tests/a.sh and
# /tests/b.sh; else every /tests/*.sh. Then, with the deferral audit,
# audit.inc: after every test, no deferred work was lost. With kmemleak
# (make test's PREEMPT_RT build), kmemleak.inc: after every test, no object
# allocated by this project's code is left unreferenced.
only=$(sed -n 's/.*jlrs_tests=\([^ ]*\).*/\1/p' /proc/cmdline | tr , ' ')
tests=
for t in /tests/*.sh; do
	name=$(basename "$t" .sh)
	case " ${only:-$name} " in
	*" $name "*) tests="$tests $name:$t" ;;
	esac
done
for t in $only; do
	[ -f /tests/$t.sh ] || tests="$tests $t:"
done
grep -q '^skipped_at_entry ' /sys/kernel/debug/context_tracking_work/stats 2>/dev/null &&
	tests="$tests audit:/tests/audit.inc"
[ -e /sys/kernel/debug/kmemleak ] && tests="$tests kmemleak:/tests/kmemleak.inc"

ktap_print_header
ktap_set_plan $(echo $tests | wc -w)
msg "boot $(uname -r) cpus=$(grep -c ^processor /proc/cpuinfo)"
# The boot's own log, before the first test.
kmsg
for t in $tests; do
	if [ -n "${t#*:}" ]; then
		run "${t%%:*}" "${t#*:}"
	else
		msg "${t%:}: jlrs_tests= names it, and there is no /tests/${t%:}.sh"
		ktap_test_fail "${t%:}"
	fi
done
kmsg
ktap_print_totals
# reboot -f does not wait for the console: the end of a long log, still
# in the tty's buffer, would be lost. stty sets the console's mode again
# with TCSADRAIN, which waits until its output is sent.
stty "$(stty -g)" 2> /dev/null || sleep 1
# With -no-reboot, QEMU exits when the guest reboots.
reboot -f
