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
           (the order alternates with each repetition), --repeat runs each,
           in three setups: vmm (no --sysidle, the guest's pv tick at --hz),
           vmm-quiet (no --sysidle, the guest's tick off: no host activity
           between wake-ups, as under --sysidle; separates what an idle host
           costs to wake from what --sysidle's own wake path adds) and
           vmm-sysidle;
           pingpong.elf on 2 vCPUs, hz=--hz pv tick on CPU 0, a long enough
           gap (--delay-us) for the VM to reach FULL_NOTED before each wake:
             timer  CPU 0's one-shot LAPIC timer (TSC-deadline), guest-timed:
                    handler TSC - deadline TSC              (mode=sleep)
             ipi    CPU 1 woken by its own timer IPIs the halted CPU 0,
                    guest-timed: CPU 0 handler - CPU 1 handler (mode=ipiwake)
             serial a byte written to the VMM's stdin, echoed by CPU 0's
                    serial interrupt handler, host-timed round trip: write
                    -> the echo read from stdout                 (mode=echo)
           The guest prints every sample; p50 and p99 (nearest rank) are
           taken over all samples of a setup from all its runs (pooled, not
           a median of per-run figures), and the ratio is sysidle / plain.
           "from full" counts the --sysidle wake-ups that actually left
           FULL_NOTED (from --sysidle-log), to show the path measured is the
           one from full idle.

Every VMM run is bounded by --timeout: on expiry its process group is
killed with SIGKILL (by its PID) and the run is reported as hung, never
dropped. Output: a table, or with --json one JSON object per row.

Not a test: numbers only, for the closing note of a change.
"""
import argparse
import json
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time

SAMPLES = re.compile(r"pingpong: (sleep|ipiwake): samples=([0-9,]+) ns")
PATHS = (("timer", "sleep"), ("serial", "echo"), ("ipi", "ipiwake"))
SETUPS = ("vmm", "vmm-quiet", "vmm-sysidle")


LIVE = set()  # Runs whose process may still be running


class Run:
    """One VMM process, its stdout read with a deadline."""

    def __init__(self, cmd, timeout):
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE,
                                  start_new_session=True)
        LIVE.add(self)
        self.deadline = time.monotonic() + timeout
        self.out = b""
        self.hung = False

    def left(self):
        return self.deadline - time.monotonic()

    def read_until(self, pattern):
        """Read stdout until pattern (bytes) is in it; False on EOF/hang."""
        fd = self.p.stdout.fileno()
        while pattern not in self.out:
            left = self.left()
            if left <= 0:
                self.hung = True
                return False
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return False
                self.out += chunk
        return True

    def send(self, data):
        """False when the VMM is gone (its stdin closed)."""
        try:
            os.write(self.p.stdin.fileno(), data)
            return True
        except OSError:
            return False

    def signal(self, sig):
        try:
            os.kill(self.p.pid, sig)
        except ProcessLookupError:
            pass

    def finish(self):
        """Wait for the exit within the deadline (else SIGKILL: hung);
        returns (exit status or None, stdout, stderr)."""
        try:
            out, err = self.p.communicate(timeout=max(self.left(), 0.01))
        except subprocess.TimeoutExpired:
            self.hung = True
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = self.p.communicate()
        self.out += out or b""
        LIVE.discard(self)
        return (None if self.hung else self.p.returncode,
                self.out.decode(errors="replace"),
                (err or b"").decode(errors="replace"))


def failure(rc, out, err):
    tail = (err.strip().splitlines() or out.strip().splitlines() or
            ["(no output)"])[-1]
    return f"exit {rc}: {tail[:80]}"


def pct(sorted_vals, p):
    """Nearest-rank percentile of a sorted list."""
    if not sorted_vals:
        return None
    k = max(1, -(-len(sorted_vals) * p // 100))
    return sorted_vals[int(k) - 1]


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

def wake_cmd(a, setup, mode, log):
    cmd = [a.vmm, "--cpus", "2", "--mem", a.mem]
    if setup == "vmm-sysidle":
        cmd += ["--sysidle", "--sysidle-log", log]
    hz = 0 if setup == "vmm-quiet" else a.hz
    app = f"mode={mode} rounds={a.rounds} delay_us={a.delay_us} hz={hz}"
    return cmd + ["--append", app, a.pingpong_elf]


def guest_timed(a, cmd):
    r = Run(cmd, a.timeout)
    rc, out, err = r.finish()
    if r.hung:
        return None, "hung"
    m = SAMPLES.search(out)
    if rc != 0 or not m:
        return None, failure(rc, out, err)
    return [int(x) for x in m.group(2).split(",")], "ok"


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
        return None, "hung"
    if rc != 0 or len(samples) != a.rounds:
        return None, failure(rc, out, err)
    return samples, "ok"


def wake(a, tmp):
    runs = {}
    setups = SETUPS if a.hz else ("vmm", "vmm-sysidle")
    for rep in range(a.repeat):
        for path, mode in PATHS:
            order = setups if rep % 2 == 0 else setups[::-1]
            for setup in order:
                log = os.path.join(tmp, f"wake-{mode}-{rep}.log")
                if os.path.exists(log):
                    os.unlink(log)
                cmd = wake_cmd(a, setup, mode, log)
                if mode == "echo":
                    s, note = echo_timed(a, cmd)
                else:
                    s, note = guest_timed(a, cmd)
                full = count_from_full(log) if setup == "vmm-sysidle" else None
                runs.setdefault((path, setup), []).append((s, note, full))
                med = statistics.median(s) if s else None
                print(f"# wake run {rep + 1}/{a.repeat} {path:6s} {setup:11s} "
                      f"{note:4s} median={med} ns"
                      + (f" from_full={full}" if full is not None else ""),
                      file=sys.stderr, flush=True)
    rows = []
    for path, _ in PATHS:
        for setup in setups:
            rs = runs.get((path, setup), [])
            allv = sorted(v for s, _, _ in rs if s for v in s)
            full = [f for s, _, f in rs if s and f is not None]
            rows.append({"part": "wake", "path": path, "setup": setup,
                         "runs": len(rs), "ok": sum(1 for s, _, _ in rs if s),
                         "hung": sum(1 for _, n, _ in rs if n == "hung"),
                         "failures": [n for s, n, _ in rs if not s],
                         "samples": len(allv),
                         "from_full": sum(full) if full else None,
                         "timed_by": "host" if path == "serial" else "guest",
                         "min_ns": allv[0] if allv else None,
                         "p50_ns": pct(allv, 50), "p99_ns": pct(allv, 99),
                         "max_ns": allv[-1] if allv else None})
    for r in rows:
        for ref, key in (("vmm", "ratio"), ("vmm-quiet", "ratio_quiet")):
            base = next((b for b in rows if b["path"] == r["path"] and
                         b["setup"] == ref), None)
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
        print(f"wake latency from full idle, 2 vCPUs, hz={a.hz}, gap "
              f"{a.delay_us} us, {a.rounds} rounds x {a.repeat} runs; us")
        print(f"{'path':6s} {'setup':11s} {'timed':5s} {'n':>4s} "
              f"{'from full':>9s} {'min':>8s} {'p50':>8s} {'p99':>8s} "
              f"{'max':>8s} {'p50 x':>6s} {'p99 x':>6s} {'p50 q':>6s} "
              f"{'p99 q':>6s} {'ok/runs':>8s} {'hung':>4s}")

        def x(v):
            return "-" if v is None else f"{v:.2f}"
        for r in wk:
            ff = "-" if r["from_full"] is None else str(r["from_full"])
            print(f"{r['path']:6s} {r['setup']:11s} {r['timed_by']:5s} "
                  f"{r['samples']:4d} {ff:>9s} {fmt(r['min_ns']):>8s} "
                  f"{fmt(r['p50_ns']):>8s} {fmt(r['p99_ns']):>8s} "
                  f"{fmt(r['max_ns']):>8s} {x(r['ratio_p50']):>6s} "
                  f"{x(r['ratio_p99']):>6s} {x(r['ratio_quiet_p50']):>6s} "
                  f"{x(r['ratio_quiet_p99']):>6s} "
                  f"{r['ok']:>4d}/{r['runs']:<3d} {r['hung']:4d}")
            for f in r["failures"]:
                print(f"       ! {f}")
        print("# x = / vmm (the guest's tick running: the host never idles "
              "long); q = / vmm-quiet (the same VMM and guest with its tick "
              "off: the host as idle as under --sysidle); same percentile; "
              "goal <= 1.10 at p50 and p99")


def kill_live():
    """Each guest runs in its own session: nothing else would stop it."""
    for r in list(LIVE):
        try:
            os.killpg(r.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        r.p.wait()
    LIVE.clear()


def main():
    # SIGTERM unwinds like Ctrl-C, so kill_live() still runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return measure_all()
    finally:
        kill_live()


def measure_all():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
    ap.add_argument("--rounds", type=int, default=30,
                    help="wake-ups per wake run (30, at most 4096)")
    ap.add_argument("--delay-us", type=int, default=50000,
                    help="gap before each wake-up, us (50000)")
    ap.add_argument("--hz", type=int, default=250,
                    help="guest pv tick in the wake runs (250; 0: none)")
    ap.add_argument("--repeat", type=int, default=5,
                    help="runs per setup and vCPU count (5)")
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
    if (a.wakes < 1 or a.repeat < 1 or a.timeout <= 0 or a.spacing <= 0 or
            not 1 <= a.rounds <= 4096 or a.delay_us < 1 or a.hz < 0 or
            not parts <= {"detection", "wake"}):
        ap.error("bad --wakes/--repeat/--timeout/--spacing/--rounds/"
                 "--delay-us/--hz/--parts")
    a.vmm = os.path.join(a.build, "vmm")
    a.idle_elf = os.path.join(a.build, "guest-tools", "idle.elf")
    a.pingpong_elf = os.path.join(a.build, "guest-tools", "pingpong.elf")
    for f in (a.vmm, a.idle_elf, a.pingpong_elf):
        if not os.path.exists(f):
            sys.exit(f"latency: {f} not found: build first "
                     f"(ninja -C {a.build})")
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        sys.exit("latency: /dev/kvm is not usable here")
    with tempfile.TemporaryDirectory(prefix="latency-") as tmp:
        det = detection(a, tmp) if "detection" in parts else []
        wk = wake(a, tmp) if "wake" in parts else []
    if a.json:
        for r in det + wk:
            print(json.dumps(r))
        return 0
    print_table(a, det, wk)
    return 0


if __name__ == "__main__":
    sys.exit(main())
