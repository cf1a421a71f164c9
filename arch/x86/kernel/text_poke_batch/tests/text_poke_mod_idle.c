// SPDX-License-Identifier: GPL-2.0
/*
 * A module with a static branch in its cpuidle text, as a cpuidle driver's
 * enter callback may have one, and another in its ordinary text. An idle
 * CPU runs its cpuidle text before it takes work deferred to its idle exit,
 * so a flip of that key must never defer its syncs; a flip of the other may.
 * scripts/guest-test/defer.sh flips each through its parameter while
 * isolated CPUs run user space, and counts their IPIs.
 */

#include <linux/jump_label.h>
#include <linux/kstrtox.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/sysfs.h>

static DEFINE_STATIC_KEY_FALSE(text_poke_mod_idle_key);
static DEFINE_STATIC_KEY_FALSE(text_poke_mod_text_key);

static noinline __cpuidle bool text_poke_mod_idle_site(void)
{
	return static_branch_unlikely(&text_poke_mod_idle_key);
}

static noinline bool text_poke_mod_text_site(void)
{
	return static_branch_unlikely(&text_poke_mod_text_key);
}

/* Enables or disables the key of @kp, as the value written says. */
static int key_set(const char *val, const struct kernel_param *kp)
{
	struct static_key_false *key = kp->arg;
	bool on;
	int ret;

	ret = kstrtobool(val, &on);
	if (ret)
		return ret;
	if (on)
		static_branch_enable(key);
	else
		static_branch_disable(key);
	return 0;
}

/* Whether the site of @kp's key branches now. */
static int key_get(char *buf, const struct kernel_param *kp)
{
	bool taken = kp->arg == &text_poke_mod_idle_key ?
		     text_poke_mod_idle_site() : text_poke_mod_text_site();

	return sysfs_emit(buf, "%d\n", taken);
}

static const struct kernel_param_ops key_ops = {
	.set = key_set,
	.get = key_get,
};
module_param_cb(idle_key, &key_ops, &text_poke_mod_idle_key, 0644);
MODULE_PARM_DESC(idle_key, "The key of the site in cpuidle text (reads the site)");
module_param_cb(text_key, &key_ops, &text_poke_mod_text_key, 0644);
MODULE_PARM_DESC(text_key, "The key of the site in ordinary text (reads the site)");

MODULE_DESCRIPTION("Static key sites in a module's cpuidle text and ordinary text");
MODULE_LICENSE("GPL");
