// SPDX-License-Identifier: GPL-2.0
/*
 * qpw: per-CPU data under a lock another CPU can take (see <linux/qpw.h>).
 *
 * The switch, set at boot: qpw=0|1, else CONFIG_QPW_DEFAULT, else on when
 * nohz_full= or isolcpus= isolate CPUs, the systems whose isolated CPUs
 * the queued work would wake. Always on with PREEMPT_RT. Turned on at run
 * time, unless qpw=0 was given, when a cpuset partition isolates CPUs.
 */

#define pr_fmt(fmt) "qpw: " fmt

#include <linux/cpu.h>
#include <linux/cpumask.h>
#include <linux/errno.h>
#include <linux/export.h>
#include <linux/init.h>
#include <linux/kstrtox.h>
#include <linux/mutex.h>
#include <linux/printk.h>
#include <linux/qpw.h>
#include <linux/rcupdate.h>
#include <linux/sched/isolation.h>

#define CREATE_TRACE_POINTS
#include <trace/events/qpw.h>

DEFINE_STATIC_KEY_MAYBE(CONFIG_QPW_DEFAULT, qpw_key);
/* For qpw_spinlocks() in modules. */
EXPORT_SYMBOL_GPL(qpw_key);
DEFINE_STATIC_KEY_MAYBE(CONFIG_QPW_DEFAULT, qpw_remote_key);
/* For qpw_enabled() in modules. */
EXPORT_SYMBOL_GPL(qpw_remote_key);
DEFINE_STATIC_KEY_FALSE(qpw_switching_key);
/* For the unlocks of modules. */
EXPORT_SYMBOL_GPL(qpw_switching_key);

/* -1: not given at boot. */
static int qpw_param = -1;

static int __init qpw_setup(char *str)
{
	bool on;

	if (!str || kstrtobool(str, &on)) {
		pr_warn("qpw=%s: expected 0 or 1; ignored\n", str ?: "");
		return -EINVAL;
	}
	qpw_param = on;
	return 0;
}
early_param("qpw", qpw_setup);

/*
 * Before SMP is up: only this CPU runs, and it holds no qpw lock here, so
 * no lock is taken in one mode and released in the other.
 */
static int __init qpw_init(void)
{
	bool on = qpw_param >= 0 ? qpw_param :
		  IS_ENABLED(CONFIG_QPW_DEFAULT) ||
		  housekeeping_enabled(HK_TYPE_KERNEL_NOISE) ||
		  housekeeping_enabled(HK_TYPE_DOMAIN_BOOT);

	/* A local_lock is a per-CPU spinlock there: see qpw_enabled(). */
	if (IS_ENABLED(CONFIG_PREEMPT_RT)) {
		if (qpw_param == 0)
			pr_warn("qpw=0 refused on PREEMPT_RT, where qpw locks are always spinlocks\n");
		on = true;
	}

	if (on) {
		static_branch_enable(&qpw_key);
		static_branch_enable(&qpw_remote_key);
	} else {
		static_branch_disable(&qpw_remote_key);
		static_branch_disable(&qpw_key);
	}
	pr_info("remote per-CPU work %s\n",
		on ? "taken under the target's lock (qpw=1)" : "queued on the target (qpw=0)");
	return 0;
}
early_initcall(qpw_init);

static DEFINE_MUTEX(qpw_switch_mutex);

/*
 * One step of qpw_switch_on(): its key enabled, or for QPW_SWITCH_END
 * disabled, with the CPU hotplug lock held, for writing for
 * QPW_SWITCH_REMOTE (see below). Whether the key took its new value: the
 * text-poke batch may refuse an update, which leaves the key as it was.
 */
static bool qpw_switch_step(enum qpw_switch_step step, struct static_key *key)
{
	bool enable = step != QPW_SWITCH_END;
	bool took;

	if (step == QPW_SWITCH_REMOTE)
		cpus_write_lock();
	else
		cpus_read_lock();
	trace_qpw_switch_step(step, false, false);
	if (enable)
		static_key_enable_cpuslocked(key);
	else
		static_key_disable_cpuslocked(key);
	took = static_key_enabled(key) == enable;
	trace_qpw_switch_step(step, true, took);
	if (step == QPW_SWITCH_REMOTE)
		cpus_write_unlock();
	else
		cpus_read_unlock();
	return took;
}

