#!/usr/bin/env python3
"""What --sysidle costs in latency: detection and wake-up, side by side.

Two parts, one invocation:

detection  how long the VMM takes to notice a fully idle guest: idle.elf
           hz=250 under --sysidle --stats-json on 1, 2, 4 ... 64 vCPUs (the
           library's default delay), woken --wakes times by a serial byte
           spaced --spacing s apart (each wake drops the state to NOT, the
           next climb to FULL_NOTED is one more sample), then SIGTERM. The
           figures are the VMM's own sysidle.detection_latency_ns (last vCPU
           halt -> FULL_NOTED): count, min, median, p99, mean, max. With
           --repeat > 1: all counts added, min of the minima, median of the
           medians, the largest p99, max of the maxima.

wake       the same wake-up path with and without --sysidle, interleaved
           (the order alternates with each repetition), --repeat runs each
           (3), in the setups chosen with --setups: vmm (no --sysidle, the
           guest's pv tick at --hz), vmm-quiet (no --sysidle, the guest's
           tick off: no host activity between wake-ups, as under --sysidle;
           separates what an idle host costs to wake from what --sysidle's
           own wake path adds) and vmm-sysidle; plus any --setup NAME=ARGS
           (this VMM with ARGS; with --sysidle among them it is counted
           "from full" too) and, with --baseline, another VMM binary as base
           and base-sysidle;
           pingpong.elf on 2 vCPUs, hz=--hz pv tick on CPU 0, --rounds
           wake-ups (1000) after a gap (--delay-us, 10000) long enough for
           the VM to reach FULL_NOTED before each wake (on 2 vCPUs with the
           library's defaults every wake-up left FULL_NOTED from 5000 us up,
           not all below: the detection waits for a 250 Hz timekeeper tick):
             timer  CPU 0's one-shot LAPIC timer (TSC-deadline), guest-timed:
                    handler TSC - deadline TSC              (mode=sleep)
             ipi    CPU 1 woken by its own timer IPIs the halted CPU 0,
                    guest-timed: CPU 0 handler - CPU 1 handler (mode=ipiwake)
             serial a byte written to the VMM's stdin, echoed by CPU 0's
                    serial interrupt handler, host-timed round trip: write
                    -> the echo read from stdout                 (mode=echo)
             mixed  (only when --paths names it) the timer path with
                    every other gap --short-us (200) instead: a VM that
                    alternates full idle with short sleeps; two rows,
                    mixed-long (the wake-ups from the long gaps) and
                    mixed-short, the CPU shared by both   (mode=sleep
                    short_us=)
           The guest prints every sample; p50 and p99 (nearest rank) are
           taken over all samples of a setup from all its runs (pooled),
           and also per run (median [min..max] over the runs); the ratios
           are to --ratio-to (vmm) and to vmm-quiet, at p50 and p99.
           "from full" counts the --sysidle wake-ups that actually left
           FULL_NOTED (from --sysidle-log), to show the path measured is the
           one from full idle. The CPU a setup burnt is the VMM process's
           user + sys time (all threads, its rusage, boot included), per
           wake-up and per second of wall time. --load N runs N busy loops
           for the whole wake part (a loaded host: what the scheduler does
           to p99), killed at the end whatever happens.

The load average is printed at the start and at the end.
Every VMM run is bounded by --timeout: on expiry its process group is
killed with SIGKILL (by its PID) and the run is reported as hung, never
dropped. Output: a table, or with --json one JSON object per row.

Not a test: numbers only, for the closing note of a change.
"""
import argparse
import json
import os
import re
import signal
import statistics
import sys
import tempfile
import time

from benchstats import check_setups, parse_setup, vmm_binary, pct, spread, loadavg  # noqa: E402
from benchrun import Run, kill_live, start_load, stop_load  # noqa: E402

SAMPLES = re.compile(r"pingpong: (sleep|ipiwake): samples=([0-9,]+) ns")
PATHS = (("timer", "sleep"), ("serial", "echo"), ("ipi", "ipiwake"),
         ("mixed", "sleep"))
DEFAULT_PATHS = "timer,serial,ipi"
DEFAULT_SHORT_US = 200
SETUPS = ("vmm", "vmm-quiet", "vmm-sysidle")
DEFAULT_ROUNDS = 1000
DEFAULT_DELAY_US = 10000


