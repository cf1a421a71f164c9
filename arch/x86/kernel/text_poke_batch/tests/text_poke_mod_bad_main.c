// SPDX-License-Identifier: GPL-2.0
/*
 * A module with a site of text_poke_batch_span_key, a key of the kernel image,
 * that does not hold what the key put there (text_poke_mod_bad_site.S).
 * Loaded while the key is disabled, nothing writes the site and the module
 * loads, but no flip of the key can go through while it is there. Loaded
 * while the key is enabled, its site would have to be flipped as it comes:
 * the load fails, and nothing of the module stays registered.
 * scripts/guest-test/span.sh loads it.
 */

#include <linux/init.h>
#include <linux/module.h>

static int __init text_poke_mod_bad_init(void)
{
	return 0;
}
module_init(text_poke_mod_bad_init);

static void __exit text_poke_mod_bad_exit(void)
{
}
module_exit(text_poke_mod_bad_exit);

MODULE_DESCRIPTION("A static key site that does not hold what its key put there");
MODULE_LICENSE("GPL");