/*
 * qpw_switch_on() under qpw_switch_mutex.
 *
 * Other CPUs hold qpw locks meanwhile, and a key's sites change one at a
 * time (a lock's site may be new while its unlock's is old), so it goes
 * in steps (enum qpw_switch_step, each traced). First every unlock
 * releases what its lock took, the spinlock if the caller holds it, else
 * the local_lock (qpw_switching_key; where the owner's unlock is one store
 * in either mode, that changes nothing). Then the locks become spinlocks
 * (qpw_key), while remote work is still queued on its target, which takes
 * its own spinlock there. A section that took its lock as a local_lock ran
 * with preemption or interrupts off (PREEMPT_RT, where it would not, has
 * qpw on from boot): synchronize_rcu() waits for all of them, and until it
 * returns nobody takes a spinlock such a section stands for (another
 * CPU's owners take their own; a dead CPU's is taken under CPU hotplug,
 * which the key's update holds off). Then remote work is taken under the
 * spinlocks (qpw_remote_key), with CPU hotplug held off for writing:
 * kernel::qpw::PerCpu decides under the read side whether an offline
 * CPU's data is reached without its lock. Once every lock is a spinlock,
 * unlocks go by the key again.
 *
 * A key update the text-poke batch refuses leaves the key as it was:
 * then qpw stays off (or, refused the last step, its locks spinlocks with
 * remote work queued, which is consistent, and a later call takes the
 * last step again), and the kernel says so.
 */
static bool __qpw_switch_on(void)
{
	bool on;

	lockdep_assert_held(&qpw_switch_mutex);
	if (IS_ENABLED(CONFIG_PREEMPT_RT) || static_key_enabled(&qpw_remote_key))
		return false;
	if (!qpw_switch_step(QPW_SWITCH_UNLOCKS, &qpw_switching_key.key)) {
		pr_warn("not switched on: its unlocks' update was refused\n");
		return false;
	}
	on = qpw_switch_step(QPW_SWITCH_LOCKS, &qpw_key.key);
	/* Sections that took a spinlock before an update was undone, too. */
	synchronize_rcu();
	if (!on) {
		pr_warn("not switched on: its locks' update was refused\n");
	} else {
		on = qpw_switch_step(QPW_SWITCH_REMOTE, &qpw_remote_key.key);
		if (!on)
			pr_warn("not switched on: remote work's update was refused; the locks are spinlocks\n");
	}
	/* Refused, it leaves unlocks looking at their locks: correct either way. */
	qpw_switch_step(QPW_SWITCH_END, &qpw_switching_key.key);
	return on;
}

/**
 * qpw_switch_on - turn qpw on at run time
 *
 * Turns qpw on, never off: the locks would have to go back to local_locks
 * with remote drainers still taking them. The steps, and what a refused
 * step leaves, are __qpw_switch_on()'s.
 *
 * Context: Task context, without the CPU hotplug lock held; might sleep.
 * Return: true if it turned qpw on; false if it was on already, on
 * PREEMPT_RT (where it always is), or if a step was refused.
 */
bool qpw_switch_on(void)
{
	bool on;

	mutex_lock(&qpw_switch_mutex);
	on = __qpw_switch_on();
	mutex_unlock(&qpw_switch_mutex);
	return on;
}

/* The CPUs isolated at run time, under qpw_switch_mutex. */
static struct cpumask qpw_isolated;

/**
 * qpw_isolation_update - turn qpw on for CPUs isolated at run time
 * @isolated: the CPUs isolated now, possibly none, with those isolated
 *	      at boot
 *
 * Called by housekeeping_update() when cpuset partitions change the CPUs
 * isolated. Turns qpw on if CPUs other than those isolated at boot are,
 * unless qpw=0 was given, which it then says once.
 *
 * Context: Task context, without the CPU hotplug lock held; might sleep.
 */
void qpw_isolation_update(const struct cpumask *isolated)
{
	if (IS_ENABLED(CONFIG_PREEMPT_RT))
		return;

	mutex_lock(&qpw_switch_mutex);
	if (!cpumask_and(&qpw_isolated, isolated,
			 housekeeping_cpumask(HK_TYPE_DOMAIN_BOOT)))
		goto out;
	if (qpw_param == 0)
		pr_warn_once("CPUs %*pbl isolated at run time, but qpw=0: remote per-CPU work is still queued on them\n",
			     cpumask_pr_args(&qpw_isolated));
	else if (__qpw_switch_on())
		pr_info("CPUs %*pbl isolated at run time: remote per-CPU work now taken under the target's lock (qpw=1)\n",
			cpumask_pr_args(&qpw_isolated));
out:
	mutex_unlock(&qpw_switch_mutex);
}