def failure(rc, out, err):
    tail = (err.strip().splitlines() or out.strip().splitlines() or
            ["(no output)"])[-1]
    return f"exit {rc}: {tail[:80]}"




def count_from_full(log):
    try:
        with open(log) as f:
            return sum(1 for l in f if "state FULL_NOTED -> NOT" in l)
    except OSError:
        return 0


# ---- detection ------------------------------------------------------------

def detection_run(a, n, tmp):
    stats = os.path.join(tmp, f"det-{n}.json")
    log = os.path.join(tmp, f"det-{n}.log")
    for f in (stats, log):
        if os.path.exists(f):
            os.unlink(f)
    cmd = [a.vmm, "--sysidle", "--sysidle-log", log, "--stats-json", stats,
           "--cpus", str(n), "--mem", a.mem, "--append", "hz=250",
           a.idle_elf]
    r = Run(cmd, a.timeout)
    if not r.read_until(b"cpus up"):
        if not r.hung:
            r.signal(signal.SIGTERM)
        rc, out, err = r.finish()
        return None, "hung" if r.hung else failure(rc, out, err)
    for _ in range(a.wakes):
        if r.left() <= a.spacing:
            break
        time.sleep(a.spacing)
        if not r.send(b"x"):
            break
    time.sleep(a.spacing)
    r.signal(signal.SIGTERM)
    rc, out, err = r.finish()
    if r.hung:
        return None, "hung"
    if rc != 128 + signal.SIGTERM:
        return None, failure(rc, out, err)
    try:
        with open(stats) as f:
            s = json.load(f)["sysidle"]
    except (OSError, ValueError, KeyError) as e:
        return None, f"no stats: {e}"
    d = dict(s["detection_latency_ns"])
    d["delay_ns"] = s.get("delay_ns")
    d["full_idle_periods"] = s.get("full_idle_periods")
    return d, "ok"


def detection(a, tmp):
    rows = []
    for n in a.cpus:
        res = []
        for rep in range(a.repeat):
            d, note = detection_run(a, n, tmp)
            res.append((d, note))
            print(f"# detection cpus={n:<3d} run {rep + 1}/{a.repeat} {note}"
                  + (f" count={d['count']} median={d['median']} ns "
                     f"max={d['max']} ns" if d else ""),
                  file=sys.stderr, flush=True)
        ok = [d for d, _ in res if d and d.get("count")]
        row = {"part": "detection", "cpus": n, "runs": len(res),
               "ok": len(ok), "hung": sum(n_ == "hung" for _, n_ in res),
               "failures": [n_ for d, n_ in res if not d],
               "delay_ns": ok[0]["delay_ns"] if ok else None,
               "count": sum(d["count"] for d in ok),
               "min_ns": min((d["min"] for d in ok), default=None),
               "median_ns": statistics.median([d["median"] for d in ok])
               if ok else None,
               "mean_ns": round(sum(d["mean"] * d["count"] for d in ok) /
                                sum(d["count"] for d in ok)) if ok else None,
               "max_ns": max((d["max"] for d in ok), default=None),
               # each run's p99 (nearest rank, the VMM's first 4096
               # samples); across runs the largest, not a pooled p99
               "p99_ns": max((d["p99"] for d in ok), default=None)}
        rows.append(row)
    return rows


# ---- wake-up latency ------------------------------------------------------

class Setup:
    """A VMM binary with extra arguments; sysidle: --sysidle is among them
    (then --sysidle-log is added, for "from full"); hz: the guest's tick."""

    def __init__(self, name, binary, extra, hz):
        self.name, self.binary, self.extra, self.hz = name, binary, extra, hz
        self.sysidle = "--sysidle" in extra






