#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Demo scenario "sample": flip the Rust sample's static key and show its
# sites. Runs inside the guest.
echo "@@ progress sample: flip the Rust sample key through debugfs"
d=/sys/kernel/debug/rust_static_key
if [ ! -d $d ]; then
	echo "@@ error sample: $d missing (CONFIG_SAMPLE_RUST_STATIC_KEY off?)"
	exit 1
fi
show() {
	echo "@@ state enabled=$(cat $d/enabled) count=$(cat $d/count) sites=$(cat $d/sites) $(cat $d/run)"
	echo "@@ nop=$(grep -c ' nop ok' $d/site_state) jmp=$(grep -c ' jmp ok' $d/site_state) wrong=$(grep -c WRONG $d/site_state)"
	head -n 3 $d/site_state | sed 's/^/@@   /'
}
echo "@@ step key as booted"
show
echo "@@ step echo 1 > enabled"
echo 1 > $d/enabled
show
echo "@@ step echo 2 > enabled (not a documented value)"
if echo 2 > $d/enabled 2>/dev/null; then
	echo "@@ error: writing 2 was accepted"
else
	echo "@@ refused, key unchanged: enabled=$(cat $d/enabled)"
fi
echo "@@ step echo 0 > enabled"
echo 0 > $d/enabled
show
s=/sys/kernel/debug/text_poke_batch/stats
if [ -r $s ]; then
	echo "@@ step text-poke counters after the flips ($s)"
	sed 's/^/@@   /' $s
fi
echo "@@ done sample"
