#!/usr/bin/env python3
"""What an idle guest costs its host: this VMM, with and without --sysidle,
and QEMU with the in-kernel and the userspace APIC, side by side.

Boots the same image, idle.elf (all CPUs halt; CPU 0 keeps a periodic tick
at hz=: the pv tick where the VMM offers it, or with --tick lapic the
guest's own periodic LAPIC timer, as a guest that never heard of the pv
tick keeps it), under four setups, interleaved in one run:

  vmm               this VMM
  vmm-sysidle       this VMM with --sysidle
  vmm-catchup       --sysidle --lapic-tick-policy catchup (--tick lapic only)
  vmm-discard       --sysidle --lapic-tick-policy discard (--tick lapic only)
  baseline-sysidle  --baseline BUILD/vmm --sysidle (another revision)
  qemu-irqchip-on   QEMU, in-kernel LAPIC (kernel-irqchip=on)
  qemu-irqchip-off  QEMU, userspace LAPIC (kernel-irqchip=off)
  NAME              --setup NAME=ARGS: this VMM with ARGS (shell words),
                    e.g. --setup 'poll=--sysidle --halt-poll-ns 200000';
                    repeatable, always run

For each hz and vCPU count it waits for the guest's "cpus up" line, lets
--settle seconds pass (so that --sysidle can reach full idle), then measures
a --window second steady window of the whole process (all threads): host
CPU seconds (utime + stime from /proc/PID/stat) and host context switches
per second (voluntary + nonvoluntary, summed over /proc/PID/task/*/status,
the threads' own wake-ups). A run that does not boot in --timeout seconds
is killed with SIGKILL and reported as hung, not dropped.

Not a test: numbers for the closing note of a change.
"""
import argparse
import json
import os
import select
import signal
import statistics
import subprocess
import sys
import time

from benchrun import idle_guest_setups  # noqa: E402
from benchstats import parse_setup, proc_cpu_s, proc_ctxt  # noqa: E402


def setups(build, image, want, baseline=None, extra=()):
    """{name: cmd(ncpus, append)} of the setups named in @want (QEMU's only
    where it is installed), baseline-sysidle with --baseline, and the
    --setup ones; exits when a --setup name is taken."""
    out = {k: v for k, v in idle_guest_setups(build, image, 256).items()
           if k in want}
    if baseline:
        old = os.path.join(baseline, "vmm")
        out["baseline-sysidle"] = lambda n, app: [
            old, "--control", "none", "--sysidle", "--cpus", str(n),
            "--append", app, image]
    vmm = os.path.join(build, "vmm")
    for name, args in extra:
        if name in out:
            sys.exit(f"idle-cost: --setup {name}: the name is taken")
        out[name] = lambda n, app, a=args: [
            vmm, "--control", "none"] + a + ["--cpus", str(n), "--append",
                                             app, image]
    return out