def wake_setups(a):
    """The wake part's setups, in run order; exits on a bad choice."""
    default = {"vmm": Setup("vmm", a.vmm, [], a.hz),
               "vmm-quiet": Setup("vmm-quiet", a.vmm, [], 0),
               "vmm-sysidle": Setup("vmm-sysidle", a.vmm, ["--sysidle"],
                                    a.hz)}
    out = []
    for name in a.setups:
        if name not in default:
            sys.exit(f"latency: --setups: unknown setup {name!r} "
                     f"(known: {', '.join(SETUPS)})")
        if name == "vmm-quiet" and not a.hz:
            continue  # the same as vmm with --hz 0
        out.append(default[name])
    if a.baseline:
        old = vmm_binary(a.baseline)
        if not os.access(old, os.X_OK):
            sys.exit(f"latency: --baseline {a.baseline}: no VMM there")
        out += [Setup("base", old, [], a.hz),
                Setup("base-sysidle", old, ["--sysidle"], a.hz)]
    out += [Setup(name, a.vmm, extra, a.hz) for name, extra in a.setup]
    check_setups("latency", [s.name for s in out], "wake setup")
    return out


def wake_cmd(a, setup, path, mode, log):
    cmd = [setup.binary, "--cpus", "2", "--mem", a.mem] + setup.extra
    if setup.sysidle:
        cmd += ["--sysidle-log", log]
    app = (f"mode={mode} rounds={a.rounds} delay_us={a.delay_us} "
           f"hz={setup.hz}")
    if path == "mixed":
        app += f" short_us={a.short_us}"
    return cmd + ["--append", app, a.pingpong_elf]


def guest_timed(a, cmd):
    r = Run(cmd, a.timeout)
    rc, out, err = r.finish()
    if r.hung:
        return None, "hung", r
    m = SAMPLES.search(out)
    if rc != 0 or not m:
        return None, failure(rc, out, err), r
    return [int(x) for x in m.group(2).split(",")], "ok", r


def echo_timed(a, cmd):
    r = Run(cmd, a.timeout)
    samples = []
    ready = b"pingpong: echo: ready\r\n"  # the guest console writes CR LF
    if r.read_until(ready):
        r.out = r.out[r.out.index(ready) + len(ready):]
        gap = a.delay_us / 1e6
        for _ in range(a.rounds):
            time.sleep(gap)
            t0 = time.perf_counter_ns()
            if not r.send(b"\n") or not r.read_until(b"\n"):
                break
            samples.append(time.perf_counter_ns() - t0)
            r.out = r.out[r.out.index(b"\n") + 1:]
        if len(samples) == a.rounds:
            r.read_until(b"echo: rounds=")
    rc, out, err = r.finish()
    if r.hung:
        return None, "hung", r
    if rc != 0 or len(samples) != a.rounds:
        return None, failure(rc, out, err), r
    return samples, "ok", r




