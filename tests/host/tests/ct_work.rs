// SPDX-License-Identifier: GPL-2.0

//! Every interleaving (loom) of a sender deferring `sync_core()` to a CPU against that CPU
//! entering and leaving the kernel, with the protocol of
//! `kernel/context_tracking_work/ct_work.rs`.
//!
//! The sender writes new text, then either defers the sync to the target or sends it an IPI and
//! waits until the target took it; then the round is done. The target enters the kernel (for a
//! system call, or to take the IPI), runs the work it took at entry, takes a pending IPI, runs
//! kernel text and returns to user space, twice, then keeps taking IPIs until the sender is
//! done. Whenever the target runs kernel text, it must have serialised since the last text of
//! every round done: no round may be both not interrupted and not run. Back in user space, it
//! takes an NMI, which runs kernel text too, and a machine check nests in it: before the
//! NMI's entry took the word, or between that and the NMI's handler (an entry while RCU was
//! not watching, as the NMI's, and with its own level). At the end, one more entry must catch
//! up on whatever is still pending. Four broken variants show the check fails, one of them the
//! single "this NMI came from user space" flag that a nested exit consumes.
//!
//! The same model runs with the target going idle instead of to user space, for some or all of
//! its exits from the kernel: idle exit takes the word as kernel entry does, and the NMI is an
//! interrupt in idle. An idle exit that reads the word without taking it is caught.

use jump_label_rs_host::ct_work::{self, Context, Deferral, Levels, Value, Word, Work};
use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
use loom::sync::Arc;
use loom::thread;

/// Sync rounds the sender makes.
const ROUNDS: u32 = 2;
/// System calls the target makes.
const ENTRIES: u32 = 2;

struct LoomWord(AtomicU32);

impl Word for LoomWord {
    fn load(&self) -> Value {
        Value::from_raw(self.0.load(SeqCst))
    }

    fn compare_exchange(&self, old: Value, new: Value) -> Result<Value, Value> {
        self.0
            .compare_exchange(old.raw(), new.raw(), SeqCst, SeqCst)
            .map(Value::from_raw)
            .map_err(Value::from_raw)
    }

    fn exchange(&self, new: Value) -> Value {
        Value::from_raw(self.0.swap(new.raw(), SeqCst))
    }

    fn store(&self, new: Value) {
        self.0.store(new.raw(), SeqCst)
    }
}

/// The nesting levels: only the target's thread touches them.
struct LoomLevels(AtomicU32);

impl Levels for LoomLevels {
    fn load(&self) -> u32 {
        self.0.load(SeqCst)
    }

    fn store(&self, levels: u32) {
        self.0.store(levels, SeqCst)
    }
}

/// The two sides of the protocol, as the model runs them.
#[derive(Clone, Copy)]
struct Protocol {
    defer: fn(&LoomWord, Work) -> Deferral,
    enter: fn(&LoomWord) -> Work,
    nmi_enter: fn(&LoomWord, &LoomLevels) -> Work,
    nmi_exit: fn(&LoomWord, &LoomLevels),
    idle_exit: fn(&LoomWord) -> Work,
}

fn defer(word: &LoomWord, work: Work) -> Deferral {
    ct_work::defer(word, work)
}

/// As `ct_work_user_exit()` does: a word that says kernel is only read, one that says user
/// with no work becomes kernel in one compare-and-exchange.
fn enter(word: &LoomWord) -> Work {
    if ct_work::quiet(word.load()) {
        return Work::NONE;
    }
    ct_work::enter_from(word, Value::USER)
}

/// Broken: entry from user space takes the work and leaves the word saying plain kernel
/// before it ran it.
fn enter_unmarked(word: &LoomWord) -> Work {
    ct_work::enter(word)
}

/// As `ct_work_nmi_enter()` in `include/linux/context_tracking_work.h` does: a word that says
/// kernel pushes an empty level there.
fn nmi_enter(word: &LoomWord, levels: &LoomLevels) -> Work {
    if ct_work::quiet(word.load()) {
        levels.store(levels.load() << ct_work::LEVEL_BITS);
        return Work::NONE;
    }
    ct_work::nmi_enter(word, levels)
}

