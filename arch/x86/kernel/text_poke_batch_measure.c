// SPDX-License-Identifier: GPL-2.0
/*
 * Upstream's text-poke batch kept beside the Rust one, to compare them on
 * one kernel image (CONFIG_TEXT_POKE_BATCH_MEASURE, selected by the
 * benchmark only, never by a production kernel): the boot parameter and
 * the debugfs file that pick the implementation, which
 * text_poke_batch_stats.c counts in every mode:
 *
 * text_poke_batch=rust	  the Rust batch (default)
 * text_poke_batch=c	  upstream's batch in alternative.c and update in
 *			  jump_label.c, with the counting hooks only
 * text_poke_batch=serial the Rust batch, one site per batch: 3 syncs a
 *			  site, as before batching
 */

#include <linux/cpu.h>
#include <linux/debugfs.h>
#include <linux/init.h>
#include <linux/jump_label.h>
#include <linux/memory.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/printk.h>
#include <linux/seq_file.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include <asm/text_poke_batch.h>

int text_poke_batch_mode = TEXT_POKE_BATCH_MODE_RUST;

const char * const text_poke_batch_mode_names[] = {
	[TEXT_POKE_BATCH_MODE_RUST] = "rust",
	[TEXT_POKE_BATCH_MODE_C] = "c",
	[TEXT_POKE_BATCH_MODE_SERIAL] = "serial",
};

static int __init text_poke_batch_setup(char *str)
{
	int mode = str ? match_string(text_poke_batch_mode_names,
				      ARRAY_SIZE(text_poke_batch_mode_names),
				      str) : -EINVAL;

	if (mode < 0) {
		pr_warn("text_poke_batch=%s: expected rust, c or serial; keeping rust\n",
			str ?: "");
		return -EINVAL;
	}
	text_poke_batch_mode = mode;
	return 0;
}
early_param("text_poke_batch", text_poke_batch_setup);

/**
 * text_poke_batch_set_mode - switch the implementation of text patching
 * @mode: an enum text_poke_batch_mode: rust, c or serial
 *
 * At run time, so that one boot can measure all three side by side.
 * Nothing may be in flight: text_mutex covers every
 * batch (nothing stays queued in the Rust batch once it is released, so
 * -EBUSY only guards that rule), and jump_label_mutex also covers
 * upstream's jump-label queue, filled with text_mutex dropped between
 * sites.
 *
 * Context: Might sleep; takes the CPU hotplug lock, jump_label_mutex and
 * text_mutex.
 * Return: 0, -EINVAL for an unknown @mode, -EBUSY with a batch queued.
 */
int text_poke_batch_set_mode(int mode)
{
	int ret = 0;

	if (mode < 0 || mode >= ARRAY_SIZE(text_poke_batch_mode_names))
		return -EINVAL;

	cpus_read_lock();
	jump_label_lock();
	mutex_lock(&text_mutex);
	if (text_poke_batch_pending())
		ret = -EBUSY;
	else
		WRITE_ONCE(text_poke_batch_mode, mode);
	mutex_unlock(&text_mutex);
	jump_label_unlock();
	cpus_read_unlock();
	return ret;
}

static int text_poke_batch_mode_show(struct seq_file *m, void *v)
{
	seq_printf(m, "%s\n", text_poke_batch_mode_name());
	return 0;
}

static int text_poke_batch_mode_open(struct inode *inode, struct file *file)
{
	return single_open(file, text_poke_batch_mode_show, NULL);
}

static ssize_t text_poke_batch_mode_write(struct file *file,
					  const char __user *ubuf, size_t count,
					  loff_t *ppos)
{
	char buf[8];
	int mode, ret;

	if (count >= sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, count))
		return -EFAULT;
	buf[count] = '\0';
	mode = sysfs_match_string(text_poke_batch_mode_names, buf);
	if (mode < 0)
		return mode;
	ret = text_poke_batch_set_mode(mode);
	return ret ?: count;
}

static const struct file_operations text_poke_batch_mode_fops = {
	.owner		= THIS_MODULE,
	.open		= text_poke_batch_mode_open,
	.read		= seq_read,
	.llseek		= seq_lseek,
	.release	= single_release,
	.write		= text_poke_batch_mode_write,
};

/*
 * /sys/kernel/debug/text_poke_batch/mode: the implementation in use, which a
 * write of rust, c or serial switches; beside "stats", whose directory
 * text_poke_batch_stats.c makes in a late initcall.
 */
static int __init text_poke_batch_mode_debugfs(void)
{
	struct dentry *dir = debugfs_lookup("text_poke_batch", NULL);

	if (IS_ERR_OR_NULL(dir))
		return 0;
	debugfs_create_file("mode", 0644, dir, NULL, &text_poke_batch_mode_fops);
	dput(dir);
	return 0;
}
late_initcall_sync(text_poke_batch_mode_debugfs);
