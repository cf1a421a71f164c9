#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# /init of make test's user-space boots: mount what the tests read, run
# every /tests/*.sh (or those jlrs_tests= names), power off. Every line
# the host parses starts with "@@".
/bin/busybox --install -s /bin
mount -t devtmpfs devtmpfs /dev
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t debugfs debugfs /sys/kernel/debug
echo "@@ boot ok $(uname -r) cpus=$(grep -c ^processor /proc/cpuinfo)"
# jlrs_tests=a,b on the command line: only /tests/a.sh and /tests/b.sh.
only=$(sed -n 's/.*jlrs_tests=\([^ ]*\).*/\1/p' /proc/cmdline | tr , ' ')
rc=0
for t in /tests/*.sh; do
	if [ -n "$only" ]; then
		case " $only " in
		*" $(basename "$t" .sh) "*) ;;
		*) continue ;;
		esac
	fi
	sh "$t" || rc=1
done
# With kmemleak (make test's lockdep build): after every test, no object
# allocated by this project's code is left unreferenced.
[ -e /sys/kernel/debug/kmemleak ] && { sh /tests/kmemleak.inc || rc=1; }
echo "@@ end $rc"
# With -no-reboot, QEMU exits when the guest reboots.
reboot -f