/// As `ct_work_nmi_exit()` does.
fn nmi_exit(word: &LoomWord, levels: &LoomLevels) {
    let all = levels.load();
    if all & (ct_work::LEVEL_USER | ct_work::LEVEL_IDLE) == 0 {
        levels.store(all >> ct_work::LEVEL_BITS);
        return;
    }
    ct_work::nmi_exit(word, levels)
}

/// As `ct_work_idle_exit()` does: the same as entry from user space, from idle.
fn idle_exit(word: &LoomWord) -> Work {
    if ct_work::quiet(word.load()) {
        return Work::NONE;
    }
    ct_work::enter_from(word, Value::IDLE)
}

const CORRECT: Protocol = Protocol {
    defer,
    enter,
    nmi_enter,
    nmi_exit,
    idle_exit,
};

/// Broken: idle exit sees no work of its own to run, and marks the word kernel.
fn idle_exit_forgetting(word: &LoomWord) -> Work {
    word.store(Value::KERNEL);
    Work::NONE
}

/// Broken: an NMI only reads the word, leaving the work for the next entry.
fn nmi_enter_peek(word: &LoomWord, levels: &LoomLevels) -> Work {
    let user = word.load().context() == Context::User;
    levels.store(levels.load() << ct_work::LEVEL_BITS | u32::from(user));
    Work::NONE
}

/// Broken: levels, but the word says plain kernel as soon as the work is taken, so a nested
/// entry runs nothing, even when the entry it nests in has not run that work yet.
fn nmi_enter_ignore_taking(word: &LoomWord, levels: &LoomLevels) -> Work {
    let all = levels.load();
    let (left, work) = ct_work::interrupt(word);
    levels.store(all << ct_work::LEVEL_BITS | u32::from(left == Context::User));
    work
}

/// Broken: one flag for all levels, as a plain per-CPU bool would be. An entry that finds the
/// word saying kernel leaves it alone (the word is only read then), so a machine check nesting
/// in an NMI from user space finds the NMI's flag set, and its exit gives the word back to user
/// space while the NMI's handler is still to run.
fn nmi_enter_one_flag(word: &LoomWord, levels: &LoomLevels) -> Work {
    if word.load() == Value::KERNEL {
        return Work::NONE;
    }
    let (left, work) = ct_work::interrupt(word);
    levels.store(u32::from(left == Context::User));
    work
}

fn nmi_exit_one_flag(word: &LoomWord, levels: &LoomLevels) {
    if levels.load() != 0 {
        levels.store(0);
        ct_work::exit(word);
    }
}

/// Broken: entry reads the word, then writes it, instead of exchanging it.
fn enter_load_store(word: &LoomWord) -> Work {
    let old = word.load();
    word.store(Value::KERNEL);
    old.work()
}

/// Broken: the sender checks the context, then writes its bits, instead of a
/// compare-and-exchange.
fn defer_load_store(word: &LoomWord, work: Work) -> Deferral {
    let old = word.load();
    if old.context() != Context::User {
        return Deferral::Ipi;
    }
    // The work bits start above the context bit.
    word.store(Value::from_raw(old.raw() | work.bits() << 1));
    Deferral::Deferred(work)
}

struct Cpu {
    word: LoomWord,
    levels: LoomLevels,
    /// The version of the kernel text the sender last wrote.
    text: AtomicU32,
    /// An IPI is pending on the target.
    ipi: AtomicBool,
    /// The last round the sender finished.
    done: AtomicU32,
    /// The text version the target last serialised on.
    synced: AtomicU32,
    /// The sender has finished.
    finished: AtomicBool,
    /// How many of the target's next returns to user space find deferral switched off.
    exits_off: AtomicU32,
    /// The target's exits from the kernel so far.
    exits: AtomicU32,
    /// Which of them go idle (bit `n` for exit `n`, the last bit for every later one) instead of
    /// to user space.
    idle_exits: u32,
}

