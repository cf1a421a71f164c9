// SPDX-License-Identifier: GPL-2.0
/*
 * qpw: per-CPU data under a lock another CPU can take (see <linux/qpw.h>).
 *
 * The switch, set once at boot: qpw=0|1, else CONFIG_QPW_DEFAULT, else on
 * when nohz_full= or isolcpus= isolate CPUs, the systems whose isolated
 * CPUs the queued work would wake. Always on with PREEMPT_RT.
 */

#define pr_fmt(fmt) "qpw: " fmt

#include <linux/errno.h>
#include <linux/export.h>
#include <linux/init.h>
#include <linux/kstrtox.h>
#include <linux/printk.h>
#include <linux/qpw.h>
#include <linux/sched/isolation.h>

DEFINE_STATIC_KEY_MAYBE(CONFIG_QPW_DEFAULT, qpw_key);
/* For qpw_enabled() in modules. */
EXPORT_SYMBOL_GPL(qpw_key);

/* -1: not given at boot. */
static int qpw_param __initdata = -1;

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

	if (on)
		static_branch_enable(&qpw_key);
	else
		static_branch_disable(&qpw_key);
	pr_info("remote per-CPU work %s\n",
		on ? "taken under the target's lock (qpw=1)" : "queued on the target (qpw=0)");
	return 0;
}
early_initcall(qpw_init);
