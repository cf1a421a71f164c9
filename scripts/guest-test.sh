#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The tests that need user space, which KUnit cannot give: boot the test
# kernel (built by scripts/kunit.sh) in QEMU (single-threaded TCG, 4 vCPUs)
# with a busybox initramfs holding the project's test modules, and run
# every scripts/guest-test/*.sh but init.sh in it, booted with qpw=1; then
# boot again with qpw=0 and bad deferral parameters, and run qpw.sh and
# params.sh alone. Each boot prints one KTAP document, with the kernel's
# helpers (tools/testing/selftests/kselftest/ktap_helpers.sh of the base
# tree, put in the initramfs): every test a subtest with its plan and its
# cases (scripts/guest-test/cases.inc, init.sh), the boot's last line the
# helpers' "# Totals: pass:P fail:F ...". Before each boot the log gets
# "@@ host boot I/N tests=A,B,...: ARGS", the tests the boot must run. The
# log goes to $1 (default $JLRS_CACHE/<version>/logs/guest-test.log), where
# summarize.py parses each boot with the kernel's KTAP parser
# (tools/testing/kunit/kunit_parser.py) and checks its plans. Exits
# non-zero when a boot fails a test.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
step guest-test
jlrs_base_env
# $JLRS_GUEST_BUILD: the build directory of another configuration to boot
# (its kernel, its modules), such as make test's PREEMPT_RT and KASAN ones;
# $JLRS_GUEST_ARGS: kernel arguments every boot gets, for such a build;
# $JLRS_GUEST_TIMEOUT: the seconds a boot of its tests may take (600; the
# debug builds' are several times slower).
JLRS_BUILD=${JLRS_GUEST_BUILD:-$JLRS_BUILD}
timeout=${JLRS_GUEST_TIMEOUT:-600}
[[ "$timeout" =~ ^[1-9][0-9]*$ ]] ||
	die "JLRS_GUEST_TIMEOUT=$timeout: not a number of seconds"

log=${1:-$JLRS_CACHE/$JLRS_BASE_VERSION/logs/guest-test.log}
kernel=$JLRS_BUILD/arch/x86/boot/bzImage
[ -f "$kernel" ] || die "no kernel image at $kernel: run scripts/kunit.sh first"
modules=("$JLRS_BUILD/arch/x86/kernel/text_poke_batch/tests/text_poke_mod_test.ko"
	"$JLRS_BUILD/arch/x86/kernel/text_poke_batch/tests/text_poke_mod_bad.ko"
	"$JLRS_BUILD/arch/x86/kernel/text_poke_batch/tests/text_poke_mod_idle.ko"
	"$JLRS_BUILD/arch/x86/kernel/text_poke_batch/tests/text_poke_mod_rs.ko")
for ko in "${modules[@]}"; do
	[ -f "$ko" ] || die "$ko missing: are CONFIG_TEXT_POKE_BATCH_MOD_TEST and _MOD_TEST_RS =m in the kunitconfig?"
done
jlrs_initramfs_tools
ktap=$JLRS_PRISTINE/tools/testing/selftests/kselftest/ktap_helpers.sh
[ -f "$ktap" ] || die "$ktap missing: run scripts/fetch-base.sh"

# $JLRS_GUEST_WORK: where the initramfs is made, for a run beside make test's.
work=${JLRS_GUEST_WORK:-$JLRS_CACHE/$JLRS_BASE_VERSION/guest-test}
mkdir -p "$work" "$(dirname "$log")"
jlrs_user_programs "$work"
# What this project's code is called, for the guest's checks of the kernel
# log, which leave out upstream's own data races as summarize.py does.
python3 "$JLRS_TOP/scripts/summarize.py" --project-code > "$work/project-code" ||
	die "scripts/summarize.py --project-code failed"