/// The target's kernel entry: the work taken at entry, then a pending IPI; then it runs kernel
/// text, which must be at least as new as every round done. With `mc`, a machine check nests
/// between the entry's taking the work and running it.
fn kernel_visit(cpu: &Cpu, p: Protocol, mc: bool) {
    let work = if cpu.word.load().context() == Context::Idle {
        (p.idle_exit)(&cpu.word)
    } else {
        (p.enter)(&cpu.word)
    };
    if mc {
        mc_visit(cpu, p);
    }
    if work.contains(Work::SYNC_CORE) {
        cpu.synced.store(cpu.text.load(SeqCst), SeqCst);
    }
    if !work.is_empty() {
        ct_work::ran(&cpu.word);
    }
    if cpu.ipi.load(SeqCst) {
        cpu.synced.store(cpu.text.load(SeqCst), SeqCst);
        cpu.ipi.store(false, SeqCst);
    }
    let done = cpu.done.load(SeqCst);
    let synced = cpu.synced.load(SeqCst);
    assert!(
        synced >= done,
        "kernel text run after round {done} with text {synced}"
    );
    let n = cpu.exits.load(SeqCst);
    cpu.exits.store(n + 1, SeqCst);
    let off = cpu.exits_off.load(SeqCst);
    if cpu.idle_exits >> n.min(31) & 1 != 0 {
        ct_work::idle(&cpu.word);
    } else if off > 0 {
        cpu.exits_off.store(off - 1, SeqCst);
        ct_work::exit_off(&cpu.word);
    } else {
        ct_work::exit(&cpu.word);
    }
}

/// An entry while RCU was not watching runs the work it took.
fn nmi_run(cpu: &Cpu, work: Work) {
    if work.contains(Work::SYNC_CORE) {
        cpu.synced.store(cpu.text.load(SeqCst), SeqCst);
    }
    ct_work::nmi_ran(&cpu.word, &cpu.levels);
}

/// The handler of an entry while RCU was not watching (an NMI, a machine check) runs kernel
/// text, which must be at least as new as every round done.
fn nmi_handler(cpu: &Cpu, what: &str) {
    let done = cpu.done.load(SeqCst);
    let synced = cpu.synced.load(SeqCst);
    assert!(
        synced >= done,
        "{what} ran kernel text after round {done} with text {synced}"
    );
}

/// A machine check nesting in an NMI before the NMI's handler runs.
fn mc_visit(cpu: &Cpu, p: Protocol) {
    let work = (p.nmi_enter)(&cpu.word, &cpu.levels);
    nmi_run(cpu, work);
    nmi_handler(cpu, "machine check");
    (p.nmi_exit)(&cpu.word, &cpu.levels);
}

/// An NMI while the target is in user space: it runs kernel text (a perf handler, say) without
/// passing the entry of a system call, and cannot take an IPI; then the target is back in user
/// space. A machine check nests in it: before its entry took the word (`mc` 0), after that but
/// before the work it took ran (`mc` 1), after that but before its handler (`mc` 2), or not at
/// all; or in the first system call's entry, between taking the work and running it (`mc`
/// [`MC_AT_ENTRY`]).
fn nmi_visit(cpu: &Cpu, p: Protocol, mc: u32) {
    if mc == 0 {
        mc_visit(cpu, p);
    }
    let work = (p.nmi_enter)(&cpu.word, &cpu.levels);
    if mc == 1 {
        mc_visit(cpu, p);
    }
    nmi_run(cpu, work);
    if mc == 2 {
        mc_visit(cpu, p);
    }
    nmi_handler(cpu, "NMI");
    (p.nmi_exit)(&cpu.word, &cpu.levels);
    assert_eq!(cpu.levels.load(), 0, "levels left behind");
}

fn model(p: Protocol, mc: u32) {
    model_with(p, mc, Value::USER, 0);
}

/// Every exit from the kernel goes idle.
const ALL_IDLE: u32 = u32::MAX;
/// The first exit goes idle, the others to user space.
const FIRST_IDLE: u32 = 1;
/// The first exit goes to user space, the others idle.
const THEN_IDLE: u32 = !1;

