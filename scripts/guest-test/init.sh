#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# /init of make test's user-space boot: mount what the tests read, run
# every /tests/*.sh, power off. Every line the host parses starts with "@@".
/bin/busybox --install -s /bin
mount -t devtmpfs devtmpfs /dev
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t debugfs debugfs /sys/kernel/debug
echo "@@ boot ok $(uname -r) cpus=$(grep -c ^processor /proc/cpuinfo)"
rc=0
for t in /tests/*.sh; do
	sh "$t" || rc=1
done
echo "@@ end $rc"
# With -no-reboot, QEMU exits when the guest reboots.
reboot -f
