// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `ct_work`: the work word's state machine on simulated CPUs, the C entry side
//! against the protocol, and the real per-CPU word of this kernel, which KUnit (no user space)
//! can only see take work in idle. `make test` boots KUnit with `nohz_full=3`; its user-space boot
//! checks deferral itself.

#[kernel::prelude::kunit_tests(ct_work)]
mod tests {
    use crate::ct_work::{self, Context, Deferral, Levels, Value, Word, Work};
    use core::sync::atomic::{AtomicU32, Ordering::SeqCst};
    use kernel::{
        alloc::flags::GFP_KERNEL,
        bindings,
        cpumask::CpumaskVar, //
    };

    /// A simulated CPU's word.
    struct Sim(AtomicU32);

    impl Word for Sim {
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

    const BOTH: Work = Work::SYNC_CORE.union(Work::TLB_FLUSH);

    /// A simulated CPU's levels.
    struct SimLevels(AtomicU32);

    impl Levels for SimLevels {
        fn load(&self) -> u32 {
            self.0.load(SeqCst)
        }

        fn store(&self, levels: u32) {
            self.0.store(levels, SeqCst)
        }
    }

    /// What `ct_work_defer_cpu()` told a sender to do about a CPU.
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    enum Sent {
        Deferred,
        Ipi,
        IpiNow,
        Offline,
    }

    /// Asks `cpu` to take `work` (`ct_work_defer_cpu()`).
    fn defer_on(cpu: i32, work: Work) -> Sent {
        // SAFETY: Any `cpu` is accepted; it only writes a CPU's word, as a sender does.
        let ret = unsafe { bindings::ct_work_defer_cpu(cpu, work.bits()) } as u32;
        match ret {
            bindings::ct_work_deferral_CT_WORK_DEFERRED => Sent::Deferred,
            bindings::ct_work_deferral_CT_WORK_IPI => Sent::Ipi,
            bindings::ct_work_deferral_CT_WORK_IPI_NOW => Sent::IpiNow,
            _ => Sent::Offline,
        }
    }

    /// The next online isolated CPU after `cpu`, or `nr_cpu_ids`.
    fn next_isolated(cpu: i32) -> i32 {
        // SAFETY: Walks the online isolated CPUs; any `cpu` is accepted.
        unsafe { bindings::ct_work_next_isolated(cpu) }
    }

    /// The next online CPU after `cpu`, or `nr_cpu_ids`.
    fn next_online(cpu: i32) -> i32 {
        // SAFETY: Walks the online CPUs; any `cpu` is accepted.
        unsafe { bindings::ct_work_next_online(cpu) }
    }

    /// Every value a word can hold, and the idle words with work an idle CPU does not take.
    fn every_word() -> [Value; 11] {
        let user = |w: Work| Value::from_raw(Value::USER.raw() | w.bits() << ct_work::WORK_SHIFT);
        let idle = |w: Work| Value::from_raw(Value::IDLE.raw() | w.bits() << ct_work::WORK_SHIFT);
        [
            Value::KERNEL,
            Value::USER,
            user(Work::SYNC_CORE),
            user(Work::TLB_FLUSH),
            user(BOTH),
            Value::KERNEL_TAKING,
            Value::USER_OFF,
            Value::IDLE,
            idle(Work::SYNC_CORE),
            idle(Work::TLB_FLUSH),
            idle(BOTH),
        ]
    }

    /// The senders are C: on a copy of every value a word can hold, `ct_work_defer_word()` returns
    /// what `ct_work::defer()` does, adds the same kinds and leaves the same word, for each kind of
    /// work, both, none and an unknown one.
    #[test]
    fn senders_follow_the_protocol() {
        for w in every_word() {
            for bits in [0, 1, 2, 3, 1 << 5] {
                let (mut word, mut added) = (w.raw(), 0u32);
                // SAFETY: `word` and `added` are valid for the call; it only accesses them.
                let ret = unsafe { bindings::ct_work_defer_word(&mut word, bits, &mut added) };
                let c = (ret as u32, added, word);
                let sim = Sim(AtomicU32::new(w.raw()));
                let rust = match ct_work::defer(&sim, Work::from_bits(bits)) {
                    Deferral::Deferred(a) => {
                        (bindings::ct_work_deferral_CT_WORK_DEFERRED, a.bits())
                    }
                    Deferral::Ipi => (bindings::ct_work_deferral_CT_WORK_IPI, 0),
                    Deferral::IpiNow => (bindings::ct_work_deferral_CT_WORK_IPI_NOW, 0),
                };
                let rust = (rust.0, rust.1, sim.load().raw());
                if c != rust {
                    kernel::pr_err!(
                        "defer {bits:#x} to word {:#x}: C {c:x?}, ct_work {rust:x?}\n",
                        w.raw()
                    );
                }
                assert_eq!(c, rust);
            }
        }
    }