/// The model with the target idle at the start, and its exits from the kernel going idle as
/// `idle_exits` says.
fn model_idle(p: Protocol, mc: u32, idle_exits: u32) {
    model_all(p, mc, Value::IDLE, 0, idle_exits);
}

/// The model with the target's word at `start` and its first `exits_off` returns to user space
/// made with deferral switched off.
fn model_with(p: Protocol, mc: u32, start: Value, exits_off: u32) {
    model_all(p, mc, start, exits_off, 0);
}

fn model_all(p: Protocol, mc: u32, start: Value, exits_off: u32, idle_exits: u32) {
    // At most four preemptions: the broken variants are caught with two, and the unbounded
    // exploration, which passes too, takes about nine minutes.
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(4);
    builder.check(move || {
        let cpu = Arc::new(Cpu {
            word: LoomWord(AtomicU32::new(start.raw())),
            levels: LoomLevels(AtomicU32::new(0)),
            text: AtomicU32::new(0),
            ipi: AtomicBool::new(false),
            done: AtomicU32::new(0),
            synced: AtomicU32::new(0),
            finished: AtomicBool::new(false),
            exits_off: AtomicU32::new(exits_off),
            exits: AtomicU32::new(0),
            idle_exits,
        });
        let sender = {
            let cpu = cpu.clone();
            thread::spawn(move || {
                for round in 1..=ROUNDS {
                    cpu.text.store(round, SeqCst);
                    if !matches!((p.defer)(&cpu.word, Work::SYNC_CORE), Deferral::Deferred(_)) {
                        cpu.ipi.store(true, SeqCst);
                        while cpu.ipi.load(SeqCst) {
                            thread::yield_now();
                        }
                    }
                    cpu.done.store(round, SeqCst);
                }
                cpu.finished.store(true, SeqCst);
            })
        };
        for i in 0..ENTRIES {
            kernel_visit(&cpu, p, mc == MC_AT_ENTRY && i == 0);
        }
        nmi_visit(&cpu, p, mc);
        // Back in user space for good: only an IPI brings it into the kernel.
        while !cpu.finished.load(SeqCst) {
            if cpu.ipi.load(SeqCst) {
                kernel_visit(&cpu, p, false);
            }
            thread::yield_now();
        }
        sender.join().unwrap();
        // Nothing was lost: the next entry catches up on every round.
        kernel_visit(&cpu, p, false);
        assert_eq!(cpu.synced.load(SeqCst), ROUNDS);
    });
}

/// No machine check.
const NO_MC: u32 = 3;
/// A machine check in a system call's entry.
const MC_AT_ENTRY: u32 = 4;

#[test]
fn deferral_never_loses_a_sync() {
    model(CORRECT, NO_MC);
}

#[test]
fn machine_check_before_the_nmi_took_the_word() {
    model(CORRECT, 0);
}

#[test]
fn machine_check_before_the_nmi_ran_its_work() {
    model(CORRECT, 1);
}

#[test]
fn machine_check_before_the_nmi_handler() {
    model(CORRECT, 2);
}

#[test]
fn machine_check_before_the_entry_ran_its_work() {
    model(CORRECT, MC_AT_ENTRY);
}

/// Idle instead of user space: the target starts idle, and goes idle after every visit to the
/// kernel; it takes an interrupt in idle, in which a machine check nests.
#[test]
fn idle_deferral_never_loses_a_sync() {
    model_idle(CORRECT, NO_MC, ALL_IDLE);
    model_idle(CORRECT, MC_AT_ENTRY, ALL_IDLE);
}

#[test]
fn machine_check_in_an_interrupt_in_idle() {
    for mc in 0..=2 {
        model_idle(CORRECT, mc, ALL_IDLE);
    }
}

/// Idle and user space in turn.
#[test]
fn idle_and_user_space_in_turn() {
    model_idle(CORRECT, NO_MC, FIRST_IDLE);
    model_idle(CORRECT, 1, THEN_IDLE);
    model_all(CORRECT, 2, Value::USER, 0, FIRST_IDLE);
}

