/* SPDX-License-Identifier: GPL-2.0 */
/*
 * qpw: per-CPU data under a lock another CPU can take.
 *
 * Per-CPU caches (the LRU folio batches, slab sheaves, memcg stocks) are
 * guarded by a local_lock: only their CPU touches them, with preemption
 * off, and a CPU that wants them drained queues a work item on the owner
 * and waits for it. The work wakes the owner, even an isolated CPU
 * running a real-time loop in user space with nothing cached that matters.
 *
 * A qpw lock is that local_lock, or, when qpw is on, a spinlock of its
 * CPU: the owner takes its own spinlock on its fast path, and a CPU that
 * wants the cache drained takes the owner's spinlock and drains it itself.
 * qpw_queue_work_on() then runs the work at once, on the caller, for the
 * target CPU (qpw_work_lock() tells the work function which), and
 * qpw_flush_work() has nothing to wait for but work queued before qpw was
 * switched on.
 *
 * Off or on is chosen at boot (qpw=0|1, or CONFIG_QPW_DEFAULT; on by
 * itself when CPUs are isolated with nohz_full= or isolcpus=), before a
 * second CPU runs. Where qpw=0 was not given it is also turned on, never
 * off, when a cpuset partition isolates CPUs at run time, in steps
 * (qpw_switch_on(), kernel/qpw.c): while it switches, every unlock
 * releases what its lock took, the spinlock if it is held, else the
 * local_lock; the locks become spinlocks, qpw_spinlocks(); and once every
 * section that took one as a local_lock is over, remote work is taken
 * under them, qpw_enabled(). Without CONFIG_QPW a qpw lock is a
 * local_lock and the work is queued, as before.
 *
 * On PREEMPT_RT a local_lock is a per-CPU spinlock already (a sleeping
 * one, as every spinlock_t there): a qpw lock is always that spinlock,
 * taken by its owner as local_lock() takes it (migration off, the lock of
 * the CPU the task runs on) and by another CPU directly, with or without
 * CONFIG_QPW, and qpw_enabled() is always true.
 *
 * The owner's side:	local_qpw_lock(lock), local_qpw_unlock(lock),
 *			local_qpw_lock_irqsave(lock, flags), ...
 * The work's side:	cpu = qpw_work_lock(lock, work), then
 *			qpw_lock(lock, cpu), qpw_lock_irqsave(lock, flags, cpu),
 *			... for other locks of that CPU, and qpw_unlock(lock,
 *			cpu): with qpw on @cpu is the work's target, with it
 *			off the CPU the work runs on (or, for qpw_lock(), a
 *			dead CPU, whose data nobody else touches any more).
 * @lock is a per-CPU pointer (&pcpu_var.lock), as for local_lock(); a
 * static one starts as QPW_LOCK_UNLOCKED.
 */
#ifndef _LINUX_QPW_H
#define _LINUX_QPW_H

#include <linux/cpumask.h>
#include <linux/jump_label.h>
#include <linux/local_lock.h>
#include <linux/percpu.h>
#include <linux/smp.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>

/**
 * struct qpw_work - a work item that drains the per-CPU data of a CPU
 * @work: the work, queued on @cpu with qpw off, run at once with it on
 * @cpu: the CPU whose data the work is for
 */
struct qpw_work {
	struct work_struct work;
	int cpu;
};

/**
 * init_qpw_work - initialise a work item for the per-CPU data of a CPU
 * @qw: the work item
 * @fn: what it runs; it takes the data's lock with qpw_work_lock()
 * @cpu: the CPU whose data it is for
 */
static inline void init_qpw_work(struct qpw_work *qw, work_func_t fn, int cpu)
{
	INIT_WORK(&qw->work, fn);
	qw->cpu = cpu;
}

/* A spinlock of its own beside the local_lock: with CONFIG_QPW, but not on RT. */
#if defined(CONFIG_QPW) && !defined(CONFIG_PREEMPT_RT)
#define QPW_SPINLOCK 1
#endif

/*
 * A per-CPU lock that another CPU can take. @ll: the owner's lock with qpw
 * off, and without CONFIG_QPW; on PREEMPT_RT a per-CPU spinlock, which
 * other CPUs take too. @sl: with qpw on, taken by the owner and by a CPU
 * draining its data; with CONFIG_QPW, but not on PREEMPT_RT. (Not a
 * kernel-doc comment: the documentation's C domain would take it and
 * qpw_lock() for one name.)
 */
struct qpw_lock {
	local_lock_t ll;
#ifdef QPW_SPINLOCK
	/* Taken by remote drains with qpw on: see above. */
	spinlock_t sl;
#endif
};