def wake(a, tmp):
    runs = {}
    setups = wake_setups(a)
    paths = [(p, m) for p, m in PATHS if p in a.paths]
    rows_of = []  # the table's paths: mixed is two rows
    for p, _ in paths:
        rows_of += ["mixed-long", "mixed-short"] if p == "mixed" else [p]
    for rep in range(a.repeat):
        for path, mode in paths:
            order = setups if rep % 2 == 0 else setups[::-1]
            for i, setup in enumerate(order):
                log = os.path.join(tmp, f"wake-{path}-{rep}-{i}.log")
                if os.path.exists(log):
                    os.unlink(log)
                cmd = wake_cmd(a, setup, path, mode, log)
                if mode == "echo":
                    s, note, r = echo_timed(a, cmd)
                else:
                    s, note, r = guest_timed(a, cmd)
                full = count_from_full(log) if setup.sysidle else None
                if path != "mixed":
                    runs.setdefault((path, setup.name), []).append(
                        (s, note, full, r.cpu_s, r.wall_s))
                else:
                    # samples alternate long, short; the run's CPU and
                    # wall time split by the wake-ups (per wake-up: both)
                    for k, part in enumerate(("mixed-long", "mixed-short")):
                        runs.setdefault((part, setup.name), []).append(
                            (s[k::2] if s else s, note,
                             None if full is None or k else full,
                             r.cpu_s / 2, r.wall_s / 2))
                med = statistics.median(s) if s else None
                print(f"# wake run {rep + 1}/{a.repeat} {path:6s} "
                      f"{setup.name:11s} {note:4s} median={med} ns "
                      f"cpu={r.cpu_s:.2f} s wall={r.wall_s:.1f} s"
                      + (f" from_full={full}" if full is not None else ""),
                      file=sys.stderr, flush=True)
    rows = []
    for path in rows_of:
        for setup in setups:
            rs = runs.get((path, setup.name), [])
            good = [x for x in rs if x[0]]
            allv = sorted(v for x in good for v in x[0])
            per_run = [sorted(x[0]) for x in good]
            full = [x[2] for x in good if x[2] is not None]
            cpu = sum(x[3] for x in good)
            wall = sum(x[4] for x in good)
            rows.append({"part": "wake", "path": path, "setup": setup.name,
                         "args": setup.extra, "hz": setup.hz,
                         "runs": len(rs), "ok": len(good),
                         "hung": sum(1 for x in rs if x[1] == "hung"),
                         "failures": [x[1] for x in rs if not x[0]],
                         "samples": len(allv),
                         "from_full": sum(full) if full else None,
                         "timed_by": "host" if path == "serial" else "guest",
                         "short_us": a.short_us if path.startswith("mixed")
                         else None,
                         "min_ns": allv[0] if allv else None,
                         "p50_ns": pct(allv, 50), "p99_ns": pct(allv, 99),
                         "max_ns": allv[-1] if allv else None,
                         "run_p50_ns": spread([pct(v, 50) for v in per_run]),
                         "run_p99_ns": spread([pct(v, 99) for v in per_run]),
                         "cpu_s": round(cpu, 3), "wall_s": round(wall, 2),
                         "cpu_us_per_wake": round(cpu * 1e6 / len(allv), 1)
                         if allv else None,
                         "cpu_ms_per_s": round(cpu * 1e3 / wall, 1)
                         if wall else None,
                         "load": a.load})
    for r in rows:
        for ref, key in ((a.ratio_to, "ratio"), ("vmm-quiet", "ratio_quiet")):
            base = next((b for b in rows if b["path"] == r["path"] and
                         b["setup"] == ref), None)
            r[f"{key}_to"] = ref
            for k in ("p50", "p99"):
                v = r[f"{k}_ns"]
                b = base[f"{k}_ns"] if base else None
                r[f"{key}_{k}"] = round(v / b, 3) if v and b else None
    return rows


def fmt(v):
    return "-" if v is None else f"{v / 1000:.1f}"