#[test]
fn idle_exit_forgetting_its_work_is_caught() {
    let broken = Protocol {
        idle_exit: idle_exit_forgetting,
        ..CORRECT
    };
    // Never idle: idle exit never runs.
    model(broken, NO_MC);
    assert!(std::panic::catch_unwind(|| model_idle(broken, NO_MC, ALL_IDLE)).is_err());
}

/// Deferral switched on while the target is in user space, where it went with deferral off.
#[test]
fn switched_on_while_in_user_space() {
    model_with(CORRECT, NO_MC, Value::USER_OFF, 0);
    model_with(CORRECT, 1, Value::USER_OFF, 0);
}

/// Deferral switched off and on again while the target runs.
#[test]
fn switched_off_and_on_again() {
    model_with(CORRECT, NO_MC, Value::USER, 1);
    model_with(CORRECT, MC_AT_ENTRY, Value::USER, 1);
}

#[test]
fn unmarked_entry_is_caught() {
    let broken = Protocol {
        enter: enter_unmarked,
        ..CORRECT
    };
    model(broken, NO_MC);
    assert!(std::panic::catch_unwind(|| model(broken, MC_AT_ENTRY)).is_err());
}

#[test]
fn broken_entry_is_caught() {
    let broken = Protocol {
        enter: enter_load_store,
        ..CORRECT
    };
    assert!(std::panic::catch_unwind(|| model(broken, NO_MC)).is_err());
}

#[test]
fn broken_sender_is_caught() {
    let broken = Protocol {
        defer: defer_load_store,
        ..CORRECT
    };
    assert!(std::panic::catch_unwind(|| model(broken, NO_MC)).is_err());
}

#[test]
fn broken_nmi_is_caught() {
    let broken = Protocol {
        nmi_enter: nmi_enter_peek,
        ..CORRECT
    };
    assert!(std::panic::catch_unwind(|| model(broken, NO_MC)).is_err());
}

#[test]
fn ignoring_work_taken_and_not_run_is_caught() {
    let broken = Protocol {
        nmi_enter: nmi_enter_ignore_taking,
        ..CORRECT
    };
    model(broken, 2);
    assert!(std::panic::catch_unwind(|| model(broken, 1)).is_err());
}

#[test]
fn one_flag_for_nested_entries_is_caught() {
    let broken = Protocol {
        nmi_enter: nmi_enter_one_flag,
        nmi_exit: nmi_exit_one_flag,
        ..CORRECT
    };
    // Without a machine check one flag does.
    model(broken, NO_MC);
    assert!(std::panic::catch_unwind(|| model(broken, 2)).is_err());
}

/// Requests coalesce, work is only recorded for a CPU in user space, and entry takes it all.
#[test]
fn work_word_rules() {
    loom::model(|| {
        let word = LoomWord(AtomicU32::new(Value::KERNEL.raw()));
        assert_eq!(ct_work::defer(&word, Work::SYNC_CORE), Deferral::Ipi);
        assert_eq!(word.load(), Value::KERNEL);
        ct_work::exit(&word);
        assert_eq!(word.load().context(), Context::User);
        assert_eq!(
            ct_work::defer(&word, Work::SYNC_CORE),
            Deferral::Deferred(Work::SYNC_CORE)
        );
        assert_eq!(
            ct_work::defer(&word, Work::SYNC_CORE),
            Deferral::Deferred(Work::NONE)
        );
        assert_eq!(
            ct_work::defer(&word, Work::TLB_FLUSH),
            Deferral::Deferred(Work::TLB_FLUSH)
        );
        let work = ct_work::enter(&word);
        assert_eq!(work, Work::SYNC_CORE.union(Work::TLB_FLUSH));
        assert_eq!(word.load(), Value::KERNEL);
        assert!(ct_work::enter(&word).is_empty());
    });
}

