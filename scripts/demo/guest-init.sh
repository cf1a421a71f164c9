#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# /init of the demo initramfs: mount what the demo reads, run the scenario
# script, power off. Every line the host parses starts with "@@".
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t debugfs debugfs /sys/kernel/debug
echo "@@ boot ok $(uname -r) cpus=$(grep -c ^processor /proc/cpuinfo)"
sh /demo/run.sh
echo "@@ end $?"
# With -no-reboot, QEMU exits when the guest reboots.
reboot -f
