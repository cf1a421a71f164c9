/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Events of qpw (kernel/qpw.c): the steps of qpw_switch_on(), which turns
 * qpw on at run time, each a static key's update.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM qpw

#if !defined(_TRACE_QPW_H) || defined(TRACE_HEADER_MULTI_READ)
#define _TRACE_QPW_H

#include <linux/tracepoint.h>

#ifndef __QPW_SWITCH_STEP
#define __QPW_SWITCH_STEP
/*
 * The steps of qpw_switch_on(), in order: unlocks release what their lock
 * took (qpw_switching_key on), locks become spinlocks (qpw_key), remote
 * work is taken under them (qpw_remote_key), unlocks go by the key again
 * (qpw_switching_key off).
 */
enum qpw_switch_step {
	QPW_SWITCH_UNLOCKS,
	QPW_SWITCH_LOCKS,
	QPW_SWITCH_REMOTE,
	QPW_SWITCH_END,
};
#endif

TRACE_DEFINE_ENUM(QPW_SWITCH_UNLOCKS);
TRACE_DEFINE_ENUM(QPW_SWITCH_LOCKS);
TRACE_DEFINE_ENUM(QPW_SWITCH_REMOTE);
TRACE_DEFINE_ENUM(QPW_SWITCH_END);

/*
 * A step of qpw_switch_on(): about to update its key (!@done), with the
 * CPU hotplug lock the update needs held; or done, @took telling whether
 * the key took its new value (the text-poke batch may refuse an update).
 */
TRACE_EVENT(qpw_switch_step,
	    TP_PROTO(enum qpw_switch_step step, bool done, bool took),
	    TP_ARGS(step, done, took),
	    TP_STRUCT__entry(__field(unsigned int, step)
			     __field(bool, done)
			     __field(bool, took)),
	    TP_fast_assign(__entry->step = step;
			   __entry->done = done;
			   __entry->took = took;),
	    TP_printk("%s %s",
		      __print_symbolic(__entry->step,
				       { QPW_SWITCH_UNLOCKS, "unlocks" },
				       { QPW_SWITCH_LOCKS, "locks" },
				       { QPW_SWITCH_REMOTE, "remote" },
				       { QPW_SWITCH_END, "end" }),
		      !__entry->done ? "begins" :
		      __entry->took ? "done" : "refused")
);

#endif /* _TRACE_QPW_H */

#include <trace/define_trace.h>