#ifdef QPW_SPINLOCK
#define QPW_LOCK_UNLOCKED						\
	{ .ll = INIT_LOCAL_LOCK(qpw_lock.ll), .sl = __SPIN_LOCK_UNLOCKED(qpw_lock.sl) }
#else
#define QPW_LOCK_UNLOCKED	{ .ll = INIT_LOCAL_LOCK(qpw_lock.ll) }
#endif

#ifdef CONFIG_QPW
/*
 * Locks are spinlocks; remote work is taken under them (implies qpw_key);
 * qpw is being switched on, and unlocks look at what their lock took.
 */
DECLARE_STATIC_KEY_MAYBE(CONFIG_QPW_DEFAULT, qpw_key);
DECLARE_STATIC_KEY_MAYBE(CONFIG_QPW_DEFAULT, qpw_remote_key);
DECLARE_STATIC_KEY_FALSE(qpw_switching_key);

bool qpw_switch_on(void);
void qpw_isolation_update(const struct cpumask *isolated);
#else
static inline bool qpw_switch_on(void)
{
	return false;
}

static inline void qpw_isolation_update(const struct cpumask *isolated)
{
}
#endif

/**
 * qpw_spinlocks - whether qpw locks are spinlocks, which other CPUs may take
 *
 * Always on PREEMPT_RT; else with CONFIG_QPW once qpw is on, where the
 * branch lays out the default of the build (CONFIG_QPW_DEFAULT) in line,
 * the other mode behind a jump. On before qpw_enabled() when qpw is
 * switched on at run time.
 *
 * Return: true if the locks are spinlocks.
 */
static __always_inline bool qpw_spinlocks(void)
{
	if (IS_ENABLED(CONFIG_PREEMPT_RT))
		return true;
#ifdef CONFIG_QPW
	return static_branch_maybe(CONFIG_QPW_DEFAULT, &qpw_key);
#else
	return false;
#endif
}

/**
 * qpw_enabled - whether qpw is on
 *
 * With qpw on, remote per-CPU work is taken under the target's lock by
 * the CPU that wants it done; off, it is queued on the target. Always on
 * PREEMPT_RT.
 *
 * Return: true if qpw is on; then qpw_spinlocks() is true too.
 */
static __always_inline bool qpw_enabled(void)
{
	if (IS_ENABLED(CONFIG_PREEMPT_RT))
		return true;
#ifdef CONFIG_QPW
	return static_branch_maybe(CONFIG_QPW_DEFAULT, &qpw_remote_key);
#else
	return false;
#endif
}

/*
 * Whether the owner takes the spinlock of its own (qpw on, not RT): else
 * it takes the local_lock, which on RT is the spinlock other CPUs take.
 */
static __always_inline bool __qpw_spinlock_enabled(void)
{
	return !IS_ENABLED(CONFIG_PREEMPT_RT) && qpw_spinlocks();
}

/*
 * Whether qpw is being switched on (qpw_switch_on()): the keys' sites
 * change one at a time, so that a section may take its lock one way and
 * reach an unlock that would release it the other way.
 */
static __always_inline bool __qpw_switching(void)
{
#if defined(CONFIG_QPW) && !defined(CONFIG_PREEMPT_RT)
	return static_branch_unlikely(&qpw_switching_key);
#else
	return false;
#endif
}

/**
 * qpw_lock_init - initialise one CPU's instance of a qpw lock
 * @lock: the instance, of a per-CPU allocation (a static lock starts as
 *	  QPW_LOCK_UNLOCKED instead)
 *
 * The instances initialised here share a lock class; qpw_lock_init_key()
 * gives a user's its own.
 */
static inline void qpw_lock_init(struct qpw_lock *lock)
{
	local_lock_init(&lock->ll);
#ifdef QPW_SPINLOCK
	spin_lock_init(&lock->sl);
#endif
}

/**
 * qpw_lock_init_key - initialise one CPU's instance of a qpw lock, in a class
 * @lock: the instance, of a per-CPU allocation
 * @name: the lock class's name, static
 * @key: the lock class, static, as lockdep keeps it
 *
 * As qpw_lock_init(), with a lock class for each user of a per-CPU
 * allocation.
 */
static inline void qpw_lock_init_key(struct qpw_lock *lock, const char *name,
				     struct lock_class_key *key)
{
	qpw_lock_init(lock);
	lockdep_set_class_and_name(&lock->ll, key, name);
#ifdef QPW_SPINLOCK
	/*
	 * Subclass 1 of @key: a class of its own. A class takes the lock
	 * type of the lock that registers it, the local_lock's where qpw
	 * starts off, and lockdep leaves a per-CPU lock's class out of its
	 * interrupt-inversion checks, which the spinlock that other CPUs
	 * take once qpw is switched on needs.
	 */
	lockdep_set_class_and_name(&lock->sl, key, name);
	lockdep_set_subclass(&lock->sl, 1);
#endif
}

