#!/usr/bin/env python3
"""What an idle guest costs its host: this VMM, with and without --sysidle,
and QEMU with the in-kernel and the userspace APIC, side by side.

Boots the same image, idle.elf (all CPUs halt; CPU 0 keeps a periodic tick
at hz=), under four setups, interleaved in one run:

  vmm               this VMM
  vmm-sysidle       this VMM with --sysidle
  qemu-irqchip-on   QEMU, in-kernel LAPIC (kernel-irqchip=on)
  qemu-irqchip-off  QEMU, userspace LAPIC (kernel-irqchip=off)

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
import shutil
import signal
import statistics
import subprocess
import sys
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_ctxt(pid):
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches",
                                        "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass  # a thread that just ended
    return total


def setups(build, image, want):
    vmm = os.path.join(build, "vmm")
    qemu = shutil.which("qemu-system-x86_64")
    out = {}
    # No control socket: these runs end with SIGKILL, which would leave
    # stale sockets in /run/sysidle.
    out["vmm"] = lambda n, app: [vmm, "--control", "none", "--cpus", str(n),
                                 "--append", app, image]
    out["vmm-sysidle"] = lambda n, app: [vmm, "--control", "none",
                                         "--sysidle", "--cpus", str(n),
                                         "--append", app, image]
    if qemu:
        def q(n, app, chip, cpu):
            return [qemu, "-enable-kvm", "-smp", str(n), "-m", "256",
                    "-machine", f"pc,kernel-irqchip={chip}", "-cpu", cpu,
                    "-kernel", image, "-append", app,
                    "-device", "isa-debug-exit,iobase=0xf4,iosize=4",
                    "-display", "none", "-serial", "stdio", "-nodefaults",
                    "-no-reboot"]
        out["qemu-irqchip-on"] = lambda n, app: q(
            n, app, "on", "host,-arch-capabilities")
        out["qemu-irqchip-off"] = lambda n, app: q(
            n, app, "off", "host,kvm-asyncpf-int=off,-arch-capabilities")
    return {k: v for k, v in out.items() if k in want}


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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--hz", default="250,1000", help="tick rates (250,1000)")
    ap.add_argument("--cpus", default="1,2,4,8", help="vCPU counts (1,2,4,8)")
    ap.add_argument("--setups",
                    default="vmm,vmm-sysidle,qemu-irqchip-on,qemu-irqchip-off")
    ap.add_argument("--window", type=float, default=10,
                    help="steady window, seconds (10)")
    ap.add_argument("--settle", type=float, default=2,
                    help="seconds after boot before the window (2)")
    ap.add_argument("--timeout", type=float, default=60,
                    help="seconds to wait for boot (60)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
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
    runs = setups(args.build, image, args.setups.split(","))
    rows = []
    for hz in hzs:
        for n in cpus:
            for name, cmd in runs.items():
                res, note = measure(cmd(n, f"hz={hz}"), args.timeout,
                                    args.settle, args.window)
                row = {"setup": name, "hz": hz, "cpus": n, "status": note,
                       "cpu_s": res and res["cpu_s"],
                       "ctxt_per_s": res and res["ctxt_per_s"]}
                rows.append(row)
                print(f"# {name:17s} hz={hz:<5d} cpus={n:<2d} {note:5s} "
                      f"cpu={row['cpu_s']} s ctxt/s={row['ctxt_per_s']}",
                      file=sys.stderr, flush=True)
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return 0
    print(f"{'hz':>5s} {'cpus':>4s} {'setup':17s} {'cpu s':>7s} "
          f"{'ctxt/s':>8s} {'vs sysidle':>10s}")
    for hz in hzs:
        for n in cpus:
            base = next((r["ctxt_per_s"] for r in rows if r["hz"] == hz and
                         r["cpus"] == n and r["setup"] == "vmm-sysidle"),
                        None)
            for r in rows:
                if r["hz"] != hz or r["cpus"] != n:
                    continue
                if r["status"] != "ok":
                    print(f"{hz:5d} {n:4d} {r['setup']:17s} "
                          f"{r['status']:>7s}")
                    continue
                if base is None:
                    ratio = "-"  # no --sysidle run to compare with
                elif base == 0:
                    ratio = "inf" if r["ctxt_per_s"] else "1x"
                else:
                    ratio = f"{r['ctxt_per_s'] / base:.0f}x"
                print(f"{hz:5d} {n:4d} {r['setup']:17s} {r['cpu_s']:7.3f} "
                      f"{r['ctxt_per_s']:8.1f} {ratio:>10s}")
    ok = [r for r in rows if r["status"] == "ok"]
    for name in runs:
        vals = [r["ctxt_per_s"] for r in ok if r["setup"] == name]
        if vals:
            print(f"# {name}: median {statistics.median(vals):.1f} "
                  f"context switches/s over {len(vals)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
