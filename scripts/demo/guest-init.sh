#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# /init of the demo initramfs: mount what the demo reads, run the scenarios
# named by demo= on the kernel command line, power off. Every line the host parses starts with "@@".
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t debugfs debugfs /sys/kernel/debug
# The function tracer's files (scenario ftrace), unless already mounted;
# without them ftrace reports an error and the others go on.
if [ -d /sys/kernel/tracing ] && ! grep -q ' /sys/kernel/tracing ' /proc/mounts; then
	mount -t tracefs nodev /sys/kernel/tracing
fi
echo "@@ boot ok $(uname -r) cpus=$(grep -c ^processor /proc/cpuinfo)"
# The scenarios to run: demo=a,b,... on the kernel command line.
scenarios=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^demo=//p' | tr ',' ' ')
rc=0
for s in $scenarios; do
	case $s in
	sample) sh /demo/sample.sh || rc=1 ;;
	flip|lookup|txn|ftrace|scale|qpw|branch|pipe|irqsoff) sh /demo/bench.sh "$s" || rc=1 ;;
	# The flips come from CPU 0, a housekeeping CPU.
	isolation|noise) taskset -c 0 sh /demo/bench.sh "$s" || rc=1 ;;
	*) echo "@@ error unknown scenario $s"; rc=1 ;;
	esac
done
# The kernel log, for the host, whose console shows warnings only
# (loglevel=4): every warning, splat and sanitizer report of the boot
# reaches it and fails the demo (the boot's log_buf_len= holds the log
# whole).
dmesg | sed 's/^/@@ kmsg /'
echo "@@ end $rc"
# reboot -f does not wait for the console: the end of a long log, still
# in the tty's buffer, would be lost. stty sets the console's mode again
# with TCSADRAIN, which waits until its output is sent.
stty "$(stty -g)" 2> /dev/null || sleep 1
# With -no-reboot, QEMU exits when the guest reboots.
reboot -f
