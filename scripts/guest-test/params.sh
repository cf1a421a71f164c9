#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Bad values of the deferral switches' boot parameters: make test's second
# user-space boot passes context_tracking_work.sync_core=maybe and
# context_tracking_work.tlb_flush=maybe. Each is refused with a warning
# naming it and the value the switch keeps, which is what its debugfs file
# then reads. The plan counts the values given: a boot without them would
# have no case here, and scripts/guest-test.sh runs it in that boot only.
. /tests/cases.inc
given=
for p in sync_core tlb_flush; do
	case " $(cat /proc/cmdline) " in
	*" context_tracking_work.$p=maybe "*) given="$given $p" ;;
	esac
done
set -- $given
plan $#
rc=0
for p in $given; do
	param=context_tracking_work.$p
	file=/sys/kernel/debug/context_tracking_work/$p
	t=${p}_bad_boot_param
	line=$(dmesg | grep -m1 "$param=maybe: expected on or off; keeping ")
	kept=${line##* keeping }
	if [ -z "$line" ]; then
		fail $t "no warning for $param=maybe in the kernel log"
	elif [ ! -e $file ]; then
		fail $t "$file missing"
	elif [ "$(cat $file)" != "$kept" ]; then
		fail $t "the warning says it keeps '$kept', $file reads '$(cat $file)'"
	else
		ok $t
	fi
done
exit $rc