def print_table(a, det, wk):
    if det:
        print("detection latency (last vCPU halt -> FULL_NOTED), --sysidle, "
              "idle.elf hz=250, VMM stats; us")
        print(f"{'cpus':>4s} {'delay':>7s} {'count':>5s} {'min':>8s} "
              f"{'median':>8s} {'p99':>8s} {'mean':>8s} {'max':>8s} "
              f"{'ok/runs':>8s} {'hung':>4s}")
        for r in det:
            print(f"{r['cpus']:4d} {fmt(r['delay_ns']):>7s} {r['count']:5d} "
                  f"{fmt(r['min_ns']):>8s} {fmt(r['median_ns']):>8s} "
                  f"{fmt(r['p99_ns']):>8s} "
                  f"{fmt(r['mean_ns']):>8s} {fmt(r['max_ns']):>8s} "
                  f"{r['ok']:>4d}/{r['runs']:<3d} {r['hung']:4d}")
            for f in r["failures"]:
                print(f"     ! {f}")
        print("# p99: the largest per-run p99 (nearest rank)")
    if det and wk:
        print()
    if wk:
        def x(v):
            return "-" if v is None else f"{v:.2f}"

        def rng(d):
            if d["median"] is None:
                return "-"
            return f"{fmt(d['median'])} [{fmt(d['min'])}..{fmt(d['max'])}]"
        w = max([11] + [len(r["setup"]) for r in wk])
        pw = max([6] + [len(r["path"]) for r in wk])
        load = f", {a.load} busy loops running" if a.load else ""
        print(f"wake latency from full idle, 2 vCPUs, hz={a.hz}, gap "
              f"{a.delay_us} us"
              + (f" (mixed: every other {a.short_us} us)"
                 if "mixed" in a.paths else "") +
              f", {a.rounds} rounds x {a.repeat} runs{load}; "
              "us")
        print(f"{'path':{pw}s} {'setup':{w}s} {'timed':5s} {'n':>5s} "
              f"{'from full':>9s} {'p50':>7s} {'p99':>7s} {'max':>8s} "
              f"{'run p50 med [min..max]':>24s} {'run p99 med [min..max]':>24s} "
              f"{'p50 x':>5s} {'p99 x':>5s} {'p50 q':>5s} {'p99 q':>5s} "
              f"{'cpu us/wake':>11s} {'cpu ms/s':>8s} {'ok/runs':>7s} "
              f"{'hung':>4s}")
        for r in wk:
            ff = "-" if r["from_full"] is None else str(r["from_full"])
            cw = "-" if r["cpu_us_per_wake"] is None else \
                f"{r['cpu_us_per_wake']:.1f}"
            cs = "-" if r["cpu_ms_per_s"] is None else \
                f"{r['cpu_ms_per_s']:.1f}"
            print(f"{r['path']:{pw}s} {r['setup']:{w}s} {r['timed_by']:5s} "
                  f"{r['samples']:5d} {ff:>9s} "
                  f"{fmt(r['p50_ns']):>7s} {fmt(r['p99_ns']):>7s} "
                  f"{fmt(r['max_ns']):>8s} "
                  f"{rng(r['run_p50_ns']):>24s} {rng(r['run_p99_ns']):>24s} "
                  f"{x(r['ratio_p50']):>5s} {x(r['ratio_p99']):>5s} "
                  f"{x(r['ratio_quiet_p50']):>5s} "
                  f"{x(r['ratio_quiet_p99']):>5s} {cw:>11s} {cs:>8s} "
                  f"{r['ok']:>3d}/{r['runs']:<3d} {r['hung']:4d}")
            for f in r["failures"]:
                print(f"       ! {f}")
        print(f"# p50/p99/max: pooled over all samples (nearest rank); run "
              f"p50/p99: median [min..max] of the per-run figures; x = / "
              f"{a.ratio_to}; q = / vmm-quiet (the guest's tick off: the "
              f"host as idle as under --sysidle); same percentile, pooled; "
              f"goal <= 1.10 at p50 and p99; cpu: user+sys of the VMM "
              f"process (boot included) per wake-up and per second of wall "
              f"time")


def main():
    # SIGTERM unwinds like Ctrl-C, so kill_live() still runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return measure_all()
    finally:
        kill_live()
        stop_load()


