#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Bad values of the deferral switches' boot parameters: make test's second
# user-space boot passes text_poke_defer=maybe and tlb_defer=maybe. Each is
# refused with a warning naming it and the value the switch keeps, which is
# what its debugfs file then reads. A boot without them has no case here:
# the plan counts the values given.
. /tests/cases.inc
given=
for p in text_poke_defer:defer tlb_defer:defer_tlb; do
	case " $(cat /proc/cmdline) " in
	*" ${p%%:*}=maybe "*) given="$given $p" ;;
	esac
done
set -- $given
plan $#
rc=0
for p in $given; do
	param=${p%%:*}
	file=/sys/kernel/debug/text_poke/${p#*:}
	t=${param}_bad_boot_param
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
