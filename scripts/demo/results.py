#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Turn the "@@" lines of a demo guest log into results/demo.json,
results/REPORT.md and PNG plots.

Usage: results.py --log GUEST_LOG... --out DIR --kernel VERSION --cpus N
                  --revision REV [--icount] --scenario NAME... [--merge DEMO_JSON]

The scale scenario runs in one boot per vCPU count (SCALE_CPUS); the others
in one boot of --cpus vCPUs.

A scenario the guest did not finish ("@@ done NAME" missing) keeps the
measurements it made, and is listed under "incomplete" with "complete":
false. Exits 1 if anything is incomplete or an error line was seen.
"""

import argparse
import json
import os
import re
import statistics
import sys
import textwrap

UNIT_ICOUNT = "guest_ns"  # -icount shift=0: one guest ns per instruction
SCALE_CPUS = (2, 4, 8, 16)


def parse_logs(paths):
    results, done, errors = [], set(), []
    for path in paths:
        try:
            r, d, e = parse_log(path)
        except OSError as err:
            errors.append(f"{path}: {err}")
            continue
        results += r
        done |= d
        errors += e
    return results, done, errors


def parse_log(path):
    results, done, errors = [], set(), []
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            line = raw.replace("\r", "").rstrip("\n")
            m = re.search(r"@@ (\w+) ?(.*)$", line)
            if not m:
                continue
            what, rest = m.groups()
            if what == "result":
                fields = dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)
                results.append(fields)
            elif what == "done":
                done.add(rest.strip())
            elif what == "error":
                errors.append(rest.strip())
    return results, done, errors


def cal_delta(r):
    before = [int(x) for x in r.get("cal_before", "").split(",") if x]
    after = [int(x) for x in r.get("cal_after", "").split(",") if x]
    if not before or len(before) != len(after):
        return None
    return [a - b for a, b in zip(after, before)]


def flip_row(r):
    """The figures every row of key flips has: mode, sites, rounds and CAL per flip."""
    flips = int(r["flips"])
    cal = cal_delta(r)
    return {
        "mode": r["mode"],
        "sites": int(r["sites"]),
        "flips": flips,
        "ipi_rounds_per_flip": int(r["syncs"]) / flips,
        "cal_per_flip_per_cpu": [round(c / flips, 2) for c in cal] if cal else None,
    }, flips, cal


def flip_rows(results, cpus, unit, kind="flip"):
    """Flips of the bench keys (kind flip), or of upstream's write_msr key (kind upstream)."""
    rows = []
    for r in results:
        if r.get("kind") != kind or r.get("scenario") != "flip":
            continue
        row, flips, _ = flip_row(r)
        irq = cal_delta({"cal_before": r.get("irq_before", ""),
                         "cal_after": r.get("irq_after", "")})
        if row["mode"] == "rust" and r.get("defer") == "off":
            row["mode"] = "rust, defer off"
        rows.append({
            **row,
            "ipis_per_flip_per_cpu": int(r["ipis"]) / flips / max(cpus - 1, 1),
            "irqs_per_flip_per_cpu": [round(c / flips, 2) for c in irq] if irq else None,
            "cost_per_flip": int(r["ns"]) / flips,
            "cost_min": int(r["ns_min"]),
            "cost_max": int(r["ns_max"]),
            "entries_per_flip": int(r["entries"]) / flips,
            "mm_switches_per_flip": int(r["mm_switches"]) / flips if "mm_switches" in r else None,
            "wrong_sites": int(r["wrong"]),
            "unit": unit,
        })
    return rows


# The CPUs the isolation boot isolates (nohz_full=2-3), and the one it flips from.
ISOLATED = (2, 3)
FLIPPER = 0


def tlb_delta(r):
    """Each CPU's TLB count (/proc/interrupts) after a run minus before, if the log has them."""
    return cal_delta({"cal_before": r.get("tlb_before", ""), "cal_after": r.get("tlb_after", "")})


def per_isolated(counts, n):
    """The mean of the isolated CPUs' counts, per flip (or per storm: n = 1)."""
    if not counts or len(counts) <= max(ISOLATED):
        return None
    return round(sum(counts[c] for c in ISOLATED) / n / len(ISOLATED), 2)


def isolation_rows(results):
    """Flips from CPU 0 while the isolated CPUs run user-space loops, deferral off and on."""
    rows = []
    user = {}
    for r in results:
        if r.get("scenario") != "isolation":
            continue
        if r.get("kind") == "usertime":
            before = [tuple(map(int, x.split("/"))) for x in r["user_before"].split(",")]
            after = [tuple(map(int, x.split("/"))) for x in r["user_after"].split(",")]
            user[r.get("defer", "off")] = [round((a[0] - b[0]) / max(a[1] - b[1], 1), 3)
                                           for a, b in zip(after, before)]
            continue
        if r.get("kind") != "flip":
            continue
        row, flips, cal = flip_row(r)
        tlb = tlb_delta(r)
        rows.append({
            **row,
            "defer": r.get("defer", "none") if r["mode"] != "c" else "n/a",
            "cal_per_flip_isolated": per_isolated(cal, flips),
            "tlb_per_flip_isolated": per_isolated(tlb, flips),
            "cost_per_flip_min": int(r["ns_min"]) if "ns_min" in r else None,
        })
    # Each flip's cost against upstream's batch at the same size, in the same boot.
    c_cost = {r["sites"]: r["cost_per_flip_min"] for r in rows if r["mode"] == "c"}
    for r in rows:
        if r["mode"] != "c" and r["cost_per_flip_min"] and c_cost.get(r["sites"]):
            r["vs_c_min"] = round(r["cost_per_flip_min"] / c_cost[r["sites"]], 3)
    return rows, user


def tlb_rows(results):
    """vmalloc/vfree storms on CPU 0 while the isolated CPUs run user space."""
    rows = []
    for r in results:
        if r.get("scenario") != "isolation" or r.get("kind") != "vmalloc":
            continue
        cal = cal_delta(r)
        tlb = tlb_delta(r)
        pairs = int(r["flips"])
        rows.append({
            "defer_tlb": r["defer_tlb"],
            "pairs": pairs,
            "cal": [cal[c] for c in ISOLATED] if cal else None,
            "tlb": [tlb[c] for c in ISOLATED] if tlb else None,
            "flushes_deferred": (int(r["deferred_after"]) - int(r["deferred_before"])
                                 if "deferred_after" in r else None),
            "storm_cost": int(r["ns"]),
            "storm_cost_per_pair": round(int(r["ns"]) / pairs, 1),
        })
    return rows