python3 "$JLRS_TOP/scripts/summarize.py" --lockless-mask-writers \
	> "$work/lockless-mask-writers" ||
	die "scripts/summarize.py --lockless-mask-writers failed"
{
	jlrs_initramfs_base "$JLRS_TOP/scripts/guest-test/init.sh"
	cat <<LIST
dir /lib 0755 0 0
dir /lib/modules 0755 0 0
dir /tests 0755 0 0
dir /tmp 1777 0 0
dir /demo 0755 0 0
file /demo/spin $work/spin 0755 0 0
file /demo/syscalls $work/syscalls 0755 0 0
file /demo/bpf_tail $work/bpf_tail 0755 0 0
file /stop.sh $JLRS_TOP/scripts/guest-test/unapplied.init 0755 0 0
LIST
	for ko in "${modules[@]}"; do
		echo "file /lib/modules/$(basename "$ko") $ko 0644 0 0"
	done
	# kmemleak's own test module, which leaks on purpose, where built.
	ko=$JLRS_BUILD/samples/kmemleak/kmemleak-test.ko
	[ ! -f "$ko" ] || echo "file /lib/modules/kmemleak-test.ko $ko 0644 0 0"
	for f in cases.inc audit.inc kmemleak.inc; do
		echo "file /tests/$f $JLRS_TOP/scripts/guest-test/$f 0644 0 0"
	done
	echo "file /tests/ktap_helpers.sh $ktap 0644 0 0"
	echo "file /tests/project-code $work/project-code 0644 0 0"
	echo "file /tests/lockless-mask-writers $work/lockless-mask-writers 0644 0 0"
	for t in "$JLRS_TOP"/scripts/guest-test/*.sh; do
		[ "$(basename "$t")" = init.sh ] && continue
		echo "file /tests/$(basename "$t") $t 0755 0 0"
	done
} > "$work/initramfs.list"
"$gen" "$work/initramfs.list" > "$work/initramfs.cpio" || die "gen_init_cpio failed"

# The tests init.sh runs in a boot without jlrs_tests=, and those it runs
# after them: the deferral audit's check, in a kernel with it, and the
# kmemleak scan, in a kernel with kmemleak.
all_tests=
for t in "$JLRS_TOP"/scripts/guest-test/*.sh; do
	t=$(basename "$t" .sh)
	[ "$t" = init ] || all_tests+=$t,
done
# The first boot's tests: all but two, which boot with others (below): the
# hotplug torture, since in 7.2 every offline of a housekeeping CPU leaves
# deadline bandwidth behind in the isolated CPUs' root domain, and after
# the seventh, dl_bw_deactivate() refuses to take an isolated CPU offline
# (-EBUSY), upstream's bug, which the torture would trip for qpw.sh's and
# tlb.sh's own hotplug cases in the same boot; and the module loads under
# fault injection, some 150 of them, whose warnings (expected, and
# declared) are better in a boot of few tests. Nor the two that need a boot with no CPU isolated at
# boot: idle.sh and isopart.sh; nor tlbrefused.sh, which needs percpu_alloc=page.
first_tests=${all_tests/hotplug,/}
first_tests=${first_tests/modfaults,/}
first_tests=${first_tests/isopart,/}
first_tests=${first_tests/idle,/}
first_tests=${first_tests/tlbrefused,/}
# Nor params.sh, whose cases are the bad parameters only the second boot
# gives.
first_tests=${first_tests/params,/}
after_tests=
if grep -qx 'CONFIG_CONTEXT_TRACKING_WORK_DEBUG=y' "$JLRS_BUILD/.config" 2>/dev/null; then
	after_tests=audit,
fi
if grep -qx 'CONFIG_DEBUG_KMEMLEAK=y' "$JLRS_BUILD/.config" 2>/dev/null; then
	after_tests=${after_tests}kmemleak,
fi
status=0

# results: the lines of a boot's KTAP document (standard input) that give
# a result, or say why a case failed, to standard error.
results() {
	grep -E '^ *((not )?ok [0-9]|# [a-z0-9_]+: )' | sed 's/^ */[guest-test] /' >&2 || true
}

# guest SECONDS OUT ARGS: boots the test kernel with the initramfs and
# kernel arguments ARGS more, its console in OUT, for SECONDS at most;
# returns QEMU's status (124: timed out).
guest() {
	local rc
	set +e
	timeout "$1" qemu-system-x86_64 -accel tcg,thread=single -smp 4 -m 1024 \
		-cpu qemu64,+pdpe1gb \
		-nographic -no-reboot -bios qboot.rom \
		-kernel "$kernel" -initrd "$work/initramfs.cpio" \
		-append "console=ttyS0 kunit.enable=0 ftrace=nop panic=-1 oops=panic loglevel=4 log_buf_len=8M tsc=reliable ${JLRS_GUEST_ARGS:-} $3" \
		2>&1 | jlrs_console > "$2"
	rc=${PIPESTATUS[0]}
	set -e
	return "$rc"
}

# boot I N ARGS...: boot I of N, with these kernel arguments more, its
# output appended to $log. Sets status to 1 if a test of the guest failed
# (its "# Totals:" line's fail: count), and stops there if the guest did
# not end.
# ARGS "-noiso" (not passed on): no CPU isolated at boot.
boot() {
	local i=$1 n=$2 part=$work/boot.log rc t0 end tests=$all_tests a args=()
	local iso="nohz_full=2-3 isolcpus=2-3 rcu_nocbs=2-3" what="CPUs 2-3 isolated"
	shift 2
	for a in "$@"; do
		case $a in
		jlrs_tests=*) tests=${a#jlrs_tests=}, ;;
		-noiso) iso= what="no CPU isolated"; continue ;;
		esac
		args+=("$a")
	done
	set -- "${args[@]}"
	tests=$tests$after_tests
	echo "@@ host boot $i/$n tests=${tests%,}: $iso $*" >> "$log"
	msg "booting the test kernel with user space (TCG, 4 vCPUs, $what, $*)"
	# ftrace=nop: ftrace's startup self-tests already ran in the KUnit boots.
	# CPUs 2 and 3 isolated, as make demo's isolation boot, for defer.sh.
	# tsc=reliable: the clocksource watchdog's skew check otherwise sends a
	# function-call IPI to every online CPU in turn, isolated or not, every
	# few seconds: upstream noise that isolated systems boot without, and
	# that would hide what text poking sends.
	rc=0 t0=$(date +%s)
	guest "$timeout" "$part" "$iso $*" || rc=$?
	msg "boot $i/$n: $(($(date +%s) - t0)) s of at most $timeout"
	cat "$part" >> "$log"
	# A console cut short by the guest's reset ends mid-line: the next
	# boot's "@@ host boot" line starts a line of its own.
	[ -z "$(tail -c 1 "$part")" ] || echo >> "$log"
	results < "$part"
	[ "$rc" = 124 ] && die "the guest ($*) timed out after $timeout s (log: $log)"
	end=$(sed -n 's/^# Totals: //p' "$part" | tail -n 1)
	[ -n "$end" ] || die "the guest ($*) did not finish its tests (log: $log)"
	case " $end" in
	*" fail:0 "*) ;;
	*)
		msg "the guest ($*) ended its tests with '$end' (log: $log)"
		status=1
		;;
	esac
}

