// SPDX-License-Identifier: GPL-2.0

//! Deferred work for CPUs in user space or idle: the protocol of the per-CPU work word.
//!
//! A CPU isolated from the kernel (`nohz_full`) and running a user-space task should not be
//! interrupted for work that only matters once it runs kernel code again, such as the
//! `sync_core()` that a text-poke sync round sends to every CPU; nor should an idle CPU be woken
//! for it. Instead the sender sets a work bit in the target CPU's word, and the target runs the
//! work when it next enters the kernel, or leaves idle, before it executes any kernel text that
//! may have been patched.
//!
//! One word per CPU holds both the CPU's context and its pending work, so that each side needs
//! a single atomic operation (as Andy Lutomirski proposed on the upstream deferral series,
//! where the work bits shared a word with the context-tracking state and RCU's counter and
//! entry paid for two atomics):
//!
//! - the sender ([`defer`]) sets its bits with a compare-and-exchange that succeeds only while
//!   the word says [`Context::User`] or [`Context::Idle`]; otherwise it must send the IPI;
//! - kernel entry ([`enter`]) exchanges the word for [`Context::Kernel`] with no work, and runs
//!   the work it took;
//! - return to user space ([`exit`]) stores [`Context::User`] with no work: while the word says
//!   [`Context::Kernel`] no sender sets bits, so none can be lost; with deferral off it stores
//!   [`Value::USER_OFF`] instead ([`exit_off`]), which takes no work either, but tells senders
//!   that the CPU may stay in user space: waiting for it to take work is for nothing;
//! - idle entry ([`idle`]) stores [`Context::Idle`] with no work, and idle exit takes the word as
//!   kernel entry from user space does ([`enter_taking`]); an interrupt in idle takes it, and
//!   gives it back saying idle, as an NMI from user space does ([`nmi_enter`], [`nmi_exit`]).
//!
//! Entry takes the bits and changes the context in the same exchange, so a sender racing with
//! it either set its bits before (they are run) or fails its compare-and-exchange and sends the
//! IPI. This module uses only `core`: the host tests check every interleaving of it. The kernel's
//! entry side is C (`word.c`, where only noinstr code may run), one function for each of this
//! module's, which the KUnit suite checks against them for every value a word and a CPU's levels
//! can hold.

/// A CPU's context, as the work word records it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Context {
    /// In the kernel, or not taking part (context tracking off there): work must be sent.
    Kernel,
    /// In user space: work may wait for the next kernel entry.
    User,
    /// Idle, between context tracking's idle entry and exit, where a CPU runs only idle and
    /// entry text: work may wait for the end of idle, or for the next interrupt.
    Idle,
}

/// Work a CPU in user space or idle may run at its next kernel entry instead of being interrupted.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Work(u32);

impl Work {
    /// Nothing to do.
    pub const NONE: Self = Self(0);
    /// Serialise the instruction stream: `sync_core()`, for a text-poke sync round.
    pub const SYNC_CORE: Self = Self(1 << 0);
    /// Flush the kernel's TLB entries.
    pub const TLB_FLUSH: Self = Self(1 << 1);
    /// Every kind of work.
    const ALL: u32 = Self::SYNC_CORE.0 | Self::TLB_FLUSH.0;
    /// The work an idle CPU takes: a sync. Not a kernel TLB flush: the idle code touches the
    /// cpuidle driver's state through pointers before idle exit takes the word, which the check
    /// of what entry code touches before it flushes (`scripts/danger-data.py`) cannot follow.
    pub const IDLE: Self = Self::SYNC_CORE;

    /// The work of both.
    #[inline(always)]
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// Whether all of `other` is to be done.
    #[inline(always)]
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether there is nothing to do.
    #[inline(always)]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The raw bits.
    #[inline(always)]
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// The work of raw bits, `enum ct_work_kind` bits; unknown bits are kept, and are never set in
    /// a word.
    #[inline(always)]
    pub const fn from_bits(bits: u32) -> Self {
        Self(bits)
    }
}

/// The bit of the word that says [`Context::User`]; the work bits are above it.
const USER: u32 = 1 << 0;
/// Where the work bits start.
pub const WORK_SHIFT: u32 = 1;
/// The bit of the word that says [`Context::Idle`]; never set with [`USER`].
const IDLE: u32 = 1 << 29;
/// The bit of a word saying [`Context::Kernel`] while an entry runs the work it took: an entry
/// nesting in it meanwhile finds the work gone from the word and must run every kind itself.
const TAKING: u32 = 1 << 31;
/// The bit of a word saying [`Context::Kernel`] for a CPU that returned to user space with
/// deferral off: it takes no work, and may stay in user space for good.
const OFF: u32 = 1 << 30;