def entry_rows(results):
    """Kernel-entry cost on an isolated CPU: getpid() loops, then the entry hook alone."""
    getpid = {}
    hook = []
    for r in results:
        if r.get("scenario") != "isolation":
            continue
        if r.get("kind") == "getpid" and int(r.get("calls", 0)) > 0:
            getpid.setdefault(r["defer"], []).append(int(r["ns"]) / int(r["calls"]))
        elif r.get("kind") == "entry":
            n = int(r["flips"])
            for key, variant in (("entry_kernel_ns", "hook: deferral off (word read)"),
                                 ("entry_user_ns", "hook: deferral on, nothing pending"),
                                 ("entry_work_ns", "hook: deferral on, a sync pending"),
                                 ("entry_tlb_ns", "hook: deferral on, a TLB flush pending")):
                hook.append({"variant": variant, "calls": n,
                             "instr_per_call": round(int(r[key]) / n, 1)})
    rows = []
    median = {}
    for defer in ("off", "on"):
        runs = sorted(getpid.get(defer, []))
        if runs:
            median[defer] = runs[len(runs) // 2]
            rows.append({"variant": f"getpid() on CPU 2, deferral {defer}", "calls": len(runs),
                         "instr_per_call": round(median[defer], 1),
                         "runs": [round(x, 1) for x in runs]})
    # A storm at its worst leaves work pending at every entry: getpid() with deferral on plus
    # what the hook adds when it finds work, both measured above (instruction counts add up).
    by = {h["variant"]: h["instr_per_call"] for h in hook}
    idle = by.get("hook: deferral on, nothing pending")
    if "on" in median and idle is not None:
        for work in ("a sync", "a TLB flush"):
            busy = by.get(f"hook: deferral on, {work} pending")
            if busy is not None:
                rows.append({"variant": f"getpid() on CPU 2, {work} pending at every entry "
                                        "(derived: deferral on + the hook's difference)",
                             "calls": "", "derived": True,
                             "instr_per_call": round(median["on"] + busy - idle, 1)})
    if "off" in median:
        for r in rows[1:]:
            r["over_off"] = round(r["instr_per_call"] / median["off"] - 1, 4)
    return rows + hook


# The host benchmark's variants (tests/host/src/bin/hook_cycles.rs), in order.
HOOK_VARIANTS = (
    ("loop", "the loop alone"),
    ("ct", "context tracking's own two ct_state_inc() (lock xadd)"),
    ("idle_off", "idle entry and exit, deferral off"),
    ("idle_on", "idle entry and exit, deferral on"),
    ("irq_off", "an interrupt in idle, deferral off"),
    ("irq_on", "an interrupt in idle, deferral on"),
)


def hooks_section(results):
    """The idle hooks in real cycles on the host CPU (make demo's hooks scenario): per variant
    the cheapest and the median sample, and what deferral adds to an idle round trip and to an
    interrupt in idle, beside context tracking's own cost and the exit latency of the host's
    shallowest halting idle state."""
    info = next((r for r in results if r.get("scenario") == "hooks"
                 and r.get("kind") == "host_info"), None)
    by = {r["variant"]: r for r in results
          if r.get("scenario") == "hooks" and r.get("kind") == "host"}
    if info is None or not by:
        return None
    rows = [{"variant": v, "what": what,
             "ticks_min": float(by[v]["ticks_min"]), "ticks_median": float(by[v]["ticks_median"]),
             "ns_min": float(by[v]["ns_min"]), "ns_median": float(by[v]["ns_median"])}
            for v, what in HOOK_VARIANTS if v in by]
    t = {r["variant"]: r for r in rows}
    added = {}
    for kind in ("idle", "irq"):
        on, off = t.get(f"{kind}_on"), t.get(f"{kind}_off")
        if on and off:
            added[kind] = {"ticks": round(on["ticks_min"] - off["ticks_min"], 2),
                           "ns": round(on["ns_min"] - off["ns_min"], 3)}
    ct = None
    if "ct" in t and "loop" in t:
        ct = {"ticks": round(t["ct"]["ticks_min"] - t["loop"]["ticks_min"], 2),
              "ns": round(t["ct"]["ns_min"] - t["loop"]["ns_min"], 3)}
    return {"cpu": info.get("cpu", "").replace("_", " "),
            "tsc_mhz": int(info.get("tsc_mhz", 0)),
            "samples": int(info.get("samples", 0)), "iterations": int(info.get("iterations", 0)),
            "idle_state": info.get("idle_state", "none").replace("_", " "),
            "idle_exit_us": int(info.get("idle_exit_us", 0)),
            "rows": rows, "deferral_adds": added, "ct_state_inc_pair": ct}


# The branch command's figures and the rows they make, in order.
BRANCH_VARIANTS = (
    ("branch_plain_ns", "no check"),
    ("branch_unlikely_off_ns", "Rust static_branch_unlikely!, key disabled (falls through)"),
    ("branch_unlikely_on_ns", "Rust static_branch_unlikely!, key enabled (jumps)"),
    ("branch_likely_off_ns", "Rust static_branch_likely!, key disabled (jumps)"),
    ("branch_likely_on_ns", "Rust static_branch_likely!, key enabled (falls through)"),
    ("branch_atomic_ns", "AtomicBool, relaxed load, false"),
    ("branch_c_unlikely_ns", "C static_branch_unlikely(), key disabled, from C"),
)


def branch_rows(results):
    """The fast path of a branch: instructions per call of each variant, and what the check
    adds to the function with no check."""
    rows = []
    for r in results:
        if r.get("scenario") != "branch":
            continue
        calls = int(r["flips"])
        plain = int(r["branch_plain_ns"]) / calls
        for key, variant in BRANCH_VARIANTS:
            per = int(r[key]) / calls
            rows.append({"variant": variant, "calls": calls, "instr_per_call": round(per, 2),
                         "over_no_check": round(per - plain, 2)})
    return rows


def pipe_rows(results):
    """Seed 004's pipe ping-pong: guest instructions per round trip with sched_schedstats off
    and on (median of the runs), and what one flip of that key cost per implementation."""
    trips = {}
    for r in results:
        if r.get("scenario") == "pipe" and r.get("kind") == "pingpong":
            trips.setdefault(int(r["schedstats"]), []).append(int(r["ns"]) / int(r["rounds"]))
    rows = [{"variant": f"sched_schedstats {'on' if on else 'off'}",
             "rounds": next(int(r["rounds"]) for r in results
                            if r.get("kind") == "pingpong"),
             "instr_per_round_trip": round(statistics.median(v), 1),
             "runs": [round(x, 1) for x in v]}
            for on, v in sorted(trips.items())]
    flips = []
    for r in results:
        if r.get("scenario") != "pipe" or r.get("kind") != "flip":
            continue
        cal, n = cal_delta(r), int(r["flips"])
        rust = r["mode"] == "rust"
        delta = lambda k: int(r[f"{k}_after"]) - int(r[f"{k}_before"])
        flips.append({"mode": r["mode"], "flips": n,
                      "sites_per_flip": round(delta("entries") / n, 1) if rust else None,
                      "sync_rounds_per_flip": round(delta("syncs") / n, 2) if rust else None,
                      "cal_per_flip_per_cpu": [round(c / n, 2) for c in cal] if cal else None})
    return {"key": "sched_schedstats", "cpu": 1, "pingpong": rows, "flip": flips}


def drain_figures(r, isolated=(2, 3)):
    """Per lru_add_drain_all(), per isolated CPU: RES, CAL and kworker context switches."""
    n = int(r["drains"])
    out = {"drains": n}
    for k in ("res", "cal", "kworker"):
        after = [int(x) for x in r[f"{k}_after"].split(",")]
        before = [int(x) for x in r[f"{k}_before"].split(",")]
        delta = sum(after[c] - before[c] for c in isolated)
        out[f"{k}_per_drain"] = round(delta / len(isolated) / n, 2)
    out["irq_per_drain"] = round(out["res_per_drain"] + out["cal_per_drain"], 2)
    out["faults"] = [int(x) for x in r.get("faults", "").split(",") if x]
    return out


def noise_figures(r):
    """The osnoise or timerlat figures of one storm: every "name=value" of the result but the
    bookkeeping, as numbers, per-task lists as lists."""
    out = {}
    for k, v in r.items():
        if k in ("scenario", "kind", "cpus", "qpw", "drains", "mlock"):
            continue
        out[k] = [int(x) for x in v.split(",")] if "," in v else int(v)
    return out


def qpw_rows(results):
    """Per kernel and boot (qpw off, on): the local fast path of a local_lock and of a qpw lock,
    the interrupts the isolated CPUs take per remote drain, and what the osnoise and timerlat
    tracers see on them during the drains; and under "mlocked" the drains and osnoise figures
    again with the tasks' memory locked."""
    drains, noise, mlocked = {}, {}, {}
    for r in results:
        if r.get("scenario") != "qpw":
            continue
        locked = r.get("mlock") == "1"
        if r.get("kind") == "drain":
            if locked:
                mlocked.setdefault(r["qpw"], {}).update(drain_figures(r))
            else:
                drains[r["qpw"]] = drain_figures(r)
        elif r.get("kind") in ("osnoise", "timerlat"):
            if locked:
                mlocked.setdefault(r["qpw"], {})[r["kind"]] = noise_figures(r)
            else:
                noise.setdefault(r["qpw"], {})[r["kind"]] = noise_figures(r)
    rows = []
    for r in results:
        if r.get("scenario") != "qpw" or r.get("kind") != "lockcost":
            continue
        calls = int(r["flips"])
        none = int(r["lock_none_ns"])
        local = (int(r["lock_local_ns"]) - none) / calls
        qpw = (int(r["lock_qpw_ns"]) - none) / calls
        kernel = r.get("kernel", "demo")
        row = {
            "kernel": kernel,
            "qpw": "on" if r["qpw"] == "1" else "off",
            "calls": calls,
            "local_lock_instr": round(local, 2),
            "qpw_lock_instr": round(qpw, 2),
            "extra_instr": round(qpw - local, 2),
        }
        if kernel == "demo":
            row.update(drains.get(r["qpw"], {}))
            row.update(noise.get(r["qpw"], {}))
            if r["qpw"] in mlocked:
                row["mlocked"] = mlocked[r["qpw"]]
        rows.append(row)
    return rows


def noise_rows(results):
    """What the osnoise tracer saw on the isolated CPUs during each storm of the noise scenario:
    per storm and configuration, CPUs 2-3 together ([`noise_table`] adds the qpw drains)."""
    rows = []
    for r in results:
        if r.get("scenario") != "noise":
            continue
        cal = cal_delta(r)
        window = int(r["window_ns"])
        row = {"storm": r["storm"], "mode": r["mode"], "mechanism": r["mech"],
               "window_ns": window,
               "cal_isolated": sum(cal[c] for c in ISOLATED) if cal else None}
        row.update(noise_figures({k: v for k, v in r.items()
                                  if k not in ("storm", "mode", "mech", "window_ns",
                                               "cal_before", "cal_after")}))
        # The share of the isolated CPUs' time the noise took, rtla's "100 - %CPU Aval".
        row["noise_share"] = round(row["noise_ns"] / (window * len(ISOLATED)), 5) \
            if window > 0 else None
        rows.append(row)
    return rows


def noise_table(doc):
    """The rows of the noise table: the noise scenario's storms, then the qpw boots' drains."""
    rows = []
    for r in doc.get("noise", []):
        if r["storm"] == "vmalloc":
            config = f"TLB deferral {r['mechanism']}"
        elif r["mode"] == "c":
            config = "c"
        else:
            config = f"{r['mode']}, deferral {r['mechanism']}"
        rows.append((r["storm"], config, r))
    for r in doc.get("qpw", []):
        if r.get("kernel", "demo") == "demo" and r.get("osnoise"):
            rows.append(("drains", f"qpw {r['qpw']}", r["osnoise"]))
    for r in doc.get("qpw", []):
        if r.get("kernel", "demo") == "demo" and r.get("mlocked", {}).get("osnoise"):
            rows.append(("drains", f"qpw {r['qpw']}, memory locked", r["mlocked"]["osnoise"]))
    storms = ["flip", "ftrace", "vmalloc", "drains"]
    return sorted(rows, key=lambda row: storms.index(row[0]) if row[0] in storms else len(storms))


def lookup_rows(results, unit):
    """The INT3 path's cost: the median run that hit an INT3 less the median plain run, each
    median of up to 1024 runs, robust to the runs another vCPU's turn lengthened (counted as
    slow: more than four times their kind's median); with the minimums, and the means of
    every run, which such a run moves."""
    rows = []
    for r in results:
        if r.get("kind") != "lookup":
            continue
        hits, plain = int(r["hits"]), int(r["plain"])
        row = {
            "impl": r["mode"],
            "entries": int(r["sites"]),
            "hits": hits,
            "plain": plain,
            "cost": None,
            "unit": unit,
        }
        if hits and plain:
            hit_med, plain_med = int(r["hit_med"]), int(r["plain_med"])
            row.update(cost=hit_med - plain_med, hit_cost=hit_med, plain_cost=plain_med,
                       hit_min=int(r["hit_min"]), plain_min=int(r["plain_min"]),
                       cost_of_mins=int(r["hit_min"]) - int(r["plain_min"]),
                       slow_runs=int(r["slow"]),
                       cost_of_means=round(int(r["hit_ns"]) / hits
                                           - int(r["plain_ns"]) / plain, 1))
        rows.append(row)
    return rows


def impossible(doc):
    """The figures of doc that cannot be true, one line each naming its scenario: a cost
    below zero."""
    bad = []
    for r in doc.get("lookup", []):
        for k in ("cost", "cost_of_mins", "hit_cost", "plain_cost"):
            if r.get(k) is not None and r[k] < 0:
                bad.append(f"lookup: {r['impl']} at {r['entries']} entries: {k} {r[k]} < 0")
    for r in doc.get("flip", []) + doc.get("upstream_key", []):
        if r.get("cost_min") is not None and r["cost_min"] < 0:
            bad.append(f"flip: {r['mode']} at {r['sites']} sites: cost_min {r['cost_min']} < 0")
    hooks = doc.get("hooks") or {}
    for kind, a in (hooks.get("deferral_adds") or {}).items():
        if a["ticks"] < 0:
            bad.append(f"hooks: deferral on adds {a['ticks']} ticks to {kind} < 0")
    ct = hooks.get("ct_state_inc_pair")
    if ct and ct["ticks"] < 0:
        bad.append(f"hooks: ct_state_inc() pair {ct['ticks']} ticks < 0")
    for r in doc.get("percpu") or []:
        if r["held"] != 1:
            bad.append(f"percpu: {r['cpus']} vCPUs: the other CPU did not hold its data "
                       f"throughout the busy runs")
        if not 0 < r["alone_ns_min"] <= r["alone_ns_max"]:
            bad.append(f"percpu: {r['cpus']} vCPUs: alone {r['alone_ns_min']}-"
                       f"{r['alone_ns_max']} ns")
    return bad


def scale_rows(results):
    rows = []
    for r in results:
        if r.get("scenario") != "scale":
            continue
        flips, cpus = int(r["flips"]), int(r["cpus"])
        cal = cal_delta(r)
        rows.append({
            "mode": r["mode"],
            "cpus": cpus,
            "sites": int(r["sites"]),
            "flips": flips,
            "ipi_rounds_per_flip": int(r["syncs"]) / flips,
            "ipis_per_flip": int(r["ipis"]) / flips,
            "cal_per_flip": round(sum(cal) / flips, 2) if cal else None,
        })
    return rows


def percpu_rows(results):
    """The fast path of a Rust per-CPU lock (the scale boots' `percpu` runs): ns per
    PerCpu::local() call, increment and guard drop, the least and the most over the CPUs
    measured, alone and while another CPU holds its own data through with_cpu() in a loop."""
    rows = []
    for r in results:
        if r.get("scenario") != "percpu":
            continue
        rows.append({
            "cpus": int(r["cpus"]),
            "calls": int(r["flips"]),
            "qpw": int(r["qpw"]),
            "cpus_measured": int(r["percpu_cpus"]),
            "alone_ns_min": int(r["percpu_ns_min"]),
            "alone_ns_max": int(r["percpu_ns_max"]),
            "busy_ns_min": int(r["percpu_busy_ns_min"]),
            "busy_ns_max": int(r["percpu_busy_ns_max"]),
            "held": int(r["percpu_held"]),
        })
    return sorted(rows, key=lambda r: r["cpus"])


def txn_rows(results, unit):
    rows = []
    for r in results:
        if r.get("kind") != "txn":
            continue
        flips = int(r["flips"])
        for way, syncs, ipis, ns in (("one_by_one", "syncs", "ipis", "ns"),
                                     ("transaction", "txn_syncs", "txn_ipis", "txn_ns")):
            rows.append({
                "mode": r["mode"],
                "way": way,
                "keys": 8,
                "sites_per_key": 64,
                "flips": flips,
                "ipi_rounds": int(r[syncs]) / flips,
                "ipis": int(r[ipis]) / flips,
                "cost": int(r[ns]) / flips,
                "unit": unit,
                "wrong_sites": int(r["wrong"]),
            })
    return rows


def ftrace_rows(results, unit):
    """The function tracer enabled and disabled: figures per enable or disable."""
    rows = []
    for r in results:
        if r.get("scenario") != "ftrace":
            continue
        rounds = int(r["rounds"])
        cal = cal_delta(r)
        rows.append({
            "mode": r["mode"],
            "op": r["op"],
            "sites": int(r["sites"]),
            "rounds": rounds,
            "cost_per_op": int(r["ns"]) / rounds,
            "syncs_per_op": int(r["syncs"]) / rounds,
            "batches_per_op": int(r["batches"]) / rounds,
            "entries_per_op": int(r["entries"]) / rounds,
            "int3_hits_per_op": int(r["int3_hits"]) / rounds,
            "ipis_per_op": int(r["ipis"]) / rounds,
            "batch_ns_per_op": int(r.get("batch_ns", 0)) / rounds,
            "cal_per_op_per_cpu": [round(c / rounds, 2) for c in cal] if cal else None,
            # The largest and the longest batch of any one write, the stats'
            # maxima being reset before each.
            "max_batch": int(r["max_batch"]),
            "max_batch_ns": int(r.get("max_batch_ns", 0)),
            "clock": r.get("clock"),
            "unit": unit,
        })
    return rows


IRQSOFF_OPS = ("flip1024", "flip4096", "ftrace_enable", "ftrace_disable", "none")
IRQSOFF_TRACERS = ("irqsoff", "preemptoff")


def irqsoff_rows(results):
    """The longest interrupts-off section (irqsoff tracer) or preemption-off one (preemptoff)
    in each window: per tracer, mode and operation, the longest over the repetitions, where it
    started and ended, and each repetition's."""
    by = {}
    for r in results:
        if r.get("scenario") != "irqsoff":
            continue
        by.setdefault((r.get("tracer", "irqsoff"), r["mode"], r["op"]), []).append(r)
    rows = []
    for (tracer, mode, op), rs in sorted(by.items()):
        top = max(rs, key=lambda r: int(r["us"]))
        # The median window (the lower one of an even count), robust to one interrupt that
        # lands in one window: its handler's section is the interrupt's, not the operation's.
        mid = sorted(rs, key=lambda r: int(r["us"]))[(len(rs) - 1) // 2]
        rows.append({"tracer": tracer, "mode": mode, "op": op, "reps": len(rs),
                     "median_us": int(mid["us"]), "longest_us": int(top["us"]),
                     "each_us": [int(r["us"]) for r in rs],
                     "started_at": mid.get("start"), "ended_at": mid.get("end"),
                     "longest_started_at": top.get("start"),
                     "longest_ended_at": top.get("end")})
    return rows


def irqsoff_report(rows):
    """The REPORT.md section of the irqsoff scenario: a table per tracer."""
    what = {"flip1024": "1024-site key, enabled and disabled",
            "flip4096": "4096-site key (64 pages), enabled and disabled",
            "ftrace_enable": "function tracer enabled",
            "ftrace_disable": "function tracer disabled",
            "none": "nothing (a shell builtin)"}
    order = {op: i for i, op in enumerate(IRQSOFF_OPS)}
    off = {"irqsoff": "interrupts off", "preemptoff": "preemption off"}
    tables = []
    for tracer in sorted({r.get("tracer", "irqsoff") for r in rows},
                         key=lambda t: (IRQSOFF_TRACERS + (t,)).index(t)):
        mine = [r for r in rows if r.get("tracer", "irqsoff") == tracer]
        for r in mine:
            r.setdefault("median_us", r["longest_us"])
        ratios = ratio(mine, ("mode", "op"), "median_us")
        out = []
        for op in sorted({r["op"] for r in mine}, key=lambda o: (order.get(o, 99), o)):
            for r in sorted((r for r in mine if r["op"] == op), key=lambda r: r["mode"]):
                out.append([what.get(op, op), r["mode"], fmt(r["median_us"]),
                            ", ".join(fmt(v) for v in r["each_us"]),
                            f"`{r['started_at']}`", f"`{r['ended_at']}`",
                            f"`{r.get('longest_started_at', r['started_at'])}`"])
            if op in ratios:
                out.append([what.get(op, op), "rust/c", fmt(ratios[op], 3), "", "", "", ""])
        tables += [f"`current_tracer` {tracer}: the longest section with "
                   f"{off.get(tracer, tracer)}.", "",
                   table(["during", "mode", "median window (µs)", "each window (µs)",
                          "started at", "ended at", "longest window's started at"], out), ""]
    return ["## irqsoff: the longest interrupts-off and preemption-off sections", "",
            "A kernel of its own (the main one plus `CONFIG_IRQSOFF_TRACER`, whose hooks "
            "in every interrupt toggle would shift the other figures), booted on one vCPU: "
            "with several, single-threaded TCG runs them in turn and the guest clock counts "
            "all their instructions, so a section that spans a turn would count the other "
            "CPUs' too; with `CONFIG_PREEMPT_TRACER` and the benchmark's key of 4096 sites, "
            "64 in each of 64 pages, as many as one mapping of the Rust batch holds. "
            "`current_tracer` irqsoff, then preemptoff, each with its function tracing off, "
            "the function tracer in a tracing instance. Per window: `tracing_max_latency` "
            "reset, the operation, the longest section with interrupts (or preemption) off "
            "in between (µs of the tracer's clock; with -icount shift=0, thousands of guest "
            "instructions) and where it started and ended. The modes take turns, five "
            "windows each, each turn after a flip and a tracer enable and disable not "
            "counted. In the table the median window, robust to an interrupt landing in "
            "two of the windows (its handler's section, with the function tracer on, is the "
            "interrupt's, not the operation's: where the longest window's section started "
            "says which), with every window's figure and the ratio of the medians. "
            "`nothing`: the window without an operation, what the rest of the system "
            "contributes.", ""] + tables


def ratio(rows, key, value, against="c", of="rust"):
    by = {(r[key[0]], r[key[1]]): r[value] for r in rows}
    out = {}
    for (mode, n), v in by.items():
        if mode != of:
            continue
        c = by.get((against, n))
        if c and v is not None:
            out[n] = v / c
    return out


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def fmt(v, digits=1):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return f"{v:,}"


def share(v, of):
    """v / of, or None when either is missing or of is 0."""
    if v is None or not of:
        return None
    return v / of


def ftrace_report(rows):
    """The REPORT.md section of the ftrace scenario."""
    ops = [op for op in ("enable", "disable") if any(r["op"] == op for r in rows)]
    ops += sorted({r["op"] for r in rows} - set(ops))
    ratios = {k: ratio(rows, ("mode", "op"), k)
              for k in ("cost_per_op", "batch_ns_per_op", "syncs_per_op", "int3_hits_per_op",
                        "ipis_per_op", "max_batch_ns")}
    out = []
    for op in ops:
        for r in sorted((r for r in rows if r["op"] == op), key=lambda r: r["mode"]):
            out.append([r["mode"], op, r["rounds"], fmt(r["cost_per_op"], 0),
                        fmt(r["batch_ns_per_op"], 0),
                        fmt(r["syncs_per_op"], 1), fmt(r["batches_per_op"], 1),
                        fmt(r["entries_per_op"], 0), fmt(r["int3_hits_per_op"], 1),
                        fmt(r["ipis_per_op"], 1),
                        ",".join(fmt(c, 1) for c in r["cal_per_op_per_cpu"] or []),
                        fmt(r["max_batch"]), fmt(r["max_batch_ns"])])
        out.append(["rust/c", op, "", fmt(ratios["cost_per_op"].get(op), 3),
                    fmt(ratios["batch_ns_per_op"].get(op), 3),
                    fmt(ratios["syncs_per_op"].get(op), 3), "", "",
                    fmt(ratios["int3_hits_per_op"].get(op), 3),
                    fmt(ratios["ipis_per_op"].get(op), 3), "", "",
                    fmt(ratios["max_batch_ns"].get(op), 3)])
    sites = sorted({r["sites"] for r in rows})
    rounds = sorted({r["rounds"] for r in rows})
    clocks = sorted({r["clock"] for r in rows if r.get("clock")})
    return ["## ftrace: function tracer, whole kernel", "",
            f"The function tracer on every function of available_filter_functions "
            f"({', '.join(fmt(n) for n in sites)} sites), enabled (`echo function > "
            f"current_tracer`) and disabled (`echo nop`), after one enable and disable "
            f"not counted, then {' or '.join(fmt(n) for n in rounds)} times each (rounds); "
            f"figures per enable or per disable. "
            f"Cost: the guest time around the write to current_tracer "
            f"({' or '.join(clocks) or 'no'} clock, whose reads are processes of their own "
            f"and are counted in); it includes ftrace's own work and its waits for RCU grace "
            f"periods, which vary from write to write. In batches: the time spent applying "
            f"text-poke batches, the part the implementations differ in. "
            f"Counters are read just before and after the write: IPIs "
            f"received by all CPUs in that time, whatever sent them; CAL: the same for "
            f"each CPU, from /proc/interrupts.", "",
            table(["mode", "op", "rounds", "cost/op", "in batches/op", "IPI rounds/op",
                   "batches/op",
                   "entries/op", "INT3 hits/op", "IPIs received/op, all CPUs",
                   "CAL/op, each CPU", "largest batch", "longest batch"], out), "",
            "Largest batch: its sites; longest batch: the time one batch took, from its "
            "first INT3 to its last sync, the longest stretch the patching CPU spends "
            "without a point where it could reschedule between batches (the stats' maxima "
            "are reset before each write to current_tracer).", ""]


def revision_note(doc):
    """"revision R", or which revision measured which sections when they differ."""
    revs = doc.get("revisions") or {}
    if len(set(revs.values())) <= 1:
        return f"revision {doc['revision']}"
    by = {}
    for section, rev in revs.items():
        by.setdefault(rev, []).append(section)
    return "sections measured at revisions " + "; ".join(
        f"{', '.join(secs)}: {rev}" for rev, secs in by.items())


def report(doc):
    unit = "guest ns (= guest instructions, -icount shift=0)" if doc["qemu"]["icount"] \
        else "ns (wall clock, no -icount: not repeatable)"
    lines = [f"# jump_label_rs demo results",
             "",
             f"Linux {doc['kernel']}, QEMU {doc['qemu']['accel']} "
             f"{doc['qemu']['cpus']} vCPUs, icount {'on' if doc['qemu']['icount'] else 'off'}, "
             f"{revision_note(doc)}. Costs in {unit}.",
             "",
             "IPIs are IPIs received: each CPU's count of function-call IPIs (the CAL "
             "line of /proc/interrupts). Totals (IPIs received) are the kernel's sum of "
             "these counts over all CPUs, read before and after a run; per-CPU figures "
             "(CAL) are the differences of /proc/interrupts read before and after it.",
             ""]
    if not doc["complete"]:
        lines += [f"**INCOMPLETE**: {', '.join(doc['incomplete'])}", ""]
    if "flip" in doc:
        flip_ratio = ratio(doc["flip"], ("mode", "sites"), "cost_per_flip")
        min_ratio = ratio(doc["flip"], ("mode", "sites"), "cost_min")
        off = "rust, defer off"
        off_ratio = ratio(doc["flip"], ("mode", "sites"), "cost_per_flip", of=off)
        off_min_ratio = ratio(doc["flip"], ("mode", "sites"), "cost_min", of=off)
        rows = []
        for r in sorted(doc["flip"], key=lambda r: (r["sites"], r["mode"])):
            mean, low = {"rust": (flip_ratio, min_ratio),
                         off: (off_ratio, off_min_ratio)}.get(r["mode"], ({}, {}))
            rows.append([r["sites"], r["mode"], r["flips"], fmt(r["ipi_rounds_per_flip"], 2),
                         fmt(r["ipis_per_flip_per_cpu"], 2),
                         ",".join(fmt(c, 2) for c in r["cal_per_flip_per_cpu"] or []),
                         ",".join(fmt(c, 2) for c in r.get("irqs_per_flip_per_cpu") or []),
                         fmt(r.get("mm_switches_per_flip"), 1),
                         fmt(r["cost_per_flip"], 0), fmt(r["cost_min"]),
                         fmt(mean.get(r["sites"]), 3),
                         fmt(low.get(r["sites"]), 3),
                         r["wrong_sites"]])
        lines += ["## flip: one key, N sites, flipped on and off", "",
                  "IPIs received/flip per other CPU: the IPIs all CPUs received per flip, "
                  "divided by the CPUs other than the one flipping. Interrupts/flip: every "
                  "interrupt each CPU received per flip (all lines of /proc/interrupts), "
                  "the wake-ups of a CPU that is idle. The guest is idle but for the "
                  "flipping task: with `rust`, each idle CPU takes a sync round as a work "
                  "bit, run when it next leaves idle or takes an interrupt, instead of an "
                  "IPI; `rust, defer off` sends every round's IPIs, as `c`. `c` is "
                  "upstream's batch, measured with every mechanism of this project off in the "
                  "same boot: deferral of syncs to isolated and idle CPUs and of kernel TLB "
                  "flushes, whose hooks the idle CPUs its IPIs wake would otherwise run (qpw is "
                  "off in this boot). mm "
                  "switches/flip: the switches to the poking mm to write text "
                  "(`mm_switches` in `text_poke_batch/stats`): one per `text_poke()`, one per run "
                  "of pages the Rust batch maps at once.", "",
                  table(["sites", "mode", "flips", "IPI rounds/flip",
                         "IPIs received/flip per other CPU", "CAL/flip, each CPU",
                         "interrupts/flip, each CPU", "mm switches/flip",
                         "cost/flip (mean)", "cost/flip (min)",
                         "rust/c (mean)", "rust/c (min)", "wrong sites"], rows), ""]
    if doc.get("upstream_key"):
        up = doc["upstream_key"]
        c = {r["sites"]: r for r in up if r["mode"] == "c"}
        rows = []
        for r in sorted(up, key=lambda r: r["mode"]):
            base = c.get(r["sites"]) if r["mode"] == "rust" else None
            rows.append([r["key"], r["sites"], r.get("pages"), r["mode"], r["flips"],
                         fmt(r["ipi_rounds_per_flip"], 2),
                         fmt(r.get("mm_switches_per_flip"), 1),
                         fmt(r["cost_per_flip"], 0), fmt(r["cost_min"]),
                         fmt(r["cost_per_flip"] / base["cost_per_flip"], 3) if base else "",
                         fmt(r["cost_min"] / base["cost_min"], 3) if base else "",
                         r["wrong_sites"]])
        lines += ["## flip of an upstream key", "",
                  "The `write_msr` tracepoint's key, whose sites are inlined wherever the "
                  "kernel writes an MSR, spread over many pages of text: flipped with "
                  "`static_key_enable()`/`static_key_disable()` and no probe attached, and "
                  "checked after every flip by reading every site's bytes. c applies at most "
                  "256 sites a batch.", "",
                  table(["key", "sites", "pages", "mode", "flips", "IPI rounds/flip",
                         "mm switches/flip", "cost/flip (mean)", "cost/flip (min)",
                         "rust/c (mean)", "rust/c (min)", "wrong sites"], rows), ""]
    if "lookup" in doc:
        lk_ratio = ratio(doc["lookup"], ("impl", "entries"), "cost")
        rows = []
        for r in sorted(doc["lookup"], key=lambda r: (r["entries"], r["impl"])):
            rows.append([r["entries"], r["impl"], r["hits"], fmt(r.get("hit_cost")),
                         fmt(r.get("plain_cost")), fmt(r["cost"]),
                         fmt(lk_ratio.get(r["entries"]), 3) if r["impl"] == "rust" else "",
                         f"{fmt(r.get('hit_min'))} / {fmt(r.get('plain_min'))}",
                         fmt(r.get("slow_runs"))])
        lines += ["## lookup: a site run during a flip of N sites, INT3 hit vs plain run", "",
                  "c applies at most 256 sites a batch, so at 1024 sites it searches "
                  "256 entries where rust searches 1024. Costs are medians of up to 1024 "
                  "runs of each kind; a run during which another vCPU had its turn "
                  "(single-threaded TCG, whose instructions the clock counts) takes "
                  "thousands of instructions more, and the slow runs (over four times their "
                  "kind's median) are counted. Means are not quoted: one such run among "
                  "the plain ones moves a mean past the hits' (demo.json keeps them, "
                  "`cost_of_means`).", "",
                  table(["entries", "impl", "INT3 hits", "cost with hit (median)",
                         "cost plain (median)", "INT3 path cost", "rust/c",
                         "min with hit / plain", "slow runs"], rows), ""]
    if "txn" in doc:
        by = {(r["mode"], r["way"]): r for r in doc["txn"]}
        rows = []
        for mode in sorted({r["mode"] for r in doc["txn"]}):
            one, txn = by.get((mode, "one_by_one")), by.get((mode, "transaction"))
            if one is None or txn is None:
                continue
            rows.append([mode, one["flips"],
                         fmt(one["ipi_rounds"], 1), fmt(txn["ipi_rounds"], 1),
                         fmt(one["ipis"], 1), fmt(txn["ipis"], 1),
                         fmt(one["cost"], 0), fmt(txn["cost"], 0),
                         fmt(share(txn["ipi_rounds"], one["ipi_rounds"]), 3),
                         fmt(share(txn["ipis"], one["ipis"]), 3),
                         fmt(share(txn["cost"], one["cost"]), 3),
                         one["wrong_sites"]])
        lines += ["## txn: 8 keys x 64 sites enabled (or disabled) together", "",
                  "Each flip enables or disables all 8 keys (512 sites), one key after "
                  "the other, then as one transaction; figures per flip of all 8, IPIs "
                  "received by all CPUs.", "",
                  "Both ways take the same count steps (`static_key_begin()` and "
                  "`static_key_end()`) and check every site of a key before they write "
                  "any of it: one by one, each key's sites are written with a batch of "
                  "their own in `rust`; the transaction checks every key first and writes "
                  "all 512 sites with one batch; `c` goes key by key through upstream's "
                  "update either way.", "",
                  table(["mode", "flips", "IPI rounds: one by one", "IPI rounds: transaction",
                         "IPIs received: one by one", "IPIs received: transaction",
                         "cost: one by one", "cost: transaction",
                         "transaction/one by one: IPI rounds", "transaction/one by one: IPIs",
                         "transaction/one by one: cost", "wrong sites (both ways)"], rows), ""]
    if "ftrace" in doc:
        lines += ftrace_report(doc["ftrace"])
    if "irqsoff" in doc:
        lines += irqsoff_report(doc["irqsoff"])
    if "isolation" in doc:
        iso = doc["isolation"]
        rows = [[r["sites"], r["mode"], r["defer"], r["flips"], fmt(r["ipi_rounds_per_flip"], 2),
                 fmt(r["cal_per_flip_isolated"], 2), fmt(r.get("tlb_per_flip_isolated"), 2),
                 ",".join(fmt(c, 2) for c in r["cal_per_flip_per_cpu"] or []),
                 fmt(r.get("cost_per_flip_min")), fmt(r.get("vs_c_min"), 3)]
                for r in sorted(iso["rows"], key=lambda r: (r["sites"], r["mode"], r["defer"]))]
        user = iso.get("user_share_per_cpu") or {}
        shares = "; ".join(f"deferral {k}: " + ", ".join(fmt(u, 3) for u in v)
                           for k, v in sorted(user.items()))
        lines += ["## isolation: flips while isolated CPUs run user space", "",
                  f"4 vCPUs booted with `{iso['boot']}`; a user-space busy loop pinned on "
                  f"each of CPUs {', '.join(map(str, ISOLATED))}; the keys flipped from CPU "
                  f"{FLIPPER}, with `text_poke_batch=c` (upstream's batch, which always interrupts) "
                  f"and `text_poke_batch=rust` with deferral (`context_tracking_work/sync_core`) off and on. IPIs: "
                  f"each CPU's CAL count in /proc/interrupts. Share of each CPU's time in user "
                  f"space during the flips: {shares or '-'}. Cost: guest instructions per "
                  f"flip under `-icount shift=0`, the cheapest flip of the row, and against "
                  f"`c` at the same size.", "",
                  table(["sites", "mode", "deferral", "flips", "IPI rounds/flip",
                         "CAL/flip per isolated CPU", "TLB/flip per isolated CPU",
                         "CAL/flip, each CPU", "cost/flip (min)", "rust/c (min)"], rows), ""]
    if doc.get("isolation", {}).get("tlb"):
        rows = [[r["defer_tlb"], r["pairs"], ",".join(map(str, r["cal"] or [])),
                 ",".join(map(str, r["tlb"] or [])), fmt(r.get("flushes_deferred"), 0),
                 fmt(r["storm_cost_per_pair"], 1)]
                for r in doc["isolation"]["tlb"]]
        lines += ["## isolation: kernel TLB flushes while isolated CPUs run user space", "",
                  "1000 vmalloc()/vfree() pairs of 16 pages on a housekeeping CPU, "
                  "`vm_unmap_aliases()` every 64 (lazy purges: `flush_tlb_kernel_range_deferrable()`), "
                  "while user-space loops run on CPUs 2 and 3, kernel TLB flush deferral "
                  "(`context_tracking_work/tlb_flush`) off and on, same boot. x86 sends a kernel range "
                  "flush as a function call: it shows in CAL, not in TLB (which counts user "
                  "address-space shootdowns). Flushes deferred: the `tlb_deferred` count of "
                  "`context_tracking_work/stats` (one per isolated CPU per flush). Storm cost: guest "
                  "instructions under `-icount` from the storm's start to its end, divided by "
                  "the pairs; single-threaded TCG runs the vCPUs in turn, so the figure "
                  "includes the user-space loops' share of the guest's time, the same with "
                  "deferral off and on, and with it off the flushes the isolated CPUs run.", "",
                  table(["deferral", "pairs", "CAL on CPUs 2,3", "TLB on CPUs 2,3",
                         "flushes deferred", "storm cost per pair (instructions)"], rows), ""]
    if doc.get("qpw"):
        rows = [[r.get("kernel", "demo"), r["qpw"], r["calls"], fmt(r["local_lock_instr"], 2),
                 fmt(r["qpw_lock_instr"], 2), fmt(r["extra_instr"], 2), r.get("drains", "-"),
                 fmt(r["irq_per_drain"], 2) if "irq_per_drain" in r else "-",
                 fmt(r["kworker_per_drain"], 2) if "kworker_per_drain" in r else "-"]
                for r in doc["qpw"]]
        lines += ["## qpw: per-CPU locks another CPU can take", "",
                  "Two boots of the same image, CPUs 2-3 isolated (`nohz_full=2-3 "
                  "isolcpus=2-3`), `qpw=0` and `qpw=1`. Lock cost: guest instructions per "
                  "lock-unlock pair under `-icount shift=0`, 100,000 pairs with interrupts off, "
                  "each variant a function the loop calls, minus an empty call's cost: "
                  "`local_lock`, and the qpw lock of <linux/qpw.h> in the boot's mode, in the "
                  "same boot. Off, a qpw lock is preempt_disable() behind a static branch; on, "
                  "it is this CPU's spinlock, with preemption off. Kernel `pvspin` is that "
                  "configuration less what only tests need, without ACPI and with "
                  "`CONFIG_PARAVIRT_SPINLOCKS` (as distributions build; "
                  "`scripts/kunitconfig/pvspin`), "
                  "booted twice more for the lock cost alone. Drains: "
                  "`lru_add_drain_all()` 100 times, a millisecond apart, from a housekeeping CPU "
                  "while a task on each "
                  "isolated CPU writes to new pages (which wait in its CPU's LRU batch) between "
                  "user-space spins; interrupts (RES + CAL) and kworker context switches per "
                  "drain per isolated CPU.", "",
                  table(["kernel", "qpw", "pairs", "local_lock", "qpw lock", "extra", "drains",
                         "interrupts per drain", "kworker runs per drain"], rows), ""]
        nrows = []
        for r in doc["qpw"]:
            o, t = r.get("osnoise"), r.get("timerlat")
            if not o or not t:
                continue
            nrows.append([r["qpw"], fmt(o["noise_ns"] / 1000, 1), fmt(o["max_noise_ns"] / 1000, 1),
                          o["irq_n"], o["softirq_n"], o["thread_n"], o["nmi_n"],
                          " / ".join(fmt(x / 1000, 1) for x in o["stall_ns"]),
                          " / ".join(fmt(x / 1000, 2) for x in o["mean_ns"]),
                          t["irq_n"], fmt(t["thread_max_ns"] / 1000, 1) if t["thread_n"] else "-",
                          " / ".join(fmt(x / 1000, 1) for x in t["stall_ns"])])
        if nrows:
            lines += ["What the isolated CPUs' tasks see during the same 100 drains, run again "
                      "twice in each boot. With the `osnoise` tracer (its own workload off: the "
                      "refilling tasks are the workload): the noise events of CPUs 2-3 "
                      "together, every interrupt, softirq, NMI and other task (a kworker) that "
                      "ran there, their total and the longest single one; and each task's "
                      "longest and mean page-fault write (timed with `clock_gettime()` around "
                      "it): with `qpw=1` a write can wait for a drain that holds its CPU's lock. "
                      "With the `timerlat` tracer (a thread on each of CPUs 2-3 woken every "
                      "millisecond): its samples and longest thread wake-up latency, and the "
                      "tasks' longest write again. Under TCG with `-icount` the guest's timers "
                      "do not keep real time (the clock jumps over idle time), so timerlat's "
                      "latencies here are not what an RT system would see: kept to show that, "
                      "not as a figure. Microseconds of guest time under `-icount shift=0` (an "
                      "instruction a nanosecond).", "",
                      table(["qpw", "noise (µs)", "max noise (µs)", "IRQ", "softirq", "thread",
                             "NMI", "longest write, CPU 2 / 3 (µs)", "mean write (µs)",
                             "timerlat samples", "timerlat max thread (µs)",
                             "longest write under timerlat (µs)"], nrows), ""]
        mrows = []
        for r in doc["qpw"]:
            m = r.get("mlocked") or {}
            o = m.get("osnoise")
            if "drains" not in m or not o:
                continue
            mrows.append([r["qpw"], m["drains"], fmt(m["irq_per_drain"], 2),
                          fmt(m["kworker_per_drain"], 2), fmt(o["noise_ns"] / 1000, 1),
                          fmt(o["max_noise_ns"] / 1000, 1), o["irq_n"], o["thread_n"],
                          " / ".join(fmt(x / 1000, 1) for x in o["stall_ns"])])
        if mrows:
            lines += ["The same drains with the tasks' memory locked, as a real-time task locks "
                      "it (`mlockall(MCL_CURRENT | MCL_FUTURE)`, with `MCL_ONFAULT`): their new "
                      "pages wait in their CPUs' mlock batches, which `lru_add_drain_all()` "
                      "drains from the calling CPU with `qpw=1` (hook patch 0008a); locked pages "
                      "cannot be dropped, so a task writes to a new mapping every 16 pages. "
                      "Interrupts and kworker runs per drain per isolated CPU, then what the "
                      "`osnoise` tracer sees during the drains run again.", "",
                      table(["qpw", "drains", "interrupts per drain", "kworker runs per drain",
                             "noise (µs)", "max noise (µs)", "IRQ", "thread",
                             "longest write, CPU 2 / 3 (µs)"], mrows), ""]
    nrows = noise_table(doc)
    if nrows:
        rows = [[storm, config, fmt(r["window_ns"] / 1e6, 2) if r.get("window_ns") else "-",
                 fmt(r["noise_ns"] / 1000, 1), fmt(r["max_noise_ns"] / 1000, 1),
                 fmt(100 * r["noise_share"], 3) if r.get("noise_share") is not None else "-",
                 r["irq_n"], r.get("cal_n", "-"), fmt(r.get("cal_isolated"), 0),
                 r["softirq_n"], r["thread_n"], r["nmi_n"]]
                for storm, config, r in nrows]
        lines += ["## noise: what the osnoise tracer sees on isolated CPUs", "",
                  "The kernel's `osnoise` tracer, as `rtla osnoise` reads it, on CPUs 2-3 "
                  "(isolation's boot: `nohz_full=2-3 isolcpus=2-3 rcu_nocbs=2-3`), its own "
                  "workload off (option `NO_OSNOISE_WORKLOAD`): the tasks there are the "
                  "workload, and every interrupt, softirq, NMI and other task that runs there "
                  "is a noise event with its duration (`osnoise:*_noise`), read from the trace "
                  "buffer for the storm's window only. Storms: 40 flips of a 56-site key and "
                  "one enable and disable of the function tracer on the whole kernel (in a "
                  "tracing instance) from CPU 0, with `text_poke_batch=c` and `text_poke_batch=rust` with "
                  "deferral off and on; 1000 vmalloc()/vfree() pairs on CPU 0 with kernel TLB "
                  "flush deferral off and on; the tasks there: a user-space busy loop on each "
                  "CPU, which never enters the kernel. Drains: the qpw boots' 100 "
                  "`lru_add_drain_all()`, whose tasks on CPUs 2-3 refill their LRU batches "
                  "(see qpw; no window recorded). Noise: the total of CPUs 2-3 and the longest "
                  "single event, in µs of guest time under `-icount shift=0`; share: of the "
                  "two CPUs' time in the window (rtla's 100 - %CPU Aval: a faster storm packs "
                  "the same noise in less time); counts: IRQ noise events, of which "
                  "function-call IPIs (CAL; and the CAL count of /proc/interrupts on CPUs 2-3 "
                  "over the storm, the tracer's check), softirq, thread (another task) and NMI. "
                  "An IRQ's noise starts at its vector's trace event, after the entry code, "
                  "where a CPU runs deferred work: that work is counted by the deferral's own "
                  "figures (isolation, entry). What is left with deferral on is not text "
                  "poking's: ftrace's core sends IPIs of its own "
                  "(`smp_call_function(ftrace_sync_ipi)`).", "",
                  table(["storm", "configuration", "window (ms)", "noise (µs)",
                         "max noise (µs)", "noise share (%)", "IRQ", "of which CAL",
                         "CAL, /proc/interrupts", "softirq", "thread", "NMI"], rows), ""]
    if doc.get("branch"):
        rows = [[r["variant"], r["calls"], fmt(r["instr_per_call"], 2), fmt(r["over_no_check"], 2)]
                for r in doc["branch"]]
        lines += ["## branch: the fast path of a branch", "",
                  "Guest instructions per call under `-icount shift=0` (1 ns = 1 instruction) of "
                  "a small function (`x + 1` with the key disabled, `3 * x` enabled), called "
                  "100,000 times by a C loop with interrupts off, the best of three runs, same "
                  "boot; `over no check` is what the check adds. What `-icount` cannot show: it "
                  "counts instructions, not cycles, so a NOP and a load cost one each here, "
                  "while on hardware the load can miss the cache and a conditional branch can "
                  "be mispredicted, and a taken JMP costs a fetch redirect; the layout check of "
                  "`make test` (the hot path falls through a NOP, with no load of the key) "
                  "stands in for those.", "",
                  table(["variant", "calls", "instructions per call", "over no check"], rows), ""]
    if doc.get("pipe"):
        p = doc["pipe"]
        rows = [[r["variant"], r["rounds"], fmt(r["instr_per_round_trip"], 1),
                 ", ".join(fmt(x, 1) for x in r["runs"])] for r in p["pingpong"]]
        lines += ["## pipe: seed 004's pipe ping-pong", "",
                  "Two tasks pinned to CPU 1 pass a byte back and forth through two pipes "
                  "(`perf bench sched pipe`, as seed 004 measured it; two context switches per "
                  "round trip), guest instructions per round trip under `-icount shift=0`, the "
                  "median of three runs, with the scheduler's `sched_schedstats` key off (its "
                  "sites are NOPs, the statistics code out of line) and on (the sites jump to "
                  "it), same boot. What off saves is the statistics work the key guards plus "
                  "the test a flag would cost; seed 004's own comparison (`CONFIG_JUMP_LABEL=n`, "
                  "a load and a conditional branch at every site) needs another kernel, and the "
                  "`branch` section measures that difference for one site.", "",
                  table(["variant", "round trips", "instructions per round trip", "runs"], rows),
                  ""]
        rows = [[f["mode"], f["flips"],
                 fmt(f["sites_per_flip"], 1) if f["sites_per_flip"] is not None else "",
                 fmt(f["sync_rounds_per_flip"], 2) if f["sync_rounds_per_flip"] is not None
                 else "",
                 ", ".join(fmt(c, 2) for c in f["cal_per_flip_per_cpu"])
                 if f["cal_per_flip_per_cpu"] else ""] for f in p["flip"]]
        lines += ["`sched_schedstats`, seed 000's example key, enabled and disabled 10 times "
                  "from CPU 0 through `/proc/sys/kernel/sched_schedstats`, per flip: sites "
                  "written and sync rounds as the Rust batch counts them, and the function-call "
                  "IPIs (CAL) each CPU received (CPU 0 flips; a `sh` forked for the loop adds "
                  "its own).", "",
                  table(["mode", "flips", "sites per flip", "sync rounds per flip",
                         "CAL per flip, CPUs 0-3"], rows), ""]
    if doc.get("entry"):
        rows = [[r["variant"], r["calls"], fmt(r["instr_per_call"], 1),
                 f"{r['over_off'] * 100:+.1f}%" if "over_off" in r else ""]
                for r in doc["entry"]]
        lines += ["## entry: kernel-entry cost on an isolated CPU", "",
                  "Guest instructions per call under `-icount shift=0` (1 ns = 1 instruction). "
                  "getpid(): a user-space loop of 20,000 calls on isolated CPU 2, median of "
                  "3 runs per setting, same boot: what deferral adds to every entry and exit "
                  "(a load of the switch at exit and an atomic exchange of the word at entry, "
                  "where off pays a load). hook: the entry hook alone, run 20,000 times on "
                  "housekeeping CPU 0 with interrupts off, for each state of the word an entry "
                  "can find; with a sync pending it runs `sync_core()`, with a TLB flush pending "
                  "the full flush: what a storm of flips or of vfree()s can add to an entry "
                  "at worst; the derived getpid() rows add that to the loop's figure with "
                  "deferral on, the cost of an entry when every entry finds work pending. "
                  "An instruction count does not "
                  "show what an atomic exchange or a serialising instruction costs in cycles "
                  "on hardware (some tens of cycles each).", "",
                  table(["variant", "calls (runs for getpid)", "instructions per call",
                         "over getpid(), deferral off"], rows),
                  ""]
    if doc.get("hooks"):
        h = doc["hooks"]
        rows = [[r["variant"], r["what"], fmt(r["ticks_min"], 2), fmt(r["ticks_median"], 2),
                 fmt(r["ns_min"], 2)] for r in h["rows"]]
        added = h.get("deferral_adds") or {}
        lines += ["## hooks: idle deferral's hooks in real cycles on the host CPU", "",
                  f"`-icount` counts a locked instruction as one, as it counts a `mov`; here "
                  f"the hooks run on the host ({h['cpu']}, TSC {h['tsc_mhz']} MHz), built from "
                  f"the protocol's own functions (`kernel/context_tracking_work/ct_work.rs`, "
                  f"whose C twins in `include/linux/context_tracking_work.h` make the same loads, stores "
                  f"and locked instructions) by `tests/host/src/bin/hook_cycles.rs`: each "
                  f"variant is a loop of one idle round trip (idle entry, then idle exit) or "
                  f"of one interrupt in idle, with context tracking's own two "
                  f"`ct_state_inc()` in every loop but the first. TSC ticks per round trip, "
                  f"the cheapest and the median of {h['samples']} samples of "
                  f"{fmt(h['iterations'])} round trips each.", "",
                  table(["variant", "what", "ticks, cheapest", "ticks, median", "ns, cheapest"],
                        rows), ""]
        if added:
            text = "; ".join(f"{k}: +{fmt(a['ticks'], 2)} ticks ({fmt(a['ns'], 2)} ns)"
                             for k, a in added.items())
            ct = h.get("ct_state_inc_pair") or {}
            exit_ = ""
            if h.get("idle_exit_us") and "idle" in added:
                exit_ = (f" This machine's cpuidle driver gives its shallowest halting state "
                         f"(`{h['idle_state']}`) an exit latency of {h['idle_exit_us']} µs, of "
                         f"which idle deferral's hooks are "
                         f"{added['idle']['ns'] / (h['idle_exit_us'] * 10):.2f}%.")
            lines += [f"What deferral on adds over off, cheapest samples: {text}; context "
                      f"tracking's own pair of `ct_state_inc()` costs {fmt(ct.get('ticks'), 2)} "
                      f"ticks.{exit_} Idle deferral is on by default: its hooks run while "
                      f"sync deferral is on (`context_tracking_work.sync_core=`; an idle CPU takes no kernel TLB "
                      f"flush), and it stays on by default while what it adds is under 1% of an "
                      f"idle exit.", ""]
    if "scale" in doc:
        rows = [[r["cpus"], r["mode"], r["flips"], fmt(r["ipi_rounds_per_flip"], 1),
                 fmt(r["ipis_per_flip"], 1), fmt(r["cal_per_flip"], 1)]
                for r in sorted(doc["scale"], key=lambda r: (r["cpus"], r["mode"]))]
        lines += ["## scale: a 56-site key flipped on 2 to 16 vCPUs", "",
                  table(["vCPUs", "mode", "flips", "IPI rounds/flip",
                         "IPIs received/flip, all CPUs (kernel sum)",
                         "CAL/flip, all CPUs (/proc/interrupts)"], rows), ""]
    if doc.get("percpu"):
        rows = [[r["cpus"], "on" if r["qpw"] else "off", r["calls"],
                 f"{r['alone_ns_min']}-{r['alone_ns_max']} ({r['cpus_measured']} CPUs)",
                 f"{r['busy_ns_min']}-{r['busy_ns_max']}", "yes" if r["held"] else "no"]
                for r in doc["percpu"]]
        lines += ["## percpu: a Rust per-CPU lock's fast path on 2 to 16 vCPUs", "",
                  "In each scale boot: `PerCpu::local()`, an increment of the CPU's counter and "
                  "the guard's drop, called on every online CPU in turn, the best of three runs "
                  "per CPU, in guest ns (instructions) per call, the least and the most over "
                  "the CPUs; then again on every CPU but one, while a task on that one holds its "
                  "own CPU's counter through `PerCpu::with_cpu()`, spinning under the hold until "
                  "the runs are over, so that a remote hold is in flight throughout. Whether a task holds a CPU's data is two loads of "
                  "its own CPU's slot, however many CPUs there are: the figures stay flat in the "
                  "vCPU count. Single-threaded TCG runs the holding task in turn with the "
                  "measured CPU, and the guest clock counts both; its wait is a pause loop, "
                  "which hands the turn on at once, so it adds next to nothing. TCG models no cache, so what a "
                  "shared cache line would cost on a large host is not measured here.", "",
                  table(["vCPUs", "qpw", "calls per run", "ns/call alone, least-most",
                         "ns/call, a hold in flight, least-most",
                         "held throughout"], rows), ""]
    return "\n".join(lines)


def plots(doc, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ["matplotlib missing: no plots"]
    made = []

    def curve(rows, key, x, y, ylabel, title, name, logy=False):
        fig, ax = plt.subplots(figsize=(6, 4))
        for mode in sorted({r[key] for r in rows}):
            pts = sorted((r[x], r[y]) for r in rows if r[key] == mode and r[y] is not None)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=mode)
        ax.set_xscale("log", base=2)
        xs = sorted({r[x] for r in rows})
        ax.set_xticks(xs, [str(v) for v in xs])
        ax.minorticks_off()
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel("sites" if x == "sites" else "sites flipped (c applies at most 256 a batch)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out, name), dpi=100)
        plt.close(fig)
        made.append(name)

    if doc.get("flip"):
        curve(doc["flip"], "mode", "sites", "ipi_rounds_per_flip", "IPI rounds per flip",
              "IPI rounds per key flip", "flip-ipis.png", logy=True)
        curve(doc["flip"], "mode", "sites", "cost_per_flip", f"cost per flip ({doc['flip'][0]['unit']})",
              "Key flip cost", "flip-cost.png", logy=True)
    if doc.get("scale"):
        fig, ax = plt.subplots(figsize=(6, 4))
        for mode in sorted({r["mode"] for r in doc["scale"]}):
            pts = sorted((r["cpus"], r["ipis_per_flip"]) for r in doc["scale"] if r["mode"] == mode)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=mode)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        xs = sorted({r["cpus"] for r in doc["scale"]})
        ax.set_xticks(xs, [str(v) for v in xs])
        ax.minorticks_off()
        ax.set_xlabel("vCPUs")
        ax.set_ylabel("IPIs per flip")
        ax.set_title("IPIs per flip of a 56-site key")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out, "scale-ipis.png"), dpi=100)
        plt.close(fig)
        made.append("scale-ipis.png")
    nrows = noise_table(doc)
    if nrows:
        fig, ax = plt.subplots(figsize=(7, 0.45 * len(nrows) + 1.2))
        labels = [f"{storm}: {config}" for storm, config, _ in nrows]
        values = [max(r["noise_ns"] / 1000, 0.1) for _, _, r in nrows]
        on = [config.endswith(" on") for _, config, _ in nrows]
        ys = list(range(len(nrows)))[::-1]
        ax.barh(ys, values, color=["tab:green" if o else "tab:red" for o in on])
        ax.set_yticks(ys, labels)
        ax.set_xscale("log")
        ax.set_xlabel("osnoise total on CPUs 2-3 (µs of guest time; none drawn at 0.1)")
        ax.set_title("Noise isolated CPUs see per storm (red: mechanism off or c)")
        ax.grid(True, axis="x", which="both", alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "noise.png"), dpi=100)
        plt.close(fig)
        made.append("noise.png")
    if doc.get("lookup"):
        curve(doc["lookup"], "impl", "entries", "cost", f"INT3 path cost ({doc['lookup'][0]['unit']})",
              "Cost of an INT3 hit during a flip", "lookup-cost.png")
    return made