/* The spinlock of @cpu that other CPUs take: with qpw on only. */
static __always_inline spinlock_t *
__qpw_spinlock(struct qpw_lock __percpu *lock, int cpu)
{
#ifdef CONFIG_PREEMPT_RT
	return per_cpu_ptr(&lock->ll, cpu);
#elif defined(QPW_SPINLOCK)
	return per_cpu_ptr(&lock->sl, cpu);
#else
	return NULL;
#endif
}

/*
 * Whether the spinlock of @cpu is held, by the caller, which holds the
 * qpw lock of @cpu: else it took the lock as a local_lock, and nobody
 * takes the spinlock until the caller has let go, also while qpw is
 * switched on (kernel/qpw.c). Always on PREEMPT_RT.
 */
static __always_inline bool __qpw_spinlock_held(struct qpw_lock __percpu *lock, int cpu)
{
#ifdef QPW_SPINLOCK
	return raw_spin_is_locked(&__qpw_spinlock(lock, cpu)->rlock);
#else
	return IS_ENABLED(CONFIG_PREEMPT_RT);
#endif
}

#ifdef QPW_SPINLOCK
static __always_inline spinlock_t *
__qpw_this_spinlock(struct qpw_lock __percpu *lock)
{
	return this_cpu_ptr(&lock->sl);
}

/*
 * This CPU's spinlock, for its owner, with preemption or interrupts off
 * already: taken inline, as spin_lock() takes it but for the second
 * preemption count, and annotated for lockdep as it is.
 */
static __always_inline void __qpw_this_lock(struct qpw_lock __percpu *lock)
{
#ifdef CONFIG_DEBUG_SPINLOCK
	/* do_raw_spin_lock() is out of line there, and modules cannot call it. */
	spin_lock(__qpw_this_spinlock(lock));
#else
	raw_spinlock_t *l = &__qpw_this_spinlock(lock)->rlock;

	spin_acquire(&l->dep_map, 0, 0, _THIS_IP_);
	LOCK_CONTENDED(l, do_raw_spin_trylock, do_raw_spin_lock);
#endif
}

/*
 * Whether the owner's unlock can release this CPU's spinlock with one
 * store through the per-CPU segment, in either mode, with no branch and
 * no load of this CPU's offset: a queued spinlock is released by a
 * release store of 0 to its locked byte (unless it is paravirtualised or
 * debugged), a plain store is a release on x86, and without lockdep
 * nothing else tells the modes apart. With qpw off nobody ever takes the
 * spinlock: its locked byte is 0 already, and the store changes nothing.
 */
#if defined(CONFIG_X86) && defined(CONFIG_QUEUED_SPINLOCKS) &&	\
	!defined(CONFIG_PARAVIRT_SPINLOCKS) &&				\
	!defined(CONFIG_DEBUG_SPINLOCK) && !defined(CONFIG_DEBUG_LOCK_ALLOC)
#define QPW_UNLOCK_STORE 1
#endif

/* As __qpw_spinlock_held(), for this CPU. */
static __always_inline bool __qpw_this_spinlock_held(struct qpw_lock __percpu *lock)
{
	return raw_spin_is_locked(&__qpw_this_spinlock(lock)->rlock);
}

static __always_inline void __qpw_this_unlock(struct qpw_lock __percpu *lock)
{
#ifdef QPW_UNLOCK_STORE
	barrier();
	raw_cpu_write(lock->sl.rlock.raw_lock.locked, 0);
#elif defined(CONFIG_DEBUG_SPINLOCK)
	spin_unlock(__qpw_this_spinlock(lock));
#else
	raw_spinlock_t *l = &__qpw_this_spinlock(lock)->rlock;

	spin_release(&l->dep_map, _THIS_IP_);
	do_raw_spin_unlock(l);
#endif
}
#else /* !QPW_SPINLOCK */
static __always_inline void __qpw_this_lock(struct qpw_lock __percpu *lock)
{
}

static __always_inline bool __qpw_this_spinlock_held(struct qpw_lock __percpu *lock)
{
	return false;
}

static __always_inline void __qpw_this_unlock(struct qpw_lock __percpu *lock)
{
}
#endif