    /// The C side's step `f` on a copy of `w` and `l`: what it returned (0 for nothing) and left
    /// in the word and the levels.
    fn c_step(f: impl Fn(*mut u32, *mut u32) -> u32, w: Value, l: u32) -> (u32, u32, u32) {
        let (mut word, mut levels) = (w.raw(), l);
        let ret = f(&mut word, &mut levels);
        (ret, word, levels)
    }

    /// The same step of `ct_work`.
    fn rust_step(f: impl Fn(&Sim, &SimLevels) -> u32, w: Value, l: u32) -> (u32, u32, u32) {
        let (word, levels) = (Sim(AtomicU32::new(w.raw())), SimLevels(AtomicU32::new(l)));
        let ret = f(&word, &levels);
        (ret, word.load().raw(), levels.load())
    }

    // The C side's steps, on a word and levels of `c_step()`'s: each C function only accesses
    // the word and the levels it is given.
    fn c_enter(w: *mut u32, _: *mut u32) -> u32 {
        // SAFETY: `w` is valid for the call, and the function only accesses it.
        unsafe { bindings::ct_work_enter(w) }
    }

    fn c_ran(w: *mut u32, _: *mut u32) -> u32 {
        // SAFETY: As in `c_enter()`.
        unsafe { bindings::ct_work_ran(w) };
        0
    }

    fn c_nmi_enter(w: *mut u32, l: *mut u32) -> u32 {
        // SAFETY: `w` and `l` are valid for the call, and the function only accesses them.
        unsafe { bindings::ct_work_nmi_take(w, l) }
    }

    fn c_nmi_ran(w: *mut u32, l: *mut u32) -> u32 {
        // SAFETY: As in `c_nmi_enter()`.
        unsafe { bindings::ct_work_nmi_ran(w, l) };
        0
    }

    fn c_nmi_exit(w: *mut u32, l: *mut u32) -> u32 {
        // SAFETY: As in `c_nmi_enter()`.
        unsafe { bindings::ct_work_nmi_give(w, l) };
        0
    }

    // The same steps of `ct_work`.
    fn rust_enter(w: &Sim, _: &SimLevels) -> u32 {
        ct_work::enter_taking(w).bits()
    }

    fn rust_ran(w: &Sim, _: &SimLevels) -> u32 {
        ct_work::ran(w);
        0
    }

    fn rust_nmi_enter(w: &Sim, l: &SimLevels) -> u32 {
        ct_work::nmi_enter(w, l).bits()
    }

    fn rust_nmi_ran(w: &Sim, l: &SimLevels) -> u32 {
        ct_work::nmi_ran(w, l);
        0
    }

    fn rust_nmi_exit(w: &Sim, l: &SimLevels) -> u32 {
        ct_work::nmi_exit(w, l);
        0
    }

    /// The entry side is C, where it runs before instrumentation is allowed: each of its
    /// functions leaves a word and a CPU's levels as the function of `ct_work` it implements
    /// does, and returns the same work, from every value they can hold.
    #[test]
    fn entry_side_follows_the_protocol() {
        for w in every_word() {
            for l in [
                0, 1, 2, 3, 4, 5, 6, 7, 0o10, 0o17, 0o41, 0o46, 0o71, 0o416, 0o777,
            ] {
                let steps = [
                    ("enter", c_step(c_enter, w, l), rust_step(rust_enter, w, l)),
                    ("ran", c_step(c_ran, w, l), rust_step(rust_ran, w, l)),
                    (
                        "nmi_enter",
                        c_step(c_nmi_enter, w, l),
                        rust_step(rust_nmi_enter, w, l),
                    ),
                    (
                        "nmi_ran",
                        c_step(c_nmi_ran, w, l),
                        rust_step(rust_nmi_ran, w, l),
                    ),
                    (
                        "nmi_exit",
                        c_step(c_nmi_exit, w, l),
                        rust_step(rust_nmi_exit, w, l),
                    ),
                ];
                for (name, c, rust) in steps {
                    if c != rust {
                        kernel::pr_err!(
                            "{name} from word {:#x}, levels {l:#x}: C left {c:x?}, ct_work {rust:x?}\n",
                            w.raw()
                        );
                    }
                    assert_eq!(c, rust);
                }
            }
        }
    }