# The sections of demo.json, in order.
SECTIONS = ("flip", "upstream_key", "lookup", "txn", "ftrace", "irqsoff", "scale", "percpu",
            "isolation", "entry", "hooks", "noise", "qpw", "branch", "pipe")


README_BEGIN = "<!-- results: generated by scripts/demo/results.py from results/demo.json -->"
README_END = "<!-- results: end -->"


def _rows(doc, section, **match):
    return [r for r in doc.get(section) or []
            if all(r.get(k) == v for k, v in match.items())]


def _one(doc, section, **match):
    rows = _rows(doc, section, **match)
    return rows[0] if rows else None


def _ratios(doc, section, key, value, sizes):
    """'r1 / r2 / ...' of rust over c at each of sizes, and the sizes found."""
    by = ratio(doc.get(section) or [], ("mode" if section != "lookup" else "impl", key), value)
    found = [n for n in sizes if n in by]
    return " / ".join(fmt(by[n], 3 if section != "lookup" else 2) for n in found), found


def headline(doc):
    """The README's results table, between its markers."""
    return [README_BEGIN, table(["what", "figure", "measured at"], headline_rows(doc)),
            README_END]


def headline_rows(doc):
    """The README's results rows: a row per headline figure, each figure taken from doc,
    each row naming the revision that measured it. Missing sections are left out."""
    revs = doc.get("revisions") or {}
    out = []

    def row(section, what, figure):
        out.append([what, figure, revs.get(section, doc.get("revision", "?"))])

    sizes = sorted({r["sites"] for r in _rows(doc, "flip", mode="rust")})
    if sizes:
        rounds = {m: [_one(doc, "flip", mode=m, sites=n) for n in sizes]
                  for m in ("rust", "c", "serial")}
        text = "; ".join(f"`{m}` " + " / ".join(fmt(r["ipi_rounds_per_flip"], 0) if r else "-"
                                               for r in rs)
                         for m, rs in rounds.items())
        row("flip", f"sync rounds (IPI rounds) per key flip, {' / '.join(map(str, sizes))} sites",
            text)
        costs, found = _ratios(doc, "flip", "sites", "cost_min", sizes)
        off = _one(doc, "flip", mode="rust, defer off", sites=1)
        c1 = _one(doc, "flip", mode="c", sites=1)
        extra = ""
        if off and c1:
            extra = (f"; at one site with deferral off (the same three rounds as `c`) "
                     f"{fmt(off['cost_min'] / c1['cost_min'], 3)}")
        row("flip", f"cost of a key flip, `rust` / `c` (guest instructions, cheapest flip), "
            f"{' / '.join(map(str, found))} sites", costs + extra)
    entries = sorted({r["entries"] for r in _rows(doc, "lookup", impl="rust")})
    if entries:
        costs, found = _ratios(doc, "lookup", "entries", "cost", entries)
        row("lookup", f"INT3 hit during a batch (trap, lookup, emulation), `rust` / `c`, "
            f"medians, {' / '.join(map(str, found))} sites", costs)
    rust, c = _one(doc, "upstream_key", mode="rust"), _one(doc, "upstream_key", mode="c")
    if rust and c:
        row("upstream_key", f"upstream's `{rust['key']}` key, {fmt(rust['sites'])} sites on "
            f"{rust['pages']} pages", f"`rust` / `c` {fmt(rust['cost_min'] / c['cost_min'], 3)}; "
            f"{fmt(rust['ipi_rounds_per_flip'], 0)} sync rounds against "
            f"{fmt(c['ipi_rounds_per_flip'], 0)}")
    one = _one(doc, "txn", mode="rust", way="one_by_one")
    txn = _one(doc, "txn", mode="rust", way="transaction")
    if one and txn:
        row("txn", f"{txn['keys']} keys of {txn['sites_per_key']} sites as one `Transaction`",
            f"{fmt(txn['ipi_rounds'], 0)} sync rounds against {fmt(one['ipi_rounds'], 0)} one by "
            f"one; {fmt(txn['cost'] / one['cost'], 3)} of their cost")
    rust, c = _one(doc, "ftrace", mode="rust", op="enable"), _one(doc, "ftrace", mode="c",
                                                                  op="enable")
    if rust and c:
        row("ftrace", f"function tracer enabled on {fmt(rust['sites'])} sites",
            f"time in batches `rust` / `c` {fmt(rust['batch_ns_per_op'] / c['batch_ns_per_op'], 3)}; "
            f"IPIs received {fmt(rust['ipis_per_op'], 0)} against {fmt(c['ipis_per_op'], 0)}")
    iso = (doc.get("isolation") or {}).get("rows") or []
    on = [r["cal_per_flip_isolated"] for r in iso if r["mode"] == "rust" and r["defer"] == "on"]
    cc = [r["cal_per_flip_isolated"] for r in iso if r["mode"] == "c"]
    tlb = {r["defer_tlb"]: r for r in (doc.get("isolation") or {}).get("tlb") or []}
    if on and cc:
        text = (f"per key flip, up to {fmt(max(r['sites'] for r in iso), 0)} sites: "
                f"{fmt(max(on), 2)} with deferral, {fmt(min(cc), 2)} with `c`")
        if "on" in tlb and "off" in tlb and tlb["on"]["cal"] and tlb["off"]["cal"]:
            text += (f"; per {fmt(tlb['on']['pairs'])} `vmalloc()`/`vfree()` pairs: "
                     f"{fmt(max(tlb['on']['cal']))} with deferral, "
                     f"{fmt(max(tlb['off']['cal']))} without")
        row("isolation", "function-call IPIs per isolated CPU running user space", text)
    # What deferral costs where it does not defer: one row, kernel entry and idle.
    cost = []
    off = _one(doc, "entry", variant="getpid() on CPU 2, deferral off")
    on = _one(doc, "entry", variant="getpid() on CPU 2, deferral on")
    if off and on:
        cost.append(("entry", f"a kernel entry on an isolated CPU (`getpid()`, guest instructions) "
                     f"{fmt(on['instr_per_call'])} with deferral against "
                     f"{fmt(off['instr_per_call'])} without "
                     f"({on['instr_per_call'] / off['instr_per_call'] - 1:+.1%})"))
    hooks = doc.get("hooks") or {}
    added, ct = hooks.get("deferral_adds") or {}, hooks.get("ct_state_inc_pair")
    if "idle" in added and "irq" in added and ct:
        share = ""
        if hooks.get("idle_exit_us"):
            share = (f", {added['idle']['ns'] / (hooks['idle_exit_us'] * 10):.1f}% of the "
                     f"{hooks['idle_exit_us']} µs exit of the host's `{hooks['idle_state']}` state")
        cost.append(("hooks", f"an idle round trip (host CPU, TSC ticks, cheapest of the samples) "
                     f"+{fmt(added['idle']['ticks'])} ({fmt(added['idle']['ns'], 1)} ns), an "
                     f"interrupt in idle +{fmt(added['irq']['ticks'])}, beside context tracking's "
                     f"own {fmt(ct['ticks'])}{share}"))
    if cost:
        out.append(["what deferral adds to kernel entry and to idle", "; ".join(t for _, t in cost),
                    " / ".join(dict.fromkeys(revs.get(s, doc.get("revision", "?"))
                                             for s, _ in cost))])
    q0, q1 = _one(doc, "qpw", kernel="demo", qpw="off"), _one(doc, "qpw", kernel="demo", qpw="on")
    if q0 and q1 and q0.get("drains") is not None:
        m0, m1 = q0.get("mlocked") or {}, q1.get("mlocked") or {}
        locked = ""
        if "cal_per_drain" in m0 and "cal_per_drain" in m1:
            locked = (f"; with the tasks' memory locked {fmt(m0['cal_per_drain'], 2)} and "
                      f"{fmt(m1['cal_per_drain'], 2)} IPIs")
        row("qpw", f"remote LRU drains, per drain, on an isolated CPU ({q0['drains']} drains)",
            f"`qpw=0`: {fmt(q0['cal_per_drain'], 2)} IPIs, {fmt(q0['kworker_per_drain'], 2)} "
            f"kworker runs; `qpw=1`: {fmt(q1['cal_per_drain'], 2)} and "
            f"{fmt(q1['kworker_per_drain'], 2)}{locked}; its lock's fast path "
            f"+{fmt(q1['extra_instr'], 0)} instructions over `local_lock`")
    none = _one(doc, "branch", variant="no check")
    rs = [r for r in _rows(doc, "branch") if r["variant"].startswith("Rust static_branch")]
    cs = [r for r in _rows(doc, "branch") if r["variant"].startswith("C static_branch")]
    if none and rs and cs:
        row("branch", "a static branch's fast path (guest instructions per call)",
            f"Rust site {fmt(max(r['instr_per_call'] for r in rs), 0)}, C site "
            f"{fmt(max(r['instr_per_call'] for r in cs), 0)}, no check "
            f"{fmt(none['instr_per_call'], 0)}")
    return out