def measure(cmd, boot_timeout, settle, window):
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    buf = b""
    deadline = time.monotonic() + boot_timeout
    try:
        while b"cpus up" not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or p.poll() is not None:
                return None, "hung" if p.poll() is None else \
                    f"exited {p.returncode} before boot"
            r, _, _ = select.select([p.stdout], [], [], left)
            if r:
                chunk = os.read(p.stdout.fileno(), 4096)
                if not chunk:
                    continue
                buf += chunk
        time.sleep(settle)  # the steady state is what is measured
        c0, x0, t0 = proc_cpu_s(p.pid), proc_ctxt(p.pid), time.monotonic()
        time.sleep(window)
        c1, x1, t1 = proc_cpu_s(p.pid), proc_ctxt(p.pid), time.monotonic()
        return {"cpu_s": round(c1 - c0, 3),
                "ctxt_per_s": round((x1 - x0) / (t1 - t0), 1)}, "ok"
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def main():
    # SIGTERM unwinds like Ctrl-C, so measure() still kills the guest it
    # started (its own session: nothing else would).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--hz", default="250,1000", help="tick rates (250,1000)")
    ap.add_argument("--cpus", default="1,2,4,8", help="vCPU counts (1,2,4,8)")
    ap.add_argument("--setups",
                    default="vmm,vmm-sysidle,vmm-catchup,vmm-discard,"
                    "qemu-irqchip-on,qemu-irqchip-off")
    ap.add_argument("--window", type=float, default=10,
                    help="steady window, seconds (10)")
    ap.add_argument("--settle", type=float, default=2,
                    help="seconds after boot before the window (2)")
    ap.add_argument("--timeout", type=float, default=60,
                    help="seconds to wait for boot (60)")
    ap.add_argument("--tick", default="default",
                    help="the guest's tick, comma-separated: default (the pv "
                    "tick where the VMM offers it), lapic (a guest that never "
                    "heard of the pv tick: its own periodic LAPIC timer), or "
                    "both (default)")
    ap.add_argument("--baseline", metavar="BUILD",
                    help="also run BUILD/vmm --sysidle (a build of another "
                    "revision) as baseline-sysidle, on the same image")
    ap.add_argument("--setup", action="append", default=[],
                    metavar="NAME=ARGS",
                    help="an extra setup: this VMM with ARGS (shell words); "
                    "repeatable")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    try:
        extra = [parse_setup(s) for s in args.setup]
    except ValueError as e:
        ap.error(str(e))
    try:
        hzs = [int(x) for x in args.hz.split(",")]
        cpus = [int(x) for x in args.cpus.split(",")]
    except ValueError:
        ap.error("--hz and --cpus take comma-separated integers")
    image = os.path.join(args.build, "guest-tools", "idle.elf")
    if not os.path.exists(image):
        sys.exit(f"idle-cost: {image} not found: build first")
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        sys.exit("idle-cost: /dev/kvm is not usable here")
    ticks = args.tick.split(",")
    if not set(ticks) <= {"default", "lapic"}:
        ap.error("--tick takes default and/or lapic")
    if args.baseline and not os.access(os.path.join(args.baseline, "vmm"),
                                       os.X_OK):
        ap.error(f"--baseline {args.baseline}: no vmm there")
    runs = setups(args.build, image, args.setups.split(","), args.baseline,
                  extra)
    rows = []
    for tick in ticks:
        for hz in hzs:
            for n in cpus:
                for name, cmd in runs.items():
                    if tick != "lapic" and name in ("vmm-catchup",
                                                    "vmm-discard"):
                        continue  # the same as vmm-sysidle with a pv tick
                    app = f"hz={hz}" + (" tick=lapic" if tick == "lapic" else "")
                    res, note = measure(cmd(n, app), args.timeout,
                                        args.settle, args.window)
                    row = {"setup": name if tick == "default" else
                           name + " tick=lapic", "hz": hz, "cpus": n,
                           "status": note, "cpu_s": res and res["cpu_s"],
                           "ctxt_per_s": res and res["ctxt_per_s"]}
                    rows.append(row)
                    print(f"# {row['setup']:28s} hz={hz:<5d} cpus={n:<2d} "
                          f"{note:5s} cpu={row['cpu_s']} s "
                          f"ctxt/s={row['ctxt_per_s']}",
                          file=sys.stderr, flush=True)
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return 0
    print(f"{'hz':>5s} {'cpus':>4s} {'setup':28s} {'cpu s':>7s} "
          f"{'ctxt/s':>8s} {'vs sysidle':>10s} {'vs vmm':>7s}")

    def same(r, hz, n, setup):
        return next((x for x in rows if x["hz"] == hz and x["cpus"] == n and
                     x["setup"] == setup and x["status"] == "ok"), None)

    def ratio(v, base):
        if base is None:
            return "-"  # nothing to compare with
        if base == 0:
            return "inf" if v else "1x"
        return f"{v / base:.2f}x"

    for tick in ticks:
        suffix = "" if tick == "default" else " tick=lapic"
        for hz in hzs:
            for n in cpus:
                sysidle = same(None, hz, n, "vmm-sysidle" + suffix)
                plain = same(None, hz, n, "vmm" + suffix)
                for r in rows:
                    if (r["hz"] != hz or r["cpus"] != n or
                            not r["setup"].endswith(suffix) or
                            (not suffix and "tick=" in r["setup"])):
                        continue
                    if r["status"] != "ok":
                        print(f"{hz:5d} {n:4d} {r['setup']:28s} "
                              f"{r['status']:>7s}")
                        continue
                    print(f"{hz:5d} {n:4d} {r['setup']:28s} "
                          f"{r['cpu_s']:7.3f} {r['ctxt_per_s']:8.1f} "
                          f"{ratio(r['ctxt_per_s'], sysidle and sysidle['ctxt_per_s']):>10s} "
                          f"{ratio(r['ctxt_per_s'], plain and plain['ctxt_per_s']):>7s}")
    ok = [r for r in rows if r["status"] == "ok"]
    for name in sorted({r["setup"] for r in ok}):
        vals = [r["ctxt_per_s"] for r in ok if r["setup"] == name]
        cpu = [r["cpu_s"] for r in ok if r["setup"] == name]
        print(f"# {name}: median {statistics.median(vals):.1f} context "
              f"switches/s, {statistics.median(cpu):.3f} CPU s, over "
              f"{len(vals)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