/// A work word's value.
///
/// # Invariants
///
/// Work bits are only set with [`USER`], or with [`IDLE`] for [`Work::IDLE`]: a word saying
/// [`Context::Kernel`] has no work. [`TAKING`] and [`OFF`] are only set alone.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Value(u32);

impl Value {
    /// A CPU in the kernel, nothing pending: the word's initial value.
    pub const KERNEL: Self = Self(0);
    /// A CPU in user space, nothing pending.
    pub const USER: Self = Self(USER);
    /// A CPU in the kernel whose entry took work it has not run yet.
    pub const KERNEL_TAKING: Self = Self(TAKING);
    /// A CPU that returned to user space with deferral off ([`exit_off`]): it says
    /// [`Context::Kernel`] to senders, who must send it the IPI, and entry leaves it as it is,
    /// since it has no work; but the CPU may stay in user space until that IPI, so a sender
    /// waiting for it to say [`Context::User`] waits for nothing.
    pub const USER_OFF: Self = Self(OFF);
    /// An idle CPU, nothing pending.
    pub const IDLE: Self = Self(IDLE);

    /// The value of a raw word.
    #[inline(always)]
    pub const fn from_raw(raw: u32) -> Self {
        // INVARIANT: a raw word is only ever written by this module, which keeps it.
        Self(raw)
    }

    /// The raw word.
    #[inline(always)]
    pub const fn raw(self) -> u32 {
        self.0
    }

    /// The context it records.
    #[inline(always)]
    pub const fn context(self) -> Context {
        if self.0 & USER != 0 {
            Context::User
        } else if self.0 & IDLE != 0 {
            Context::Idle
        } else {
            Context::Kernel
        }
    }

    /// The work pending.
    #[inline(always)]
    pub const fn work(self) -> Work {
        Work((self.0 >> WORK_SHIFT) & Work::ALL)
    }

    /// The same value with `work` pending too.
    #[inline(always)]
    const fn with(self, work: Work) -> Self {
        Self(self.0 | (work.0 & Work::ALL) << WORK_SHIFT)
    }
}

/// The per-CPU word, as this module needs to access it: every read-modify-write is a full
/// barrier, every store a release.
pub trait Word {
    /// Reads the word.
    fn load(&self) -> Value;
    /// Replaces `old` with `new`, or returns the value found.
    fn compare_exchange(&self, old: Value, new: Value) -> Result<Value, Value>;
    /// Replaces the word, returning its old value.
    fn exchange(&self, new: Value) -> Value;
    /// Writes the word.
    fn store(&self, new: Value);
}

/// What a sender must do about a CPU.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Deferral {
    /// The work was recorded: the CPU runs it at its next kernel entry; no IPI. Carries the kinds
    /// of work this request added to the word: a kind already pending is not added again, so
    /// that every kind added is taken, and run, by exactly one entry.
    Deferred(Work),
    /// The CPU is in the kernel (or does not take part): send the IPI. It may return to user
    /// space soon, and take the work then.
    Ipi,
    /// The CPU returned to user space with deferral off ([`Value::USER_OFF`]), and takes no work
    /// until it passes through the kernel again: send the IPI now, waiting is for nothing.
    IpiNow,
}

/// Asks the CPU whose word is `word` to run `work` at its next kernel entry instead of being
/// interrupted now. Succeeds only while the word says [`Context::User`], or [`Context::Idle`] for
/// work an idle CPU takes ([`Work::IDLE`]); bits already pending stay, so requests coalesce.
///
/// The caller made whatever the work is for visible before calling (the text written, for
/// `sync_core()`): the compare-and-exchange orders it before the target's entry.
#[inline]
pub fn defer(word: &impl Word, work: Work) -> Deferral {
    let mut old = word.load();
    loop {
        if old == Value::USER_OFF {
            return Deferral::IpiNow;
        }
        if old.context() == Context::Kernel
            || (old.context() == Context::Idle && !Work::IDLE.contains(work))
        {
            return Deferral::Ipi;
        }
        // INVARIANT: `old` says `Context::User` or `Context::Idle`, so bits may be set.
        match word.compare_exchange(old, old.with(work)) {
            Ok(_) => return Deferral::Deferred(Work(work.0 & Work::ALL & !old.work().0)),
            Err(now) => old = now,
        }
    }
}

