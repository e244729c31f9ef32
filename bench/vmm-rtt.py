#!/usr/bin/env python3
"""Interrupt round trips under this VMM and under QEMU, side by side.

Boots the same guest image, pingpong.elf, in several setups, interleaved
in one run (the order alternates with each repetition): this VMM
(userspace LAPIC), QEMU with kernel-irqchip=off (userspace LAPIC) and QEMU
with kernel-irqchip=on (in-kernel LAPIC), chosen with --setups; any number
of extra VMM setups with --setup NAME=ARGS (this VMM with ARGS added), and
with --baseline another VMM binary ("base"). Two measurements, both taken
by the guest from its TSC:

  ipi    IPI ping-pong between CPU 0 and CPU 1 (round trip)
  timer  a one-shot LAPIC timer at the shortest delay: arm -> handler

The guest prints every sample. Per setup and mode the table shows the p50
and p99 (nearest rank) over all samples of all runs (pooled), the median
of the per-run p50s and of the per-run p99s with their [min..max] over the
--repeat runs, the ratios of the pooled p50 and p99 to qemu-irqchip-on
(the target: <= 1.0) and to vmm, and the host CPU time the setup burnt
(user + sys of the VMM or QEMU process, all threads, from its rusage) per
round trip, with the median wall time of a run. The load average is
printed at the start and at the end: the figures are only as quiet as the
host.

Every run is bounded by --timeout and its process group killed with
SIGKILL on expiry; such a run is reported as "hung", not dropped. QEMU 7.2
on some hosts aborts with -cpu host ("failed to set MSR 0x10a"), so
arch-capabilities is off.

Not a test: numbers only, for the closing note of a change.
"""
import argparse
import json
import os
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import time

from benchstats import check_setups, parse_setup, vmm_binary, pct, spread, loadavg  # noqa: E402

RESULT = re.compile(
    r"pingpong: (ipi|timer): rounds=(\d+) min=(\d+) median=(\d+) max=(\d+) ns")
SAMPLES = re.compile(r"pingpong: (ipi|timer): samples=([0-9,]+) ns")
DEFAULT_SETUPS = ("vmm", "qemu-irqchip-off", "qemu-irqchip-on")






def make_setups(args, image):
    """[(name, cmd(app) -> argv, exit status of a good run)], or exits."""
    qemu = shutil.which("qemu-system-x86_64")
    vmm = os.path.join(args.build, "vmm")

    def vmm_cmd(binary, extra):
        return lambda app: [binary, "--cpus", "2"] + extra + [
            "--append", app, image]
    default = {"vmm": (vmm_cmd(vmm, []), 0)}
    if qemu:
        base = [qemu, "-enable-kvm", "-smp", "2", "-m", "256", "-kernel",
                image, "-device", "isa-debug-exit,iobase=0xf4,iosize=4",
                "-display", "none", "-serial", "stdio", "-no-reboot",
                "-nodefaults"]
        default["qemu-irqchip-off"] = (lambda app: base + [
            "-machine", "pc,kernel-irqchip=off",
            "-cpu", "host,kvm-asyncpf-int=off,-arch-capabilities",
            "-append", app], 1)
        default["qemu-irqchip-on"] = (lambda app: base + [
            "-machine", "pc,kernel-irqchip=on",
            "-cpu", "host,-arch-capabilities", "-append", app], 1)
    out = []
    for name in args.setups:
        if name not in DEFAULT_SETUPS:
            sys.exit(f"vmm-rtt: --setups: unknown setup {name!r} "
                     f"(known: {', '.join(DEFAULT_SETUPS)})")
        if name not in default:
            print(f"# {name}: skipped, qemu-system-x86_64 not found",
                  file=sys.stderr)
            continue
        if name == "vmm" and not os.access(vmm, os.X_OK):
            sys.exit(f"vmm-rtt: {vmm} not found: build first")
        out.append((name,) + default[name])
    if args.baseline:
        old = vmm_binary(args.baseline)
        if not os.access(old, os.X_OK):
            sys.exit(f"vmm-rtt: --baseline {args.baseline}: no VMM there")
        out.append(("base", vmm_cmd(old, []), 0))
    for name, extra in args.setup:
        if not os.access(vmm, os.X_OK):
            sys.exit(f"vmm-rtt: {vmm} not found: build first")
        out.append((name, vmm_cmd(vmm, extra), 0))
    check_setups("vmm-rtt", [n for n, _, _ in out])
    return out


