# SPDX-License-Identifier: GPL-2.0-only
"""bench/consolidate.py's output: the table of every run, the summary per
setup (medians over the repeats, ratios against no pack) and the verdict
per figure ("ok", "noise" or "MORE")."""
import statistics

from consolidate_setups import WORKLOADS

def fmt_cpu(d, cpus, w=5):
    if d is None:
        return "-"
    return "/".join("%.0f" % d[c] for c in cpus if c in d)


def print_table(rows, cpus, idle_cpu):
    cl = "/".join("cpu%d" % c for c in cpus)
    print("%-3s %-18s %6s %4s %4s %5s %14s %6s %6s %14s %14s %14s %9s" %
          ("rep", "setup", "packed", "cpus", "all", "/vm", "VM runs/s " + cl,
           "VM ms/s", "on%d" % idle_cpu, "idle-exits/s", "LOC/s",
           "cswitch/s", "tool/s"))
    for r in rows:
        if r["status"] != "ok":
            print("%-3s %-18s %s" % (r["rep"], r["setup"], r["status"]))
            continue
        print("%-3s %-18s %6s %4d %4d %5.2f %14s %6s %6s %14s %14s %14s %9s" % (
            r["rep"], r["setup"],
            "-" if r["packed"] is None else "%d/%d" % (r["packed"], r["vms"]),
            r["cpus_pack"], r["cpus_all"], r["cpus_per_vm"],
            fmt_cpu(r["vm_runs_s"], cpus),
            "-" if r["vm_cpu_ms_s"] is None else "%.1f" % r["vm_cpu_ms_s"],
            "-" if r["idle_cpu_share"] is None
            else "%.0f%%" % (100 * r["idle_cpu_share"]),
            fmt_cpu(r["idle_exits_s"], cpus), fmt_cpu(r["loc_s"], cpus),
            fmt_cpu(r["cs_s"], cpus),
            fmt_cpu(r["tool_runs_s"], cpus)))


def med(rows, setup, key, sub=None):
    if sub in ("none", "sum-none"):
        # the median of the setup minus that of no VM at all
        inner = None if sub == "none" else "sum"
        x, y = med(rows, setup, key, inner), med(rows, "none", key, inner)
        return None if x is None or y is None or setup == "none" else x - y
    vals = []
    for r in rows:
        if r["setup"] != setup or r["status"] != "ok":
            continue
        v = r[key]
        if sub is not None:
            v = None if v is None else (sum(v.values()) if sub == "sum"
                                        else v.get(sub))
        if v is not None:
            vals.append(v)
    return statistics.median(vals) if vals else None


def ratio(x, y):
    if x is None or y is None or y < 0 or x < 0:
        return "-"
    if y == 0:
        return "1.00" if x == 0 else "inf"
    return "%.2f" % (x / y)


def print_summary(rows, names, cpus, idle_cpu):
    metrics = [
        ("distinct CPUs, vCPU+housekeeping threads", "cpus_pack", None),
        ("distinct CPUs, all VM threads", "cpus_all", None),
        ("distinct CPUs per VM (vCPU+hk), mean", "cpus_per_vm", None),
        ("VM runs/s, all CPUs", "vm_runs_total_s", None),
        ("VM runs/s, CPUs other than %d" % idle_cpu, "vm_runs_busy_s", None),
        ("VM CPU ms/s", "vm_cpu_ms_s", None),
        ("share of VM CPU time on cpu%d" % idle_cpu, "idle_cpu_share", None),
        ("VMM housekeeping wake-ups/s, all VMs", "hk_wakeups_s", None),
        ("daemon context switches/s", "tool_cs_s", None),
    ] + [("daemon context switches/s, cpu%d" % c, "tool_runs_s", c)
         for c in cpus] + [
        ("host idle exits/s, all CPUs", "idle_exits_s", "sum"),
    ] + [("host idle exits/s, cpu%d" % c, "idle_exits_s", c) for c in cpus] + [
        ("host LOC/s, all CPUs", "loc_s", "sum"),
    ] + [("host LOC/s, cpu%d" % c, "loc_s", c) for c in cpus] + [
        ("host context switches/s, all CPUs", "ctxt_s", None),
    ] + [("host context switches/s, cpu%d" % c, "cs_s", c) for c in cpus] + [
        ("host idle exits/s above none", "idle_exits_s", "sum-none"),
        ("host LOC/s above none", "loc_s", "sum-none"),
        ("host context switches/s above none", "ctxt_s", "none"),
    ]
    print()
    print("medians over %d repeats:" % max(
        [sum(1 for r in rows if r["setup"] == n) for n in names] or [0]))
    w = max(max(len(n) for n in names), 9)
    print("%-42s " % "" + " ".join("%*s" % (w, n) for n in names))
    for label, key, sub in metrics:
        vals = [med(rows, n, key, sub) for n in names]
        if all(v is None for v in vals):
            continue
        print("%-42s " % label + " ".join(
            "%*s" % (w, "-" if v is None else
                     ("%.0f" % v if abs(v) >= 100 else "%.2f" % v))
            for v in vals))
    bg = [r for r in rows if r["setup"] == "none" and r["status"] == "ok"]
    if bg:
        def spread(key, sub):
            v = [sum(r[key].values()) if sub else r[key] for r in bg
                 if r[key] is not None]
            return "%.0f..%.0f" % (min(v), max(v)) if v else "-"
        print("background (none) over the repeats, min..max: idle exits/s "
              "%s, LOC/s %s, context switches/s %s" % (
                  spread("idle_exits_s", True), spread("loc_s", True),
                  spread("ctxt_s", False)))
    print_verdicts(rows, names, idle_cpu)