    #[test]
    fn state_machine_on_simulated_cpus() {
        let w = Sim(AtomicU32::new(Value::KERNEL.raw()));
        // In the kernel: the sender must interrupt.
        assert_eq!(ct_work::defer(&w, Work::SYNC_CORE), Deferral::Ipi);
        assert_eq!(w.load(), Value::KERNEL);
        // In user space: work waits, and coalesces.
        ct_work::exit(&w);
        assert_eq!(w.load(), Value::USER);
        assert_eq!(
            ct_work::defer(&w, Work::SYNC_CORE),
            Deferral::Deferred(Work::SYNC_CORE)
        );
        assert_eq!(
            ct_work::defer(&w, Work::SYNC_CORE),
            Deferral::Deferred(Work::NONE)
        );
        assert_eq!(
            ct_work::defer(&w, Work::TLB_FLUSH),
            Deferral::Deferred(Work::TLB_FLUSH)
        );
        assert_eq!(w.load().context(), Context::User);
        assert_eq!(w.load().work(), BOTH);
        // Entry takes all of it, once.
        assert_eq!(ct_work::enter(&w), BOTH);
        assert_eq!(w.load(), Value::KERNEL);
        assert_eq!(ct_work::enter(&w), Work::NONE);
        assert_eq!(ct_work::defer(&w, Work::TLB_FLUSH), Deferral::Ipi);
        // An NMI from user space takes the work, refuses more while it runs, and gives the
        // word back with none.
        ct_work::exit(&w);
        assert_eq!(
            ct_work::defer(&w, Work::SYNC_CORE),
            Deferral::Deferred(Work::SYNC_CORE)
        );
        let (left, work) = ct_work::interrupt(&w);
        assert_eq!((left, work), (Context::User, Work::SYNC_CORE));
        assert_eq!(ct_work::defer(&w, Work::SYNC_CORE), Deferral::Ipi);
        ct_work::resume(&w, left);
        assert_eq!(w.load(), Value::USER);
        // An NMI from the kernel leaves the word as it was.
        assert_eq!(ct_work::enter(&w), Work::NONE);
        let (left, work) = ct_work::interrupt(&w);
        assert_eq!((left, work), (Context::Kernel, Work::NONE));
        ct_work::resume(&w, left);
        assert_eq!(w.load(), Value::KERNEL);
        // Idle: a sync waits, an interrupt takes it and gives the word back saying idle, and
        // idle exit takes what came since.
        ct_work::idle(&w);
        assert_eq!(
            ct_work::defer(&w, Work::SYNC_CORE),
            Deferral::Deferred(Work::SYNC_CORE)
        );
        let (left, work) = ct_work::interrupt(&w);
        assert_eq!((left, work), (Context::Idle, Work::SYNC_CORE));
        assert_eq!(ct_work::defer(&w, Work::SYNC_CORE), Deferral::Ipi);
        ct_work::resume(&w, left);
        assert_eq!(w.load(), Value::IDLE);
        // An idle CPU takes no kernel TLB flush: that is an IPI.
        assert_eq!(ct_work::defer(&w, Work::TLB_FLUSH), Deferral::Ipi);
        assert_eq!(
            ct_work::defer(&w, Work::SYNC_CORE),
            Deferral::Deferred(Work::SYNC_CORE)
        );
        assert_eq!(ct_work::enter(&w), Work::SYNC_CORE);
        assert_eq!(w.load(), Value::KERNEL);
    }

    /// Whether `cpu` is online.
    fn online(cpu: u32) -> bool {
        // SAFETY: Only reads the online mask.
        unsafe { bindings::cpumask_test_cpu(cpu as i32, &raw mut bindings::__cpu_online_mask) }
    }

    #[test]
    fn real_word_takes_work_only_in_idle() {
        // SAFETY: Reads a variable set at boot.
        let nr = unsafe { bindings::nr_cpu_ids };
        for cpu in 0..nr {
            // No CPU runs user space while KUnit runs: each is in the kernel (this test's, maybe)
            // or idle, where it takes the work (and runs it when it wakes).
            match defer_on(cpu as i32, Work::SYNC_CORE) {
                Sent::Deferred | Sent::Ipi => assert!(online(cpu)),
                Sent::Offline => assert!(!online(cpu)),
                Sent::IpiNow => {
                    panic!("CPU {cpu} said it left for user space while no CPU runs user space")
                }
            }
        }
        assert_eq!(defer_on(nr as i32, Work::SYNC_CORE), Sent::Offline);
        assert_eq!(defer_on(-1, Work::SYNC_CORE), Sent::Offline);
        // make test boots KUnit with nohz_full=3.
        let cpu = next_isolated(-1);
        assert!(cpu >= 0 && (cpu as u32) < nr);
        let cpu = cpu as u32;
        // Offline, a CPU takes nothing; back online, it is in the kernel or idle again. (If this
        // test runs there, it moves.)
        // SAFETY: `cpu` is online; it may sleep.
        assert_eq!(unsafe { bindings::remove_cpu(cpu) }, 0);
        assert!(!online(cpu));
        assert_eq!(defer_on(cpu as i32, Work::SYNC_CORE), Sent::Offline);
        // SAFETY: `cpu` is a present CPU that went offline above.
        assert_eq!(unsafe { bindings::add_cpu(cpu) }, 0);
        assert!(online(cpu));
        assert!(matches!(
            defer_on(cpu as i32, Work::SYNC_CORE),
            Sent::Deferred | Sent::Ipi
        ));
    }