def run_one(cmd, ok_status, timeout):
    """Returns (samples or None, note, cpu_s, wall_s). The output is read
    here (not with communicate()) so that the child is reaped by wait4 and
    its rusage, all threads, is the CPU time the run burnt."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True)
    out = b""
    hung = done = False
    try:
        deadline = t0 + timeout
        fd = p.stdout.fileno()
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                hung = True
                os.killpg(p.pid, signal.SIGKILL)
                deadline = float("inf")  # now read up to the EOF
                continue
            r, _, _ = select.select([fd], [], [], min(left, 3600))
            if r:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                out += chunk
        done = True
    finally:
        # Ctrl-C or SIGTERM: the guest runs in its own session, so
        # nothing else would stop it.
        if p.returncode is None:
            if not done:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            _, status, ru = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)
        p.stdout.close()
    cpu = ru.ru_utime + ru.ru_stime
    wall = time.monotonic() - t0
    if hung:
        return None, "hung", cpu, wall
    text = out.decode(errors="replace")
    m = RESULT.search(text)
    s = SAMPLES.search(text)
    if p.returncode != ok_status or not m:
        tail = text.strip().splitlines()[-1:] or ["(no output)"]
        return None, f"exit {p.returncode}: {tail[0][:80]}", cpu, wall
    if not s:
        return None, "no samples line (an older pingpong.elf?)", cpu, wall
    return [int(x) for x in s.group(2).split(",")], "ok", cpu, wall








def main():
    # SIGTERM unwinds like Ctrl-C, so run_one() still kills its guest.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="e.g. --setup 'nopoll=--halt-poll-ns 0' --setup "
        "'poll=--halt-poll-ns 200000' --baseline ../old/build")
    ap.add_argument("--build", default="build",
                    help="meson build directory (default: build)")
    ap.add_argument("--rounds", type=int, default=1000,
                    help="round trips per run (default 1000, at most 4096)")
    ap.add_argument("--repeat", type=int, default=5,
                    help="runs per setup and mode (default 5)")
    ap.add_argument("--timeout", type=float, default=120,
                    help="seconds before a run is killed (default 120)")
    ap.add_argument("--setups", default=",".join(DEFAULT_SETUPS),
                    help="default setups to run, comma-separated (default "
                    f"{','.join(DEFAULT_SETUPS)}; may be empty)")
    ap.add_argument("--setup", action="append", default=[],
                    metavar="NAME=ARGS",
                    help="an extra setup: this VMM with ARGS (shell words) "
                    "added before --append; repeatable")
    ap.add_argument("--baseline", metavar="PATH",
                    help="another VMM binary (or a build directory holding "
                    "one), run with no extra arguments as setup 'base'")
    ap.add_argument("--json", action="store_true",
                    help="one JSON object per setup and mode")
    args = ap.parse_args()
    if not 1 <= args.rounds <= 4096 or args.repeat < 1 or args.timeout <= 0:
        ap.error("--rounds (1..4096), --repeat and --timeout must be "
                 "positive")
    try:
        args.setup = [parse_setup(s) for s in args.setup]
    except ValueError as e:
        ap.error(str(e))
    args.setups = [s for s in args.setups.split(",") if s]
    image = os.path.join(args.build, "guest-tools", "pingpong.elf")
    if not os.path.exists(image):
        sys.exit(f"vmm-rtt: {image} not found: build first (ninja -C {args.build})")
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        sys.exit("vmm-rtt: /dev/kvm is not usable here")
    setups = make_setups(args, image)
    load0 = loadavg()
    t_start = time.monotonic()
    print(f"# load average at start: {load0[0]} {load0[1]} {load0[2]} "
          f"({os.cpu_count()} CPUs)", file=sys.stderr, flush=True)
    runs = {}
    for rep in range(args.repeat):
        order = setups if rep % 2 == 0 else setups[::-1]
        for mode in ("ipi", "timer"):
            app = f"mode={mode} rounds={args.rounds}"
            for name, cmd, ok in order:
                s, note, cpu, wall = run_one(cmd(app), ok, args.timeout)
                runs.setdefault((name, mode), []).append((s, note, cpu, wall))
                p50 = pct(sorted(s), 50) if s else "-"
                print(f"# run {rep + 1}/{args.repeat} {name:17s} {mode:5s} "
                      f"p50 {p50:>8} ns  cpu {cpu:6.2f} s  wall {wall:5.1f} s"
                      f"  {note}", file=sys.stderr, flush=True)
    load1 = loadavg()
    elapsed = time.monotonic() - t_start
    rows = []
    for name, _, _ in setups:
        for mode in ("ipi", "timer"):
            rs = runs.get((name, mode), [])
            good = [r for r in rs if r[0]]
            allv = sorted(v for s, _, _, _ in good for v in s)
            per_run = [sorted(s) for s, _, _, _ in good]
            cpu = sum(c for _, _, c, _ in good)
            rows.append({
                "setup": name, "mode": mode, "runs": len(rs),
                "ok": len(good), "hung": sum(1 for r in rs if r[1] == "hung"),
                "failures": [n for s, n, _, _ in rs if not s],
                "samples": len(allv),
                "min_ns": allv[0] if allv else None,
                "p50_ns": pct(allv, 50), "p99_ns": pct(allv, 99),
                "max_ns": allv[-1] if allv else None,
                "run_p50_ns": spread([pct(v, 50) for v in per_run]),
                "run_p99_ns": spread([pct(v, 99) for v in per_run]),
                "cpu_s": round(cpu, 3),
                "cpu_us_per_rt": round(cpu * 1e6 / len(allv), 2)
                if allv else None,
                "wall_s": round(statistics.median(
                    [w for _, _, _, w in good]), 2) if good else None,
                "loadavg_start": load0, "loadavg_end": load1})
    for r in rows:
        for ref, key in (("qemu-irqchip-on", "vs_qemu_on"),
                         ("vmm", "vs_vmm")):
            b = next((x for x in rows if x["setup"] == ref and
                      x["mode"] == r["mode"]), None)
            for k in ("p50", "p99"):
                v, bv = r[f"{k}_ns"], b and b[f"{k}_ns"]
                r[f"{key}_{k}"] = round(v / bv, 3) if v and bv else None
    if args.json:
        for r in rows:
            print(json.dumps(r))
    else:
        print_table(args, rows)
    print(f"# load average at end: {load1[0]} {load1[1]} {load1[2]}; "
          f"{elapsed:.0f} s in all", file=sys.stderr if args.json else
          sys.stdout)
    return 0


def print_table(args, rows):
    def us(v):
        return "-" if v is None else f"{v / 1000:.1f}"

    def rng(d):
        if d["median"] is None:
            return "-"
        return f"{us(d['median'])} [{us(d['min'])}..{us(d['max'])}]"

    def x(v):
        return "-" if v is None else f"{v:.2f}"
    w = max([17] + [len(r["setup"]) for r in rows])
    print(f"interrupt round trips, pingpong.elf, 2 vCPUs, {args.rounds} "
          f"rounds x {args.repeat} runs; us")
    print(f"{'mode':5s} {'setup':{w}s} {'n':>5s} {'p50':>7s} {'p99':>7s} "
          f"{'run p50 med [min..max]':>24s} {'run p99 med [min..max]':>24s} "
          f"{'p50/qon':>7s} {'p99/qon':>7s} {'p50/vmm':>7s} {'p99/vmm':>7s} "
          f"{'cpu us/rt':>9s} {'wall s':>6s} {'ok/runs':>7s} {'hung':>4s}")
    for r in sorted(rows, key=lambda r: r["mode"]):
        cpu = "-" if r["cpu_us_per_rt"] is None else \
            f"{r['cpu_us_per_rt']:.1f}"
        wall = "-" if r["wall_s"] is None else f"{r['wall_s']:.1f}"
        print(f"{r['mode']:5s} {r['setup']:{w}s} {r['samples']:5d} "
              f"{us(r['p50_ns']):>7s} {us(r['p99_ns']):>7s} "
              f"{rng(r['run_p50_ns']):>24s} {rng(r['run_p99_ns']):>24s} "
              f"{x(r['vs_qemu_on_p50']):>7s} {x(r['vs_qemu_on_p99']):>7s} "
              f"{x(r['vs_vmm_p50']):>7s} {x(r['vs_vmm_p99']):>7s} "
              f"{cpu:>9s} {wall:>6s} {r['ok']:>3d}/{r['runs']:<3d} "
              f"{r['hung']:4d}")
        for f in r["failures"]:
            print(f"      ! {f}")
    l0, l1 = rows[0]["loadavg_start"], rows[0]["loadavg_end"]
    print(f"# p50/p99: pooled over all samples (nearest rank); run p50/p99: "
          f"median [min..max] of the per-run figures; /qon, /vmm: pooled "
          f"ratio to qemu-irqchip-on (target <= 1.0) and to vmm; cpu us/rt: "
          f"user+sys of the process per round trip (boot included); wall s: "
          f"median per run; load average {l0[0]} at start, {l1[0]} at end")


if __name__ == "__main__":
    sys.exit(main())