COVER_BEGIN = "Measured by make demo"
# The rows of headline_rows() each series' cover letter quotes, by the
# start of their text: the Rust static keys' series', the deferral and
# qpw series', and all the others for the text-poke batch's.
COVER_KEYS_ROWS = ("a static branch's fast path",)
COVER_DEFER_ROWS = ("function-call IPIs per isolated CPU", "what deferral adds",
                    "remote LRU drains")


def cover_block(text, doc, name):
    """A cover letter's text with its figures (from the line starting with COVER_BEGIN to
    the shortlog) made from doc, or None if it has none."""
    lines = text.split("\n")
    a = next((i for i, l in enumerate(lines) if l.startswith(COVER_BEGIN)), None)
    b = next((i for i, l in enumerate(lines) if a is not None and i > a
              and re.match(r"^\S.* \(\d+\):$", l)), None)
    if b is None:
        return None
    group = ("keys" if "rust-static-keys" in name else
             "defer" if "deferral" in name else "batch")
    rows = [r for r in headline_rows(doc)
            if ("keys" if r[0].startswith(COVER_KEYS_ROWS) else
                "defer" if r[0].startswith(COVER_DEFER_ROWS) else "batch") == group]
    out = textwrap.wrap(f"{COVER_BEGIN} (results/demo.json) under QEMU's single-threaded "
                        "TCG with -icount shift=0 (a guest instruction per guest "
                        "nanosecond), the Rust and the C implementations in one boot of one "
                        "image, switched at run time:", 72) + [""]
    for what, figure, rev in rows:
        out += textwrap.wrap(f"- {what}: {figure} (at {rev})".replace("`", ""), 72,
                             subsequent_indent="  ", break_on_hyphens=False)
    return "\n".join(lines[:a] + out + [""] + lines[b:])


