// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `ct_work_rs`: the work word's state machine on simulated CPUs, the C entry side
//! against the protocol, and the real per-CPU word of this kernel, which KUnit (no user space)
//! can only see refuse work. `make test` boots KUnit with `nohz_full=3`; its user-space boot
//! checks deferral itself.

#[kernel::prelude::kunit_tests(ct_work_rs)]
mod tests {
    use crate::{
        ask,
        ct_work::{self, Context, Deferral, Levels, Value, Word, Work},
        defer_on,
        next_isolated,
        Refusal, //
    };
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
        unsafe { bindings::ct_work_rs_enter(w) }
    }

    fn c_ran(w: *mut u32, _: *mut u32) -> u32 {
        // SAFETY: As in `c_enter()`.
        unsafe { bindings::ct_work_rs_ran(w) };
        0
    }

    fn c_nmi_enter(w: *mut u32, l: *mut u32) -> u32 {
        // SAFETY: `w` and `l` are valid for the call, and the function only accesses them.
        unsafe { bindings::ct_work_rs_nmi_take(w, l) }
    }

    fn c_nmi_ran(w: *mut u32, l: *mut u32) -> u32 {
        // SAFETY: As in `c_nmi_enter()`.
        unsafe { bindings::ct_work_rs_nmi_ran(w, l) };
        0
    }

    fn c_nmi_exit(w: *mut u32, l: *mut u32) -> u32 {
        // SAFETY: As in `c_nmi_enter()`.
        unsafe { bindings::ct_work_rs_nmi_give(w, l) };
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
        let user = |w: Work| Value::from_raw(Value::USER.raw() | w.bits() << ct_work::WORK_SHIFT);
        let words = [
            Value::KERNEL,
            Value::USER,
            user(Work::SYNC_CORE),
            user(Work::TLB_FLUSH),
            user(BOTH),
            Value::KERNEL_TAKING,
            Value::USER_OFF,
        ];
        for w in words {
            for l in [0, 1, 2, 3, 0b0100, 0b0111, 0b1001, 0b1110] {
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
        // An NMI from the kernel (or idle) leaves the word as it was.
        assert_eq!(ct_work::enter(&w), Work::NONE);
        let (left, work) = ct_work::interrupt(&w);
        assert_eq!((left, work), (Context::Kernel, Work::NONE));
        ct_work::resume(&w, left);
        assert_eq!(w.load(), Value::KERNEL);
    }

    /// Whether `cpu` is online.
    fn online(cpu: u32) -> bool {
        // SAFETY: Only reads the online mask.
        unsafe { bindings::cpumask_test_cpu(cpu as i32, &raw mut bindings::__cpu_online_mask) }
    }

    #[test]
    fn real_word_refuses_cpus_not_in_user_space() {
        // SAFETY: Reads a variable set at boot.
        let nr = unsafe { bindings::nr_cpu_ids };
        let mut isolated = None;
        for cpu in 0..nr {
            // No CPU runs user space while KUnit runs: an isolated one is in the kernel (this
            // test's, maybe) or idle, the others never defer.
            match defer_on(cpu as i32, Work::SYNC_CORE) {
                Err(Refusal::NotInUser) => isolated = Some(cpu),
                Err(Refusal::NotIsolated) => {}
                Ok(()) | Err(Refusal::LeftWithDeferralOff) => {
                    panic!("CPU {cpu} said it is in user space while no CPU runs user space")
                }
            }
        }
        assert_eq!(
            defer_on(nr as i32, Work::SYNC_CORE),
            Err(Refusal::NotIsolated)
        );
        assert_eq!(defer_on(-1, Work::SYNC_CORE), Err(Refusal::NotIsolated));
        // make test boots KUnit with nohz_full=3.
        let cpu = isolated.expect("no isolated CPU: boot with nohz_full=");
        // Offline, an isolated CPU takes nothing; back online, it is in the kernel again. (If this
        // test runs there, it moves.)
        // SAFETY: `cpu` is online; it may sleep.
        assert_eq!(unsafe { bindings::remove_cpu(cpu) }, 0);
        assert!(!online(cpu));
        assert_eq!(
            defer_on(cpu as i32, Work::SYNC_CORE),
            Err(Refusal::NotIsolated)
        );
        // SAFETY: `cpu` is a present CPU that went offline above.
        assert_eq!(unsafe { bindings::add_cpu(cpu) }, 0);
        assert!(online(cpu));
        assert_eq!(
            defer_on(cpu as i32, Work::SYNC_CORE),
            Err(Refusal::NotInUser)
        );
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
        let Ok(mut mask) = mask else { return };
        let mut asked = bindings::ct_work_rs_asked {
            deferred: 0,
            waited: 0,
            expired: 0,
            sent: 0,
        };
        let pinned = pin(Some(cpu));
        // On its own isolated CPU, in the kernel: the sender neither defers to that CPU nor waits
        // for it to be in user space, nor counts an IPI for it (it does the work itself).
        if pinned {
            ask(Work::SYNC_CORE, &mut mask, &mut asked);
        }
        assert!(pin(None));
        assert!(pinned);
        assert_eq!(
            (asked.deferred, asked.waited, asked.expired, asked.sent),
            (0, 0, 0, 0)
        );
        assert_eq!(mask.weight(), 0);
    }
}
