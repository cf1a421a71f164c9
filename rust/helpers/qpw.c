// SPDX-License-Identifier: GPL-2.0

#include <linux/cpumask.h>
#include <linux/percpu.h>
#include <linux/qpw.h>
#include <linux/sched.h>

__rust_helper bool rust_helper_qpw_enabled(void)
{
	return qpw_enabled();
}

/* Turns qpw on at run time; whether it was off. Might sleep. */
__rust_helper bool rust_helper_qpw_switch_on(void)
{
	return qpw_switch_on();
}

__rust_helper void *rust_helper_qpw_per_cpu_ptr(void __percpu *ptr, int cpu)
{
	return per_cpu_ptr(ptr, cpu);
}

/* @lock: one CPU's instance, of the class @key named @name. */
__rust_helper void rust_helper_qpw_lock_init_key(struct qpw_lock *lock, const char *name,
						 struct lock_class_key *key)
{
	qpw_lock_init_key(lock, name, key);
}

__rust_helper void rust_helper_local_qpw_lock(struct qpw_lock __percpu *lock)
{
	local_qpw_lock(lock);
}

__rust_helper void rust_helper_local_qpw_unlock(struct qpw_lock __percpu *lock)
{
	local_qpw_unlock(lock);
}

/* For PerCpu::local(): this CPU's owner is looked at before the lock is taken. */
__rust_helper void rust_helper_migrate_disable(void)
{
	migrate_disable();
}

__rust_helper void rust_helper_migrate_enable(void)
{
	migrate_enable();
}

/* PerCpu's lock is not interrupt-safe: task context only. */
__rust_helper bool rust_helper_qpw_in_task(void)
{
	return in_task();
}

__rust_helper void rust_helper_qpw_lock(struct qpw_lock __percpu *lock, int cpu)
{
	qpw_lock(lock, cpu);
}

__rust_helper void rust_helper_qpw_unlock(struct qpw_lock __percpu *lock, int cpu)
{
	qpw_unlock(lock, cpu);
}

__rust_helper void __percpu *rust_helper_qpw_alloc_percpu(size_t size, size_t align)
{
	return __alloc_percpu(size, align);
}

__rust_helper bool rust_helper_cpu_possible(int cpu)
{
	return cpu_possible(cpu);
}

__rust_helper bool rust_helper_cpu_online(int cpu)
{
	return cpu_online(cpu);
}
