// SPDX-License-Identifier: GPL-2.0

#include <linux/cpumask.h>
#include <linux/percpu.h>
#include <linux/qpw.h>

__rust_helper bool rust_helper_qpw_enabled(void)
{
	return qpw_enabled();
}

__rust_helper void *rust_helper_qpw_per_cpu_ptr(void __percpu *ptr, int cpu)
{
	return per_cpu_ptr(ptr, cpu);
}

/* @lock: this CPU's instance, as local_lock_init() takes it. */
__rust_helper void rust_helper_qpw_lock_init(struct qpw_lock *lock)
{
	qpw_lock_init(lock);
}

__rust_helper void rust_helper_local_qpw_lock(struct qpw_lock __percpu *lock)
{
	local_qpw_lock(lock);
}

__rust_helper void rust_helper_local_qpw_unlock(struct qpw_lock __percpu *lock)
{
	local_qpw_unlock(lock);
}

/* For PerCpu::local(): this CPU's data is looked at before it is locked. */
__rust_helper void rust_helper_preempt_disable(void)
{
	preempt_disable();
}

__rust_helper void rust_helper_preempt_enable(void)
{
	preempt_enable();
}

/* Returns the CPU whose data local_qpw_lock() guards. */
__rust_helper int rust_helper_qpw_this_cpu(void)
{
	return smp_processor_id();
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

__rust_helper bool rust_helper_qpw_cpu_possible(int cpu)
{
	return cpu_possible(cpu);
}

__rust_helper bool rust_helper_qpw_cpu_online(int cpu)
{
	return cpu_online(cpu);
}