/// Idle takes syncs as user space does, but no kernel TLB flush, and an interrupt in idle gives
/// the word back saying idle, with no work, whatever nests in it.
#[test]
fn idle_word_rules() {
    loom::model(|| {
        let word = LoomWord(AtomicU32::new(Value::KERNEL.raw()));
        let levels = LoomLevels(AtomicU32::new(0));
        ct_work::idle(&word);
        assert_eq!(word.load(), Value::IDLE);
        assert_eq!(word.load().context(), Context::Idle);
        assert!(!ct_work::quiet(word.load()));
        assert_eq!(
            ct_work::defer(&word, Work::SYNC_CORE),
            Deferral::Deferred(Work::SYNC_CORE)
        );
        assert_eq!(word.load().context(), Context::Idle);
        // Not a kernel TLB flush: an idle CPU takes that as an IPI.
        assert_eq!(ct_work::defer(&word, Work::TLB_FLUSH), Deferral::Ipi);
        assert_eq!(
            ct_work::defer(&word, Work::SYNC_CORE.union(Work::TLB_FLUSH)),
            Deferral::Ipi
        );
        assert_eq!(word.load().work(), Work::SYNC_CORE);
        // An interrupt in idle takes it, and refuses more until it is back in idle.
        assert_eq!(ct_work::nmi_enter(&word, &levels), Work::SYNC_CORE);
        assert_eq!(levels.load(), ct_work::LEVEL_IDLE | ct_work::LEVEL_TOOK);
        assert_eq!(
            ct_work::nmi_enter(&word, &levels),
            Work::SYNC_CORE.union(Work::TLB_FLUSH)
        );
        ct_work::nmi_exit(&word, &levels);
        ct_work::nmi_ran(&word, &levels);
        assert_eq!(ct_work::defer(&word, Work::TLB_FLUSH), Deferral::Ipi);
        ct_work::nmi_exit(&word, &levels);
        assert_eq!((word.load(), levels.load()), (Value::IDLE, 0));
        let (left, work) = ct_work::interrupt(&word);
        assert_eq!((left, work), (Context::Idle, Work::NONE));
        ct_work::resume(&word, left);
        assert_eq!(word.load(), Value::IDLE);
        // Idle exit takes it all, once.
        assert_eq!(
            ct_work::defer(&word, Work::SYNC_CORE),
            Deferral::Deferred(Work::SYNC_CORE)
        );
        assert_eq!(ct_work::enter_taking(&word), Work::SYNC_CORE);
        assert_eq!(word.load(), Value::KERNEL_TAKING);
        ct_work::ran(&word);
        assert_eq!(word.load(), Value::KERNEL);
        assert_eq!(ct_work::defer(&word, Work::SYNC_CORE), Deferral::Ipi);
    });
}

/// A CPU that returned to user space with deferral off takes no work, tells senders to send the
/// IPI now, and keeps saying so through entries that only read its word.
#[test]
fn left_with_deferral_off() {
    loom::model(|| {
        let word = LoomWord(AtomicU32::new(Value::KERNEL.raw()));
        let levels = LoomLevels(AtomicU32::new(0));
        ct_work::exit_off(&word);
        assert_eq!(word.load().context(), Context::Kernel);
        assert!(ct_work::quiet(word.load()));
        assert_eq!(ct_work::defer(&word, Work::SYNC_CORE), Deferral::IpiNow);
        assert_eq!(ct_work::defer(&word, Work::TLB_FLUSH), Deferral::IpiNow);
        assert_eq!(word.load(), Value::USER_OFF);
        assert_eq!(ct_work::nmi_enter(&word, &levels), Work::NONE);
        assert_eq!(word.load(), Value::USER_OFF);
        ct_work::nmi_exit(&word, &levels);
        assert_eq!((word.load(), levels.load()), (Value::USER_OFF, 0));
        assert_eq!(ct_work::interrupt(&word), (Context::Kernel, Work::NONE));
        assert_eq!(word.load(), Value::USER_OFF);
        // Its next return to user space with deferral on.
        ct_work::exit(&word);
        assert_eq!(
            ct_work::defer(&word, Work::SYNC_CORE),
            Deferral::Deferred(Work::SYNC_CORE)
        );
        assert_eq!(ct_work::enter(&word), Work::SYNC_CORE);
    });
}