/// Kernel entry from user space: records [`Context::Kernel`] and returns the work pending, which
/// the caller runs before it executes any kernel text that may have been patched.
///
/// Never panics and never calls out: it runs on the entry path.
#[inline(always)]
pub fn enter(word: &impl Word) -> Work {
    interrupt(word).1
}

/// Kernel entry from a context that may or may not be user space (an NMI, or an interrupt while
/// RCU was not watching): records [`Context::Kernel`] and returns the context left and the work
/// pending, which the caller runs first. Hand the context to [`resume`] on the way back.
///
/// A word that says [`Value::KERNEL`] or [`Value::USER_OFF`] is only read: only its own CPU
/// moves it to [`Context::User`] or [`Context::Idle`], and no sender sets bits in it, so nothing
/// can be missed; a CPU whose deferral is off pays a load at entry, not an atomic exchange.
///
/// Never panics and never calls out: it runs on the entry path.
#[inline(always)]
pub fn interrupt(word: &impl Word) -> (Context, Work) {
    if quiet(word.load()) {
        return (Context::Kernel, Work::NONE);
    }
    // INVARIANT: `Value::KERNEL` has no work.
    let old = word.exchange(Value::KERNEL);
    (old.context(), old.work())
}

/// Whether an entry finding `now` in the word only reads it: it has no work, and no sender sets
/// any ([`Value::KERNEL`], [`Value::USER_OFF`]).
#[inline(always)]
pub fn quiet(now: Value) -> bool {
    now == Value::KERNEL || now == Value::USER_OFF
}

/// The way back from [`interrupt`]: returns the word to the context `left`, with no work.
///
/// Never panics and never calls out: it runs on the exit path.
#[inline(always)]
pub fn resume(word: &impl Word, left: Context) {
    match left {
        Context::User => exit(word),
        Context::Idle => idle(word),
        Context::Kernel => {}
    }
}

/// The entries of a CPU that came while RCU was not watching (NMIs, machine checks, interrupts
/// from idle or user space), three bits per nesting level, the innermost lowest: [`LEVEL_USER`]
/// or [`LEVEL_IDLE`], the entry took the word from [`Context::User`] or [`Context::Idle`], and
/// [`LEVEL_TOOK`], it took work and has not run it yet. Only its own CPU reads and writes them,
/// at entry and exit, where another such entry can nest between any two instructions and leaves
/// them as it found them.
pub trait Levels {
    /// Reads the levels.
    fn load(&self) -> u32;
    /// Writes the levels.
    fn store(&self, levels: u32);
}

/// The bits of one level of [`Levels`].
pub const LEVEL_BITS: u32 = 3;
/// A level's entry took the word from [`Context::User`]: its exit gives it back.
pub const LEVEL_USER: u32 = 1;
/// A level's entry took work and left the word saying [`Value::KERNEL_TAKING`] until it ran it.
pub const LEVEL_TOOK: u32 = 2;
/// A level's entry took the word from [`Context::Idle`]: its exit gives it back.
pub const LEVEL_IDLE: u32 = 4;

/// [`enter`] as the entry from user space makes it, for a word that does not say
/// [`Value::KERNEL`]: the word says [`Value::KERNEL_TAKING`] from the exchange that takes the
/// work until the caller ran it and calls [`ran`], so that an entry nesting in between (an NMI,
/// a machine check: RCU is not watching yet) runs every kind of work itself ([`nmi_enter`]).
/// With no work taken, the word says [`Value::KERNEL`] at once.
///
/// Never panics and never calls out: it runs on the entry path.
#[inline(always)]
pub fn enter_taking(word: &impl Word) -> Work {
    let work = word.exchange(Value::KERNEL_TAKING).work();
    if work.is_empty() {
        word.store(Value::KERNEL);
    }
    work
}

/// [`enter_taking`] with its common case in one step, as the entry from user space and the idle
/// exit make it: a word that says `from`, the context this CPU left ([`Value::USER`] or
/// [`Value::IDLE`]) with no work pending, becomes [`Value::KERNEL`] in one compare-and-exchange,
/// which a sender that set a bit first makes fail; any other word goes through
/// [`enter_taking`]. A sender that comes after finds the word saying kernel, as it would after
/// [`enter_taking`] found no work.
///
/// Never panics and never calls out: it runs on the entry path.
#[inline(always)]
pub fn enter_from(word: &impl Word, from: Value) -> Work {
    match word.compare_exchange(from, Value::KERNEL) {
        Ok(_) => Work::NONE,
        Err(_) => enter_taking(word),
    }
}

