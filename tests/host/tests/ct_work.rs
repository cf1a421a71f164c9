// SPDX-License-Identifier: GPL-2.0

//! Every interleaving (loom) of a sender deferring `sync_core()` to a CPU against that CPU
//! entering and leaving the kernel, with the protocol of `kernel/jump_label_rs/ct_work.rs`.
//!
//! The sender writes new text, then either defers the sync to the target or sends it an IPI and
//! waits until the target took it; then the round is done. The target enters the kernel (for a
//! system call, or to take the IPI), runs the work it took at entry, takes a pending IPI, runs
//! kernel text and returns to user space, twice, then keeps taking IPIs until the sender is
//! done. Whenever the target runs kernel text, it must have serialised since the last text of
//! every round done: no round may be both not interrupted and not run. Back in user space, it
//! takes an NMI, which runs kernel text too. At the end, one more entry must catch up on
//! whatever is still pending. Three broken variants show the check fails.

use jump_label_rs_host::ct_work::{self, Context, Deferral, Value, Word, Work};
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

/// The two sides of the protocol, as the model runs them.
#[derive(Clone, Copy)]
struct Protocol {
    defer: fn(&LoomWord, Work) -> Deferral,
    enter: fn(&LoomWord) -> Work,
    interrupt: fn(&LoomWord) -> (Context, Work),
}

fn defer(word: &LoomWord, work: Work) -> Deferral {
    ct_work::defer(word, work)
}

fn enter(word: &LoomWord) -> Work {
    ct_work::enter(word)
}

fn interrupt(word: &LoomWord) -> (Context, Work) {
    ct_work::interrupt(word)
}

const CORRECT: Protocol = Protocol {
    defer,
    enter,
    interrupt,
};

/// Broken: an NMI only reads the word, leaving the work for the next entry.
fn interrupt_peek(word: &LoomWord) -> (Context, Work) {
    (word.load().context(), Work::NONE)
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
    Deferral::Deferred
}

struct Cpu {
    word: LoomWord,
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
}

/// The target's kernel entry: the work taken at entry, then a pending IPI; then it runs kernel
/// text, which must be at least as new as every round done.
fn kernel_visit(cpu: &Cpu, p: Protocol) {
    let work = (p.enter)(&cpu.word);
    if work.contains(Work::SYNC_CORE) {
        cpu.synced.store(cpu.text.load(SeqCst), SeqCst);
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
    ct_work::exit(&cpu.word);
}

/// An NMI while the target is in user space: it runs kernel text (a perf handler, say) without
/// passing the entry of a system call, and cannot take an IPI; then the target is back in user
/// space.
fn nmi_visit(cpu: &Cpu, p: Protocol) {
    let (left, work) = (p.interrupt)(&cpu.word);
    if work.contains(Work::SYNC_CORE) {
        cpu.synced.store(cpu.text.load(SeqCst), SeqCst);
    }
    let done = cpu.done.load(SeqCst);
    let synced = cpu.synced.load(SeqCst);
    assert!(
        synced >= done,
        "NMI ran kernel text after round {done} with text {synced}"
    );
    ct_work::resume(&cpu.word, left);
}

fn model(p: Protocol) {
    // At most four preemptions: the broken variants are caught with two, and the unbounded
    // exploration, which passes too, takes about nine minutes.
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(4);
    builder.check(move || {
        let cpu = Arc::new(Cpu {
            word: LoomWord(AtomicU32::new(Value::USER.raw())),
            text: AtomicU32::new(0),
            ipi: AtomicBool::new(false),
            done: AtomicU32::new(0),
            synced: AtomicU32::new(0),
            finished: AtomicBool::new(false),
        });
        let sender = {
            let cpu = cpu.clone();
            thread::spawn(move || {
                for round in 1..=ROUNDS {
                    cpu.text.store(round, SeqCst);
                    if (p.defer)(&cpu.word, Work::SYNC_CORE) == Deferral::Ipi {
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
        for _ in 0..ENTRIES {
            kernel_visit(&cpu, p);
        }
        nmi_visit(&cpu, p);
        // Back in user space for good: only an IPI brings it into the kernel.
        while !cpu.finished.load(SeqCst) {
            if cpu.ipi.load(SeqCst) {
                kernel_visit(&cpu, p);
            }
            thread::yield_now();
        }
        sender.join().unwrap();
        // Nothing was lost: the next entry catches up on every round.
        kernel_visit(&cpu, p);
        assert_eq!(cpu.synced.load(SeqCst), ROUNDS);
    });
}

#[test]
fn deferral_never_loses_a_sync() {
    model(CORRECT);
}

#[test]
fn broken_entry_is_caught() {
    let broken = Protocol {
        enter: enter_load_store,
        ..CORRECT
    };
    assert!(std::panic::catch_unwind(|| model(broken)).is_err());
}

#[test]
fn broken_sender_is_caught() {
    let broken = Protocol {
        defer: defer_load_store,
        ..CORRECT
    };
    assert!(std::panic::catch_unwind(|| model(broken)).is_err());
}

#[test]
fn broken_nmi_is_caught() {
    let broken = Protocol {
        interrupt: interrupt_peek,
        ..CORRECT
    };
    assert!(std::panic::catch_unwind(|| model(broken)).is_err());
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
        assert_eq!(ct_work::defer(&word, Work::SYNC_CORE), Deferral::Deferred);
        assert_eq!(ct_work::defer(&word, Work::SYNC_CORE), Deferral::Deferred);
        assert_eq!(ct_work::defer(&word, Work::TLB_FLUSH), Deferral::Deferred);
        let work = ct_work::enter(&word);
        assert_eq!(work, Work::SYNC_CORE.union(Work::TLB_FLUSH));
        assert_eq!(word.load(), Value::KERNEL);
        assert!(ct_work::enter(&word).is_empty());
    });
}
