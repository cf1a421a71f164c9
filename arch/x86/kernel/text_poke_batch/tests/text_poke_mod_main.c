// SPDX-License-Identifier: GPL-2.0
/*
 * A module with sites of text_poke_batch_mod_key, a key of the kernel image,
 * in its init text and in its core text: one in a function here, and five
 * over pages of their own (text_poke_mod_pages.S). Its init function waits
 * until the test lets it go (text_poke_batch_mod_go), so that the test can
 * flip the key while the module is still COMING, and records what its init
 * site saw. scripts/guest-test/module.sh loads it; text_poke_bench drives
 * the key.
 */

#include <linux/delay.h>
#include <linux/init.h>
#include <linux/jump_label.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/percpu.h>
#include <linux/qpw.h>
#include <linux/string.h>
#include <linux/sysfs.h>

#include "text_poke_stress.h"

static int init_count = -1;
module_param(init_count, int, 0444);
MODULE_PARM_DESC(init_count, "The key's count as the init site ran");

static bool init_taken;
module_param(init_taken, bool, 0444);
MODULE_PARM_DESC(init_taken, "Whether the init site branched");

static noinline bool text_poke_mod_test_site(void)
{
	return static_branch_unlikely(&text_poke_batch_mod_key);
}

static int core_taken_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%d\n", text_poke_mod_test_site());
}

static const struct kernel_param_ops core_taken_ops = {
	.get = core_taken_get,
};
module_param_cb(core_taken, &core_taken_ops, NULL, 0444);
MODULE_PARM_DESC(core_taken, "Whether the core site branches now");

static int page_sites_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%td\n",
			  text_poke_mod_pages_sites_end - text_poke_mod_pages_sites);
}

static const struct kernel_param_ops page_sites_ops = {
	.get = page_sites_get,
};
module_param_cb(page_sites, &page_sites_ops, NULL, 0444);
MODULE_PARM_DESC(page_sites, "The sites over pages of their own");

/*
 * A per-CPU count under a qpw lock, as a module's per-CPU cache would keep
 * one: <linux/qpw.h> builds and links in a module, in every configuration
 * make test builds this module in (lockdep's debugged spinlocks included).
 */
struct text_poke_mod_pcpu {
	struct qpw_lock lock;
	unsigned long reads;
};

static DEFINE_PER_CPU(struct text_poke_mod_pcpu, text_poke_mod_pcpu) = {
	.lock = QPW_LOCK_UNLOCKED,
};

static int qpw_reads_get(char *buf, const struct kernel_param *kp)
{
	unsigned long reads;

	local_qpw_lock(&text_poke_mod_pcpu.lock);
	reads = this_cpu_inc_return(text_poke_mod_pcpu.reads);
	local_qpw_unlock(&text_poke_mod_pcpu.lock);
	return sysfs_emit(buf, "%lu\n", reads);
}

static const struct kernel_param_ops qpw_reads_ops = {
	.get = qpw_reads_get,
};
module_param_cb(qpw_reads, &qpw_reads_ops, NULL, 0444);
MODULE_PARM_DESC(qpw_reads, "Reads of this parameter on this CPU, counted under a qpw lock");

/*
 * The sites over pages that do not hold what the key's value asks for: the
 * 5-byte NOP while it is disabled, a JMP to the site's target while it is
 * enabled. Read while the key is not being flipped.
 */
static int pages_wrong_get(char *buf, const struct kernel_param *kp)
{
	static const u8 nop5[] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };
	const struct text_poke_pages_site *s = text_poke_mod_pages_sites;
	bool on = static_key_enabled(&text_poke_batch_mod_key);
	unsigned int wrong = 0;

	for (; s < text_poke_mod_pages_sites_end; s++) {
		const u8 *p = (const u8 *)s->code;
		s32 rel;

		memcpy(&rel, p + 1, sizeof(rel));
		if (on ? p[0] != 0xe9 || s->code + 5 + rel != s->target :
			 memcmp(p, nop5, sizeof(nop5)))
			wrong++;
	}
	return sysfs_emit(buf, "%u\n", wrong);
}

static const struct kernel_param_ops pages_wrong_ops = {
	.get = pages_wrong_get,
};
module_param_cb(pages_wrong, &pages_wrong_ops, NULL, 0444);
MODULE_PARM_DESC(pages_wrong, "The sites over pages not as the key says");

static int __init text_poke_mod_test_init(void)
{
	int waited;

	/* The test lets it go within a second; give up after ten. */
	for (waited = 0; waited < 500 && !READ_ONCE(text_poke_batch_mod_go);
	     waited++)
		msleep(20);
	init_count = static_key_count(&text_poke_batch_mod_key.key);
	init_taken = static_branch_unlikely(&text_poke_batch_mod_key);
	WRITE_ONCE(text_poke_batch_mod_returning, true);
	return 0;
}
module_init(text_poke_mod_test_init);

static void __exit text_poke_mod_test_exit(void)
{
}
module_exit(text_poke_mod_test_exit);

MODULE_DESCRIPTION("Static key sites in a module's init and core text");
MODULE_LICENSE("GPL");