def values(rows, setup, key, sub=None):
    """Every repeat's value of @key (@sub as in med) for @setup."""
    out = []
    for r in rows:
        if r["setup"] != setup or r["status"] != "ok":
            continue
        v = r.get(key)
        if isinstance(v, dict):
            v = sum(v.values()) if sub == "sum" else v.get(sub)
        if v is not None:
            out.append(v)
    return out


def cell(vals, fmt="%.1f"):
    """median [min..max]"""
    if not vals:
        return "-"
    return (fmt + " [" + fmt + ".." + fmt + "]") % (
        statistics.median(vals), min(vals), max(vals))


def verdict(a, b):
    """A (pack) against B (no pack), lists over the repeats: "ok" when
    A's median is at most B's, "noise" when it is more but the spreads
    overlap (A's min <= B's max), "MORE" otherwise."""
    if not a or not b:
        return "-"
    ma, mb = statistics.median(a), statistics.median(b)
    if ma <= mb:
        return "ok"
    return "noise" if min(a) <= max(b) else "MORE"


def print_verdicts(rows, names, idle_cpu):
    """Per workload: pack (and pack-old) against no pack."""
    figures = [
        ("host CPU ms/s, VMs + daemon", "cpu_ms_s", None, True),
        ("  of which the daemon", "tool_cpu_ms_s", None, False),
        ("wake-ups/s, VMs + daemon (their runs)", "wakeups_s", None, True),
        ("  of which the daemon", "tool_cs_s", None, False),
        ("host idle exits/s, all CPUs", "idle_exits_s", "sum", True),
        ("host LOC/s, all CPUs", "loc_s", "sum", True),
        ("actions/s (pack + restore)", "actions_s", None, False),
        ("share of VM CPU time on cpu%d (%%)" % idle_cpu, "idle_cpu_share",
         None, False),
        ("guest job start delay p50 (us)", "late_p50_us", None, False),
        ("guest job start delay p99 (us)", "late_p99_us", None, False),
        ("guest job start delay max (us)", "late_max_us", None, False),
    ]
    print()
    print("per workload, median [min..max] over the repeats; verdict: "
          "pack / no pack, ok = median not above, noise = above but the "
          "spreads overlap, MORE = above beyond the spread")
    for w in WORKLOADS:
        cols = [n for n in ("%s/nopack" % w, "%s/pack" % w,
                            "%s/pack-old" % w) if n in names]
        if len(cols) < 2:
            continue
        print()
        print("%-40s %s" % (w, "".join("%-28s" % c for c in cols) +
                            "verdict (pack%s)" %
                            (", pack-old" if len(cols) > 2 else "")))
        for label, key, sub, judged in figures:
            vals = [values(rows, c, key, sub) for c in cols]
            if key == "idle_cpu_share":
                vals = [[100 * x for x in v] for v in vals]
            if not any(vals):
                continue
            v = ""
            if judged:
                v = ", ".join(verdict(x, vals[0]) for x in vals[1:])
            print("%-40s %s%s" % (label, "".join("%-28s" % cell(x)
                                                for x in vals), v))