/*
 * local_lock() and its kin, for the owner's side when the qpw lock is not
 * a spinlock of its own. Without lockdep, on a non-RT kernel, that is
 * preempt_disable() (local_irq_save() for the _irqsave forms), and then
 * the lock's address is not even looked up; on PREEMPT_RT it is
 * migrate_disable() and this CPU's spinlock, which other CPUs take.
 */
#define __QPW_LOCAL_LOCK	\
	(IS_ENABLED(CONFIG_PREEMPT_RT) || IS_ENABLED(CONFIG_DEBUG_LOCK_ALLOC))

static __always_inline void __qpw_local_lock(struct qpw_lock __percpu *lock)
{
	if (__QPW_LOCAL_LOCK)
		local_lock(&lock->ll);
	else
		preempt_disable();
}

static __always_inline void __qpw_local_unlock(struct qpw_lock __percpu *lock)
{
	if (__QPW_LOCAL_LOCK)
		local_unlock(&lock->ll);
	else
		preempt_enable();
}

static __always_inline unsigned long
__qpw_local_lock_irqsave(struct qpw_lock __percpu *lock)
{
	unsigned long flags;

	if (__QPW_LOCAL_LOCK)
		local_lock_irqsave(&lock->ll, flags);
	else
		local_irq_save(flags);
	return flags;
}

static __always_inline void
__qpw_local_unlock_irqrestore(struct qpw_lock __percpu *lock, unsigned long flags)
{
	if (__QPW_LOCAL_LOCK)
		local_unlock_irqrestore(&lock->ll, flags);
	else
		local_irq_restore(flags);
}

/**
 * local_qpw_lock - lock this CPU's data, as its owner
 * @lock: a per-CPU pointer (&pcpu_var.lock), as for local_lock()
 *
 * With the spinlock of its own, preemption goes off first, so that the
 * lock taken is this CPU's and stays this CPU's until the unlock, as a
 * local_lock's holder stays on its CPU. Else it is local_lock().
 */
static __always_inline void local_qpw_lock(struct qpw_lock __percpu *lock)
{
	if (__qpw_spinlock_enabled()) {
		preempt_disable();
		__qpw_this_lock(lock);
	} else {
		__qpw_local_lock(lock);
	}
}

/**
 * local_qpw_unlock - release what local_qpw_lock() took
 * @lock: the per-CPU pointer given to local_qpw_lock()
 */
static __always_inline void local_qpw_unlock(struct qpw_lock __percpu *lock)
{
#ifdef QPW_UNLOCK_STORE
	__qpw_this_unlock(lock);
	preempt_enable();
#else
	if (__qpw_switching() ? __qpw_this_spinlock_held(lock) : __qpw_spinlock_enabled()) {
		__qpw_this_unlock(lock);
		preempt_enable();
	} else {
		__qpw_local_unlock(lock);
	}
#endif
}

static __always_inline unsigned long
__local_qpw_lock_irqsave(struct qpw_lock __percpu *lock)
{
	unsigned long flags;

	if (__qpw_spinlock_enabled()) {
		local_irq_save(flags);
		__qpw_this_lock(lock);
	} else {
		flags = __qpw_local_lock_irqsave(lock);
	}
	return flags;
}

/**
 * local_qpw_lock_irqsave - lock this CPU's data, as its owner, interrupts off
 * @lock: a per-CPU pointer (&pcpu_var.lock), as for local_lock_irqsave()
 * @flags: where the interrupt state is saved
 */
#define local_qpw_lock_irqsave(lock, flags)	\
	((flags) = __local_qpw_lock_irqsave(lock))

/**
 * local_qpw_unlock_irqrestore - release what local_qpw_lock_irqsave() took
 * @lock: the per-CPU pointer given to local_qpw_lock_irqsave()
 * @flags: the interrupt state it saved
 */
static __always_inline void
local_qpw_unlock_irqrestore(struct qpw_lock __percpu *lock, unsigned long flags)
{
#ifdef QPW_UNLOCK_STORE
	__qpw_this_unlock(lock);
	local_irq_restore(flags);
#else
	if (__qpw_switching() ? __qpw_this_spinlock_held(lock) : __qpw_spinlock_enabled()) {
		__qpw_this_unlock(lock);
		local_irq_restore(flags);
	} else {
		__qpw_local_unlock_irqrestore(lock, flags);
	}
#endif
}

/*
 * The work's side, with qpw off: @cpu is this CPU, whose local_lock the
 * caller took, or a dead one, whose data nobody else touches any more.
 */
static __always_inline void __qpw_assert_local(int cpu)
{
	lockdep_assert(cpu == smp_processor_id() || !cpu_online(cpu));
}