    #[test]
    fn idle_entry_with_rcu_watching_marks_nothing() {
        // `ct_idle_enter()` with context tracking's nesting above one: its `ct_kernel_exit()`
        // returns with RCU still watching, where an interrupt does not take the work. The word
        // must still say kernel: a sender that saw it say idle would set a bit instead of sending
        // its IPI, and no interrupt would run the work.
        // SAFETY: Called from a KUnit test's kthread holding no lock; it puts back what it
        // changes, with interrupts off throughout.
        let word = unsafe { bindings::ct_work_test_idle_enter_watched() };
        assert_eq!(word & (Value::IDLE.raw() | Value::USER.raw()), 0);
    }

    /// Whether `cpu`'s word says idle, within about a second.
    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_STATS)]
    fn wait_idle(cpu: i32) -> bool {
        for _ in 0..1000 {
            if word(cpu) & Value::IDLE.raw() != 0 {
                return true;
            }
            // SAFETY: Sleeps; a KUnit test's kthread holding no lock may.
            unsafe { bindings::msleep(1) };
        }
        false
    }

    /// `cpu`'s work word, or `u32::MAX` if it is offline.
    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_STATS)]
    fn word(cpu: i32) -> u32 {
        // SAFETY: Only reads CPU masks; any `cpu` is accepted.
        let word = unsafe { bindings::ct_work_word(cpu) };
        if word.is_null() {
            return u32::MAX;
        }
        // SAFETY: A CPU's word lives as long as the kernel, and is only accessed atomically.
        unsafe { AtomicU32::from_ptr(word) }.load(SeqCst)
    }

    /// The work `cpu` ran at entry or idle exit, all told.
    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_STATS)]
    fn runs(cpu: i32) -> u64 {
        // SAFETY: Reads a per-CPU counter; any possible `cpu` is accepted.
        unsafe { bindings::ct_work_runs(cpu) as u64 }
    }

    /// What [`probe`] saw on the CPU it ran on, in an IPI's handler.
    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_STATS)]
    struct Seen {
        runs: u64,
        word: u32,
    }

    /// An IPI's handler: records the work its CPU has run and its word.
    ///
    /// # Safety
    ///
    /// `info` points to a [`Seen`] that nothing else accesses until the IPI's sender returns.
    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_STATS)]
    unsafe extern "C" fn probe(info: *mut core::ffi::c_void) {
        let cpu = kernel::cpu::CpuId::current().as_u32() as i32;
        // SAFETY: As the caller guarantees.
        let seen = unsafe { &mut *info.cast::<Seen>() };
        seen.runs = runs(cpu);
        seen.word = word(cpu);
    }

    /// An idle CPU takes work as a bit, and runs it when an interrupt wakes it, before the
    /// interrupt's handler; meanwhile its word says kernel.
    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_STATS)]
    #[test]
    fn an_idle_cpu_runs_its_work_before_an_interrupt_handler() {
        assert!(pin(Some(0)));
        let target = next_online(0);
        let mut shown = false;
        for _ in 0..20 {
            if !wait_idle(target) {
                continue;
            }
            let before = runs(target);
            if defer_on(target, Work::SYNC_CORE) != Sent::Deferred {
                continue;
            }
            let mut seen = Seen {
                runs: 0,
                word: u32::MAX,
            };
            // SAFETY: `probe` accesses `seen` only until the call returns, which waits for it.
            let ret = unsafe {
                bindings::smp_call_function_single(target, Some(probe), (&raw mut seen).cast(), 1)
            };
            assert_eq!(ret, 0);
            assert!(seen.runs > before);
            assert_eq!(seen.word, Value::KERNEL.raw());
            shown = true;
            break;
        }
        assert!(pin(None));
        // Else the CPU was never idle, or never took the work.
        assert!(shown);
    }

    /// A WARN that fires while this CPU is idle with a sync pending, as cpuidle_enter_state()'s
    /// "leaked IRQ state" one does, runs the sync before the WARN is reported: the trap takes
    /// the word as an interrupt in idle does, and gives it back saying idle.
    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_STATS)]
    #[test]
    fn a_warn_in_idle_runs_the_work_first() {
        let mut word = u32::MAX;
        // SAFETY: `word` is valid for writes; the helper changes this CPU's word only with
        // interrupts off, and leaves it saying kernel.
        let ran = unsafe { bindings::ct_work_test_warn_in_idle(&mut word) };
        assert_eq!(ran, 1);
        assert_eq!(word, Value::IDLE.raw());
    }

    /// Work an idle CPU took is not lost when it goes offline: the CPU leaves idle, and runs it,
    /// first.
    #[cfg(CONFIG_CONTEXT_TRACKING_WORK_STATS)]
    #[test]
    fn an_idle_cpu_runs_its_work_before_it_goes_offline() {
        let cpu = next_isolated(-1);
        // Away from that CPU: a test running there finds it in the kernel each time it looks.
        assert!(cpu != 0 && pin(Some(0)));
        let mut shown = false;
        for _ in 0..20 {
            if !wait_idle(cpu) {
                continue;
            }
            let before = runs(cpu);
            if defer_on(cpu, Work::SYNC_CORE) != Sent::Deferred {
                continue;
            }
            // SAFETY: `cpu` is online; it may sleep.
            assert_eq!(unsafe { bindings::remove_cpu(cpu as u32) }, 0);
            let after = runs(cpu);
            // SAFETY: `cpu` is a present CPU that went offline above.
            assert_eq!(unsafe { bindings::add_cpu(cpu as u32) }, 0);
            assert!(after > before);
            shown = true;
            break;
        }
        assert!(pin(None));
        // Else the CPU was never idle, or never took the work.
        assert!(shown);
    }

    /// Lets the calling task run on `cpu` only, or on every possible CPU again if `None`, and
    /// whether it now runs where it should.
    fn pin(cpu: Option<i32>) -> bool {
        let task = kernel::current!();
        let Some(cpu) = cpu else {
            let all = &raw const bindings::__cpu_possible_mask;
            // SAFETY: The task is the caller's, alive for the call; the possible mask lives as
            // long as the kernel. Moving a task may sleep, as a KUnit test's kthread holding no
            // spinlock may.
            return unsafe { bindings::set_cpus_allowed_ptr(task.as_ptr(), all) } == 0;
        };
        let Some(id) = kernel::cpu::CpuId::from_i32(cpu) else {
            return false;
        };
        let Ok(mut mask) = CpumaskVar::new_zero(GFP_KERNEL) else {
            return false;
        };
        mask.set(id);
        // SAFETY: As above; `mask` lives until the call returns.
        let ret = unsafe { bindings::set_cpus_allowed_ptr(task.as_ptr(), mask.as_raw()) };
        ret == 0 && kernel::cpu::CpuId::current() == id
    }

    #[test]
    fn a_sender_on_an_isolated_cpu_does_not_wait_for_itself() {
        // make test boots KUnit with nohz_full=3.
        let cpu = next_isolated(-1);
        // SAFETY: Reads a variable set at boot.
        assert!(cpu < unsafe { bindings::nr_cpu_ids } as i32);
        let mask = CpumaskVar::new_zero(GFP_KERNEL);
        assert!(mask.is_ok());
        let Ok(mask) = mask else { return };
        let mut asked = bindings::ct_work_asked {
            deferred: 0,
            idle: 0,
            waited: 0,
            expired: 0,
            sent: 0,
        };
        let pinned = pin(Some(cpu));
        // On its own isolated CPU, in the kernel: the sender neither defers to that CPU nor waits
        // for it to be in user space, nor counts an IPI for it (it does the work itself). The
        // other CPUs are housekeeping CPUs, idle or in the kernel.
        if pinned {
            // SAFETY: `mask` and `asked` are valid, and nothing else accesses them meanwhile.
            unsafe { bindings::ct_work_ask(Work::SYNC_CORE.bits(), mask.as_raw(), &mut asked) };
        }
        assert!(pin(None));
        assert!(pinned);
        assert_eq!(
            (asked.deferred, asked.waited, asked.expired, asked.sent),
            (0, 0, 0, 0)
        );
        assert_eq!(mask.weight(), asked.idle);
        assert!(kernel::cpu::CpuId::from_i32(cpu).is_some_and(|id| !mask.test(id)));
    }
}
