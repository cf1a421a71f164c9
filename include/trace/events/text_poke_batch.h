/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Events of the Rust text-poke batch (arch/x86/kernel/text_poke_batch.c):
 * one per batch applied, with the counters of CONFIG_TEXT_POKE_BATCH_STATS;
 * and one per key flip the Rust update refuses.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM text_poke_batch

#if !defined(_TRACE_TEXT_POKE_BATCH_H) || defined(TRACE_HEADER_MULTI_READ)
#define _TRACE_TEXT_POKE_BATCH_H

#include <linux/tracepoint.h>

#ifdef CONFIG_TEXT_POKE_BATCH_STATS
/*
 * A batch applied: @sites written with @syncs sync rounds, which with
 * everything else the CPUs received meanwhile came to @ipis function-call
 * IPIs (the CAL counts of /proc/interrupts, summed), in @ns from the first
 * INT3 to the last sync.
 */
TRACE_EVENT(text_poke_batch_applied,
	    TP_PROTO(unsigned int sites, unsigned int syncs, unsigned int ipis,
		     u64 ns),
	    TP_ARGS(sites, syncs, ipis, ns),
	    TP_STRUCT__entry(__field(unsigned int, sites)
			     __field(unsigned int, syncs)
			     __field(unsigned int, ipis)
			     __field(u64, ns)),
	    TP_fast_assign(__entry->sites = sites;
			   __entry->syncs = syncs;
			   __entry->ipis = ipis;
			   __entry->ns = ns;),
	    TP_printk("sites=%u syncs=%u ipis=%u ns=%llu", __entry->sites,
		      __entry->syncs, __entry->ipis, __entry->ns)
);
#endif

/*
 * A key flip refused, nothing written: @wrong of its sites held what the
 * key did not put there, or the batch could not take or apply them.
 */
TRACE_EVENT(text_poke_batch_refused,
	    TP_PROTO(const void *key, unsigned int wrong),
	    TP_ARGS(key, wrong),
	    TP_STRUCT__entry(__field(const void *, key)
			     __field(unsigned int, wrong)),
	    TP_fast_assign(__entry->key = key;
			   __entry->wrong = wrong;),
	    TP_printk("key=%ps wrong=%u", __entry->key, __entry->wrong)
);

#endif /* _TRACE_TEXT_POKE_BATCH_H */

#include <trace/define_trace.h>