/// The work [`enter_taking`] returned has run.
#[inline(always)]
pub fn ran(word: &impl Word) {
    word.store(Value::KERNEL);
}

/// [`interrupt`] for an entry that may nest in another one, or have another nest in it before
/// it is done: an NMI from user space takes the word, and a machine check arriving before the
/// NMI's handler runs comes here too. Each entry records what it did as its own level, so that
/// only the exit of the entry that took the word ([`nmi_exit`]) gives it back; an entry that
/// finds the word saying [`Value::KERNEL_TAKING`] nests in one that took work and has not run
/// it, and runs every kind of work (each is idempotent), since that work is no longer in the
/// word. Returns the work to run, which the caller runs first, then calls [`nmi_ran`].
///
/// Never panics and never calls out: it runs on the entry path.
#[inline(always)]
pub fn nmi_enter(word: &impl Word, levels: &impl Levels) -> Work {
    let now = word.load();
    if now == Value::KERNEL_TAKING {
        levels.store(levels.load() << LEVEL_BITS);
        return Work(Work::ALL);
    }
    if quiet(now) {
        levels.store(levels.load() << LEVEL_BITS);
        return Work::NONE;
    }
    // An entry nesting from here to the exchange finds the word as it was and leaves it so;
    // from the exchange on, it finds `KERNEL_TAKING`, and pushes and pops its own level.
    let old = word.exchange(Value::KERNEL_TAKING);
    let work = old.work();
    let left = match old.context() {
        Context::User => LEVEL_USER,
        Context::Idle => LEVEL_IDLE,
        Context::Kernel => 0,
    };
    let took = if work.is_empty() { 0 } else { LEVEL_TOOK };
    levels.store(levels.load() << LEVEL_BITS | left | took);
    if work.is_empty() {
        word.store(Value::KERNEL);
    }
    work
}

/// The work [`nmi_enter`] returned has run: the word says [`Value::KERNEL`] again if this entry
/// left it saying [`Value::KERNEL_TAKING`].
#[inline(always)]
pub fn nmi_ran(word: &impl Word, levels: &impl Levels) {
    let all = levels.load();
    if all & LEVEL_TOOK != 0 {
        word.store(Value::KERNEL);
        levels.store(all & !LEVEL_TOOK);
    }
}

/// The way back from [`nmi_enter`]: drops this entry's level, and returns the word to
/// [`Context::User`] or [`Context::Idle`] if this entry took it from there.
///
/// Never panics and never calls out: it runs on the exit path.
#[inline(always)]
pub fn nmi_exit(word: &impl Word, levels: &impl Levels) {
    let all = levels.load();
    levels.store(all >> LEVEL_BITS);
    if all & LEVEL_USER != 0 {
        exit(word);
    } else if all & LEVEL_IDLE != 0 {
        idle(word);
    }
}

/// Return to user space: records [`Context::User`] with no work pending.
///
/// While the word said [`Context::Kernel`], no sender set bits ([`defer`] fails then), so none
/// is overwritten.
///
/// Never panics and never calls out: it runs on the exit path.
#[inline(always)]
pub fn exit(word: &impl Word) {
    // INVARIANT: `Value::USER` has no work.
    word.store(Value::USER);
}

/// Return to user space with deferral off: records [`Value::USER_OFF`], which takes no work but
/// tells senders that the CPU may stay in user space.
///
/// As [`exit`], overwrites no work, and never panics or calls out.
#[inline(always)]
pub fn exit_off(word: &impl Word) {
    // INVARIANT: `Value::USER_OFF` is `OFF` alone.
    word.store(Value::USER_OFF);
}

/// Idle entry, once the CPU runs only idle and entry text until it leaves idle or takes an
/// interrupt: records [`Context::Idle`] with no work pending. Idle exit is [`enter_taking`].
///
/// The word said [`Context::Kernel`], when no sender sets bits, so none is overwritten; and
/// never panics or calls out.
#[inline(always)]
pub fn idle(word: &impl Word) {
    // INVARIANT: `Value::IDLE` has no work.
    word.store(Value::IDLE);
}
