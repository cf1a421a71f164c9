#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The init of scripts/profile.sh's guest: with text_poke_batch=MODE, two flips of
# the benchmark key of SITES sites not profiled, then FLIPS flips, then one
# of the one-site key. The profiler dumps its counts at every benchmark
# command: its third dump covers the FLIPS flips alone.
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sys /sys
/bin/busybox mount -t debugfs debugfs /sys/kernel/debug
arg() {
	/bin/busybox sed -n "s/.*profile_$1=\([a-z0-9]*\).*/\1/p" /proc/cmdline
}
m=/sys/kernel/debug/text_poke_batch/mode
b=/sys/kernel/debug/text_poke_bench/run
if echo "$(arg mode)" > $m && echo "flip $(arg sites) 2" > $b &&
	echo "flip $(arg sites) $(arg flips)" > $b && echo "flip 1 1" > $b; then
	echo "@@ profile done"
else
	echo "@@ profile failed"
fi
/bin/busybox reboot -f