def measure_all():
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="e.g. --setup 'sysidle-nopoll=--sysidle --halt-poll-ns 0' "
        "--load 2")
    ap.add_argument("--build", default="build",
                    help="meson build directory (default: build)")
    ap.add_argument("--parts", default="detection,wake",
                    help="detection,wake (default: both)")
    ap.add_argument("--cpus", default="1,2,4,8,16,32,64",
                    help="vCPU counts for detection (1,2,4,8,16,32,64)")
    ap.add_argument("--wakes", type=int, default=10,
                    help="serial wake-ups per detection run (10)")
    ap.add_argument("--spacing", type=float, default=0.3,
                    help="seconds between them (0.3)")
    ap.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS,
                    help=f"wake-ups per wake run ({DEFAULT_ROUNDS}, at most "
                    "4096)")
    ap.add_argument("--delay-us", type=int, default=DEFAULT_DELAY_US,
                    help=f"gap before each wake-up, us ({DEFAULT_DELAY_US}; "
                    "long enough for --sysidle to reach FULL_NOTED)")
    ap.add_argument("--paths", default=DEFAULT_PATHS,
                    help=f"wake paths to run ({DEFAULT_PATHS}; also mixed)")
    ap.add_argument("--short-us", type=int, default=DEFAULT_SHORT_US,
                    help=f"the short gap of the mixed path, us "
                    f"({DEFAULT_SHORT_US})")
    ap.add_argument("--hz", type=int, default=250,
                    help="guest pv tick in the wake runs (250; 0: none)")
    ap.add_argument("--repeat", type=int, default=None,
                    help="runs per setup and vCPU count (detection 5, wake "
                    "3)")
    ap.add_argument("--setups", default=",".join(SETUPS),
                    help="default wake setups to run, comma-separated "
                    f"({','.join(SETUPS)}; may be empty)")
    ap.add_argument("--setup", action="append", default=[],
                    metavar="NAME=ARGS",
                    help="an extra wake setup: this VMM with ARGS (shell "
                    "words); with --sysidle among them it also gets "
                    "--sysidle-log (for \"from full\"); repeatable")
    ap.add_argument("--baseline", metavar="PATH",
                    help="another VMM binary (or a build directory holding "
                    "one): adds wake setups base and base-sysidle")
    ap.add_argument("--ratio-to", default="vmm", metavar="NAME",
                    help="the setup the x ratios are taken to (vmm)")
    ap.add_argument("--load", type=int, default=0, metavar="N",
                    help="N busy loops running during the wake part (0)")
    ap.add_argument("--mem", default="256M", help="guest RAM (256M)")
    ap.add_argument("--timeout", type=float, default=60,
                    help="seconds before a VMM run is killed (60)")
    ap.add_argument("--json", action="store_true",
                    help="one JSON object per row")
    a = ap.parse_args()
    parts = set(a.parts.split(","))
    try:
        a.cpus = [int(x) for x in a.cpus.split(",")]
    except ValueError:
        ap.error("--cpus takes comma-separated integers")
    try:
        a.setup = [parse_setup(s) for s in a.setup]
    except ValueError as e:
        ap.error(str(e))
    a.setups = [s for s in a.setups.split(",") if s]
    a.paths = [s for s in a.paths.split(",") if s]
    known = [p for p, _ in PATHS]
    if not a.paths or any(p not in known for p in a.paths):
        ap.error(f"--paths {','.join(a.paths)}: choose among "
                 f"{','.join(known)}")
    if a.short_us < 1 or a.short_us >= a.delay_us:
        ap.error("--short-us: 1 up to below --delay-us")
    if (a.wakes < 1 or (a.repeat is not None and a.repeat < 1) or
            a.timeout <= 0 or a.spacing <= 0 or
            not 1 <= a.rounds <= 4096 or a.delay_us < 1 or a.hz < 0 or
            a.load < 0 or not parts <= {"detection", "wake"}):
        ap.error("bad --wakes/--repeat/--timeout/--spacing/--rounds/"
                 "--delay-us/--hz/--load/--parts")
    a.vmm = os.path.join(a.build, "vmm")
    a.idle_elf = os.path.join(a.build, "guest-tools", "idle.elf")
    a.pingpong_elf = os.path.join(a.build, "guest-tools", "pingpong.elf")
    for f in (a.vmm, a.idle_elf, a.pingpong_elf):
        if not os.path.exists(f):
            sys.exit(f"latency: {f} not found: build first "
                     f"(ninja -C {a.build})")
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        sys.exit("latency: /dev/kvm is not usable here")
    if "wake" in parts:
        # a bad --setups/--baseline/--ratio-to fails before any run
        if a.ratio_to not in [s.name for s in wake_setups(a)]:
            ap.error(f"--ratio-to {a.ratio_to}: not a setup of this run")
    repeat = a.repeat
    load0 = loadavg()
    t0 = time.monotonic()
    print(f"# load average at start: {load0[0]} {load0[1]} {load0[2]} "
          f"({os.cpu_count()} CPUs)", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="latency-") as tmp:
        a.repeat = repeat or 5
        det = detection(a, tmp) if "detection" in parts else []
        t1 = time.monotonic()
        wk = []
        if "wake" in parts:
            a.repeat = repeat or 3
            if a.load:
                print(f"# load on: {a.load} busy loops for the wake part",
                      file=sys.stderr, flush=True)
            try:
                start_load(a.load)
                wk = wake(a, tmp)
            finally:
                stop_load()
    t2 = time.monotonic()
    load1 = loadavg()
    for r in det + wk:
        r["loadavg_start"], r["loadavg_end"] = load0, load1
    times = (f"detection {t1 - t0:.0f} s, " if det else "") + \
        (f"wake {t2 - t1:.0f} s" if wk else "")
    end = (f"# load average at start {load0[0]} {load0[1]} {load0[2]}, at "
           f"end {load1[0]} {load1[1]} {load1[2]}; {times}")
    if a.json:
        for r in det + wk:
            print(json.dumps(r))
        print(end, file=sys.stderr)
        return 0
    print_table(a, det, wk)
    print(end)
    return 0


if __name__ == "__main__":
    sys.exit(main())
