#!/usr/bin/env python3
"""Interrupt round trips under this VMM and under QEMU, side by side.

Boots the same guest image, pingpong.elf, in three setups, interleaved in
one run: this VMM (userspace LAPIC), QEMU with kernel-irqchip=off
(userspace LAPIC) and QEMU with kernel-irqchip=on (in-kernel LAPIC). Two
measurements, both taken by the guest from its TSC:

  ipi    IPI ping-pong between CPU 0 and CPU 1 (round trip)
  timer  a one-shot LAPIC timer at the shortest delay: arm -> handler

Each run prints the guest's median; the table shows, per setup and mode,
the median of those medians over --repeat runs and the ratio to this VMM.
Every run is bounded by --timeout and killed with SIGKILL on expiry; such
a run is reported as "hung", not dropped. QEMU 7.2 on some hosts aborts
with -cpu host ("failed to set MSR 0x10a"), so arch-capabilities is off.

Not a test: numbers only, for the closing note of a change.
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

RESULT = re.compile(
    r"pingpong: (ipi|timer): rounds=(\d+) min=(\d+) median=(\d+) max=(\d+) ns")


def setups(build, image):
    qemu = shutil.which("qemu-system-x86_64")
    vmm = os.path.join(build, "vmm")
    out = []
    if os.access(vmm, os.X_OK):
        out.append(("vmm", lambda app: [vmm, "--cpus", "2", "--append", app,
                                        image], 0))
    if qemu:
        base = [qemu, "-enable-kvm", "-smp", "2", "-m", "256", "-kernel",
                image, "-device", "isa-debug-exit,iobase=0xf4,iosize=4",
                "-display", "none", "-serial", "stdio", "-no-reboot",
                "-nodefaults"]
        out.append(("qemu-irqchip-off", lambda app: base + [
            "-machine", "pc,kernel-irqchip=off",
            "-cpu", "host,kvm-asyncpf-int=off,-arch-capabilities",
            "-append", app], 1))
        out.append(("qemu-irqchip-on", lambda app: base + [
            "-machine", "pc,kernel-irqchip=on",
            "-cpu", "host,-arch-capabilities", "-append", app], 1))
    return out


def run_one(cmd, ok_status, timeout):
    """Returns (median_ns or None, note)."""
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return None, "hung"
    finally:
        # Ctrl-C or SIGTERM: the guest runs in its own session, so
        # nothing else would stop it.
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    m = RESULT.search(out)
    if p.returncode != ok_status or not m:
        tail = out.strip().splitlines()[-1:] or ["(no output)"]
        return None, f"exit {p.returncode}: {tail[0][:80]}"
    return int(m.group(4)), "ok"


def main():
    # SIGTERM unwinds like Ctrl-C, so run_one() still kills its guest.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build",
                    help="meson build directory (default: build)")
    ap.add_argument("--rounds", type=int, default=2000,
                    help="round trips per run (default 2000)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs per setup and mode (default 3)")
    ap.add_argument("--timeout", type=float, default=120,
                    help="seconds before a run is killed (default 120)")
    ap.add_argument("--json", action="store_true",
                    help="one JSON object per setup and mode")
    args = ap.parse_args()
    if args.rounds < 1 or args.repeat < 1 or args.timeout <= 0:
        ap.error("--rounds, --repeat and --timeout must be positive")
    image = os.path.join(args.build, "guest-tools", "pingpong.elf")
    if not os.path.exists(image):
        sys.exit(f"vmm-rtt: {image} not found: build first (ninja -C {args.build})")
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        sys.exit("vmm-rtt: /dev/kvm is not usable here")
    runs = {}
    for rep in range(args.repeat):
        for mode in ("ipi", "timer"):
            app = f"mode={mode} rounds={args.rounds}"
            for name, cmd, ok in setups(args.build, image):
                med, note = run_one(cmd(app), ok, args.timeout)
                runs.setdefault((name, mode), []).append((med, note))
                print(f"# run {rep + 1}/{args.repeat} {name:17s} {mode:5s} "
                      f"{med if med is not None else '-':>8} ns  {note}",
                      file=sys.stderr, flush=True)
    rows = []
    for (name, mode), rs in runs.items():
        meds = [m for m, _ in rs if m is not None]
        rows.append({"setup": name, "mode": mode, "runs": len(rs),
                     "ok": len(meds),
                     "hung": sum(1 for _, n in rs if n == "hung"),
                     "median_ns": statistics.median(meds) if meds else None,
                     "failures": [n for m, n in rs if m is None]})
    base = {r["mode"]: r["median_ns"] for r in rows if r["setup"] == "vmm"}
    for r in rows:
        b = base.get(r["mode"])
        r["vs_vmm"] = round(r["median_ns"] / b, 2) \
            if b and r["median_ns"] else None
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return 0
    print(f"{'mode':6s} {'setup':17s} {'median ns':>10s} {'vs vmm':>7s} "
          f"{'ok/runs':>8s} {'hung':>5s}")
    for r in sorted(rows, key=lambda r: (r["mode"], r["setup"])):
        med = f"{r['median_ns']:.0f}" if r["median_ns"] else "-"
        ratio = f"{r['vs_vmm']:.2f}x" if r["vs_vmm"] else "-"
        print(f"{r['mode']:6s} {r['setup']:17s} {med:>10s} {ratio:>7s} "
              f"{r['ok']:>4d}/{r['runs']:<3d} {r['hung']:>5d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