# stop_boot I N: boot I of N, whose init (unapplied.init) makes a batch of
# smp_text_poke_batch_add() that cannot be applied: its caller cannot be
# told, so the kernel must stop there, with the Rust batch's panic, and
# never return to the caller. The outcome goes to $log as a boot of one
# test, "unapplied", with one case, in KTAP.
stop_boot() {
	local i=$1 n=$2 part=$work/stop.log rc why= t=unapplied_batch_stops_the_kernel
	echo "@@ host boot $i/$n tests=unapplied: rdinit=/stop.sh" >> "$log"
	msg "booting the test kernel to make a batch that cannot be applied"
	rc=0
	guest 300 "$part" rdinit=/stop.sh || rc=$?
	[ "$rc" != 124 ] || why="; the guest timed out"
	grep -q '^@@ stop ready' "$part" || why="$why; the guest never made the batch"
	grep -q 'a batch of text pokes was not applied, and its caller cannot be told' "$part" ||
		why="$why; no panic naming the batch that was not applied"
	! grep -q 'returned to its caller\|^@@ stop returned' "$part" ||
		why="$why; the batch returned to its caller, which went on"
	[ -z "$why" ] || status=1
	(
		# shellcheck disable=SC1090 # the base tree's
		. "$ktap"
		result=ktap_test_pass
		[ -z "$why" ] || result=ktap_test_fail
		ktap_print_header
		ktap_set_plan 1
		echo "  # Subtest: unapplied"
		# The subtest's lines, numbered on their own.
		(
			ktap_set_plan 1
			[ -z "$why" ] || echo "# $t: ${why#; } (console: $part)"
			$result "$t"
		) | sed 's/^/  /'
		$result unapplied
		ktap_print_totals
	) >> "$log"
	sed -n '/^@@ host boot '"$i"'\//,$p' "$log" | results
}

: > "$log"
# Every test but the hotplug torture and the module load faults with
# qpw=1; the qpw test again with qpw=0, which is chosen at boot, and with
# bad values of the deferral switches' boot parameters, which params.sh
# checks; the deferral tests again with page table isolation, whose CR3
# switch every entry and exit then makes (QEMU 7.2's TCG has neither PCID
# nor INVPCID: tlb.sh reports the flush path that ran), and between them
# the hotplug torture (its five offlines of CPU 1 leave tlb.sh's offline
# of CPU 3 within 7.2's limit) and the module load faults (after
# defer.sh's and hotplug.sh's checks of the log); a boot with no CPU isolated and no qpw=, where idle CPUs
# take deferred syncs (idle.sh, which needs no nohz_full=), and then a
# cpuset partition isolates CPUs at run time (isopart.sh, which also runs
# last with qpw=0); a boot with percpu_alloc=page, whose per-CPU memory
# makes the boot refuse kernel TLB flush deferral for good (tlbrefused.sh);
# then a boot that must stop.
boots=("qpw=1 jlrs_tests=${first_tests%,}"
	"qpw=0 context_tracking_work.sync_core=maybe context_tracking_work.tlb_flush=maybe jlrs_tests=qpw,params,isopart"
	"pti=on jlrs_tests=defer,hotplug,modfaults,tlb"
	"-noiso jlrs_tests=idle,isopart"
	"percpu_alloc=page jlrs_tests=tlbrefused")
# $JLRS_GUEST_TESTS=a,b: one boot (qpw=1, or the arguments of
# $JLRS_GUEST_BOOT) of those tests alone, for a test under development;
# make test never sets it.
if [ -n "${JLRS_GUEST_TESTS:-}" ]; then
	# shellcheck disable=SC2086 # the boot's arguments, one a word
	boot 1 1 ${JLRS_GUEST_BOOT:-qpw=1} "jlrs_tests=$JLRS_GUEST_TESTS"
	exit $status
fi
n=$((${#boots[@]} + 1))
for i in "${!boots[@]}"; do
	# shellcheck disable=SC2086 # a boot's arguments, one a word
	boot $((i + 1)) $n ${boots[i]}
done
stop_boot $n $n
exit $status