/**
 * qpw_work_lock - lock the data a qpw_work is for
 * @lock: a per-CPU pointer (&pcpu_var.lock)
 * @work: the work of a struct qpw_work, as its function is given it
 *
 * With qpw on, the data is the work's target's, whichever CPU runs the
 * work. With it off, the CPU the work runs on, under its local_lock: the
 * work was queued on its target and runs anywhere else only once the
 * target has gone offline, when draining the target is no longer the
 * work's job (the CPU hotplug callbacks drain a dead CPU, as they always
 * did). Released by qpw_unlock() with the CPU returned.
 *
 * Return: the CPU whose data is locked.
 */
static __always_inline int qpw_work_lock(struct qpw_lock __percpu *lock,
					 struct work_struct *work)
{
	int cpu;

	if (qpw_spinlocks()) {
		cpu = container_of(work, struct qpw_work, work)->cpu;
		spin_lock(__qpw_spinlock(lock, cpu));
	} else {
		local_lock(&lock->ll);
		cpu = smp_processor_id();
	}
	return cpu;
}

/**
 * qpw_lock - lock the data of a CPU
 * @lock: a per-CPU pointer (&pcpu_var.lock)
 * @cpu: any CPU with qpw on; with it off, this CPU or a dead one
 */
static __always_inline void qpw_lock(struct qpw_lock __percpu *lock, int cpu)
{
	if (qpw_spinlocks()) {
		spin_lock(__qpw_spinlock(lock, cpu));
	} else {
		local_lock(&lock->ll);
		__qpw_assert_local(cpu);
	}
}

/**
 * qpw_unlock - release what qpw_lock() or qpw_work_lock() took
 * @lock: the per-CPU pointer given to it
 * @cpu: the CPU given to qpw_lock(), or returned by qpw_work_lock()
 *
 * Releases the spinlock if the caller holds it, else the local_lock, as
 * the lock's mode may change in between while qpw is switched on.
 */
static __always_inline void qpw_unlock(struct qpw_lock __percpu *lock, int cpu)
{
	if (__qpw_spinlock_held(lock, cpu))
		spin_unlock(__qpw_spinlock(lock, cpu));
	else
		local_unlock(&lock->ll);
}

static __always_inline unsigned long
__qpw_lock_irqsave(struct qpw_lock __percpu *lock, int cpu)
{
	unsigned long flags;

	if (qpw_spinlocks()) {
		spin_lock_irqsave(__qpw_spinlock(lock, cpu), flags);
	} else {
		local_lock_irqsave(&lock->ll, flags);
		__qpw_assert_local(cpu);
	}
	return flags;
}

/**
 * qpw_lock_irqsave - lock the data of a CPU, interrupts off
 * @lock: a per-CPU pointer (&pcpu_var.lock)
 * @flags: where the interrupt state is saved
 * @cpu: as for qpw_lock()
 */
#define qpw_lock_irqsave(lock, flags, cpu)	\
	((flags) = __qpw_lock_irqsave(lock, cpu))

/**
 * qpw_unlock_irqrestore - release what qpw_lock_irqsave() took
 * @lock: the per-CPU pointer given to it
 * @flags: the interrupt state it saved
 * @cpu: the CPU given to it
 */
static __always_inline void
qpw_unlock_irqrestore(struct qpw_lock __percpu *lock, unsigned long flags, int cpu)
{
	if (__qpw_spinlock_held(lock, cpu))
		spin_unlock_irqrestore(__qpw_spinlock(lock, cpu), flags);
	else
		local_unlock_irqrestore(&lock->ll, flags);
}

/**
 * qpw_queue_work_on - have a qpw_work drain the data of its CPU
 * @cpu: the CPU to queue the work on with qpw off: @qw's CPU
 * @wq: the workqueue to queue it on
 * @qw: the work item
 *
 * Runs @qw at once, on this CPU, when qpw is on; else queues it on @cpu.
 *
 * Return: false if it was queued already, as queue_work_on(); else true.
 */
static inline bool qpw_queue_work_on(int cpu, struct workqueue_struct *wq,
				     struct qpw_work *qw)
{
	if (qpw_enabled()) {
		WARN_ON_ONCE(cpu != qw->cpu);
		qw->work.func(&qw->work);
		return true;
	}
	return queue_work_on(cpu, wq, &qw->work);
}

/**
 * qpw_flush_work - wait for the work qpw_queue_work_on() queued
 * @qw: the work item
 *
 * Nothing to wait for when the work ran at once, but it may have been
 * queued before qpw was switched on.
 *
 * Return: true if it waited for the work, as flush_work().
 */
static inline bool qpw_flush_work(struct qpw_work *qw)
{
	return flush_work(&qw->work);
}

#endif /* _LINUX_QPW_H */