def readme_block(text, doc):
    """text with its generated block replaced, or None if it has no such block."""
    lines = text.split("\n")
    try:
        a = lines.index(README_BEGIN)
        b = lines.index(README_END, a)
    except ValueError:
        return None
    return "\n".join(lines[:a] + headline(doc) + lines[b + 1:])


def report_text(doc, notes):
    return report(doc) + "\n" + "".join(f"\n![{n}]({n})\n" for n in notes if n.endswith(".png"))


def figures_main(action, argv):
    """results.py check|write DEMO_JSON README.md REPORT.md [COVER_LETTER]...: whether the
    README's results table, REPORT.md and the cover letters' figures are what DEMO_JSON gives
    (check), or rewrite them (write)."""
    if len(argv) < 3:
        print("usage: results.py check|write DEMO_JSON README.md REPORT.md [COVER_LETTER]...",
              file=sys.stderr)
        return 2
    path, readme, rep, covers = argv[0], argv[1], argv[2], argv[3:]
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        with open(readme, encoding="utf-8") as f:
            text = f.read()
        with open(rep, encoding="utf-8") as f:
            old_report = f.read()
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    new = readme_block(text, doc)
    if new is None:
        print(f"error: {readme} has no results table between {README_BEGIN!r} and "
              f"{README_END!r}", file=sys.stderr)
        return 1
    notes = [n for n in re.findall(r"^!\[([^\]]+)\]\(", old_report, re.M)]
    new_report = report_text(doc, notes)
    files = [(readme, text, new), (rep, old_report, new_report)]
    for name in covers:
        try:
            with open(name, encoding="utf-8") as f:
                old = f.read()
        except OSError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        content = cover_block(old, doc, name)
        if content is None:
            print(f"error: {name} has no figures from a line starting with {COVER_BEGIN!r} "
                  "to its shortlog", file=sys.stderr)
            return 1
        files.append((name, old, content))
    if action == "write":
        for name, old, content in files:
            if old != content:
                with open(name, "w", encoding="utf-8") as f:
                    f.write(content)
        return 0
    rc = 0
    for name, old, content in files:
        if old == content:
            continue
        rc = 1
        import difflib
        diff = difflib.unified_diff(old.split("\n"), content.split("\n"), name,
                                    f"{name} from {path}", lineterm="", n=0)
        print(f"error: {name} quotes figures {path} does not give "
              f"(scripts/demo/results.py write {path} {readme} {rep} {' '.join(covers)}):",
              file=sys.stderr)
        print("\n".join(list(diff)[:40]), file=sys.stderr)
    return rc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", action="append", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--cpus", type=int, required=True)
    ap.add_argument("--revision", required=True)
    ap.add_argument("--icount", action="store_true")
    ap.add_argument("--scenario", action="append", default=[])
    ap.add_argument("--merge", metavar="DEMO_JSON",
                    help="keep the sections of this earlier demo.json that this run does not "
                         "measure (each section records the revision it was measured at)")
    args = ap.parse_args()

    results, done, errors = parse_logs(args.log)
    unit = UNIT_ICOUNT if args.icount else "wall_ns"
    doc = {"kernel": args.kernel,
           "qemu": {"accel": "tcg", "icount": args.icount, "cpus": args.cpus},
           "revision": args.revision,
           "ipi_source": "received: each CPU's function-call IPI count (CAL in "
                         "/proc/interrupts); ipis fields sum it over all CPUs, cal fields "
                         "are per CPU"}
    if "flip" in args.scenario:
        doc["flip"] = flip_rows(results, args.cpus, unit)
        pages = {(r.get("mode"), int(r.get("sites", 0))): int(r.get("pages", 0))
                 for r in results if r.get("kind") == "upstream"}
        doc["upstream_key"] = [{"key": "__tracepoint_write_msr",
                                "pages": pages.get((r["mode"], r["sites"])), **r}
                               for r in flip_rows(results, args.cpus, unit, "upstream")]
    if "lookup" in args.scenario:
        doc["lookup"] = lookup_rows(results, unit)
    if "txn" in args.scenario:
        doc["txn"] = txn_rows(results, unit)
    if "ftrace" in args.scenario:
        doc["ftrace"] = ftrace_rows(results, unit)
    if "irqsoff" in args.scenario:
        doc["irqsoff"] = irqsoff_rows(results)
    if "scale" in args.scenario:
        doc["scale"] = scale_rows(results)
        doc["percpu"] = percpu_rows(results)
    if "noise" in args.scenario:
        doc["noise"] = noise_rows(results)
    if "qpw" in args.scenario:
        doc["qpw"] = qpw_rows(results)
    if "branch" in args.scenario:
        doc["branch"] = branch_rows(results)
    if "pipe" in args.scenario:
        doc["pipe"] = pipe_rows(results)
    if "isolation" in args.scenario:
        rows, user = isolation_rows(results)
        doc["isolation"] = {"boot": "nohz_full=2-3 isolcpus=2-3 rcu_nocbs=2-3 tsc=reliable",
                            "isolated_cpus": list(ISOLATED), "flipping_cpu": FLIPPER,
                            "rows": rows, "user_share_per_cpu": user,
                            "tlb": tlb_rows(results)}
        doc["entry"] = entry_rows(results)
    if "hooks" in args.scenario:
        doc["hooks"] = hooks_section(results)
        if doc["hooks"] is None:
            del doc["hooks"]
    expected = {s for s in args.scenario if s != "scale"}
    if "scale" in args.scenario:
        expected |= {f"scale cpus={c}" for c in SCALE_CPUS}
    incomplete = sorted(s for s in expected if s not in done)
    # Which revision measured each section.
    revisions = {s: args.revision for s in args.scenario}
    if "isolation" in args.scenario:
        revisions["entry"] = args.revision
    if "flip" in args.scenario:
        revisions["upstream_key"] = args.revision
    if "scale" in args.scenario:
        revisions["percpu"] = args.revision
    if args.merge:
        try:
            with open(args.merge, encoding="utf-8") as f:
                old = json.load(f)
        except (OSError, ValueError) as e:
            print(f"error: --merge {args.merge}: {e}", file=sys.stderr)
            return 1
        if old.get("kernel") != args.kernel or old.get("qemu") != doc["qemu"]:
            print(f"error: --merge {args.merge}: measured on another kernel or QEMU setup; "
                  "run every scenario, or remove it, to start a new one", file=sys.stderr)
            return 1
        old_revisions = old.get("revisions", {})
        for section in SECTIONS:
            if section in old and section not in doc:
                doc[section] = old[section]
                revisions[section] = old_revisions.get(section, old.get("revision"))
        incomplete += [s for s in old.get("incomplete", []) if s.split()[0] not in args.scenario]
        errors = old.get("errors", []) + errors
    # Sections in their order, whichever run measured them.
    head = {k: v for k, v in doc.items() if k not in SECTIONS}
    doc = head | {s: doc[s] for s in SECTIONS if s in doc}
    doc["revisions"] = {s: revisions[s] for s in SECTIONS if s in doc}
    # A figure that cannot be true fails the demo, naming its scenario.
    errors = errors + [f"a figure that cannot be true: {b}" for b in impossible(doc)
                       if f"a figure that cannot be true: {b}" not in errors]
    doc["complete"] = not incomplete and not errors
    doc["incomplete"] = incomplete
    doc["errors"] = errors

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "demo.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    text = report(doc)
    notes = plots(doc, args.out)
    with open(os.path.join(args.out, "REPORT.md"), "w", encoding="utf-8") as f:
        f.write(report_text(doc, notes))
    print(text)
    for n in notes:
        print(f"plot: {os.path.join(args.out, n)}" if n.endswith(".png") else n)
    for e in errors:
        print(f"error in the guest: {e}", file=sys.stderr)
    return 0 if doc["complete"] else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("check", "write"):
        sys.exit(figures_main(sys.argv[1], sys.argv[2:]))
    sys.exit(main())
