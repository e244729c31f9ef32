#!/usr/bin/env python3
"""One guest of many vCPUs under this VMM with --sysidle: what its boot,
its way into full idle and its idleness cost, by vCPU count.

For each count of --vcpus (default 64,256,1024) it boots idle.elf (every
CPU brought up by INIT-SIPI-SIPI at the APIC ID the MADT gives it, x2APIC
IDs above 255; CPU 0 keeps the pv tick at --hz) and measures:

  up         the CPUs the guest says it brought up
  boot_s     from the spawn to the guest's "idle: N cpus up" line, printed
             by CPU 0 when the last AP is up and halted; CPU 0 then halts
  full_ms    from reading that line to FULL_NOTED (the state's since_unix_ms
             in the control socket's status): the sysidle state machine's
             delays, which grow with the vCPU count ((N + 15) / 16 ms each
             of SHORT->LONG and LONG->FULL, as Linux's), and its scans
  wakeups/s  host context switches per second, all threads of the VMM
             process (voluntary + nonvoluntary, /proc/PID/task/*/status),
             over a --window second window in FULL_NOTED, --settle s
             after it was reached
  cpu_%      host CPU time of the process over that window
  rss_mib    Rss of the process, and pss_mib its Pss (smaps_rollup),
             guest RAM the guest touched included
  threads    the process's threads (one per vCPU, housekeeping, export...)

A count whose boot does not end in --timeout seconds is killed and
reported as hung. Every VMM started is stopped by PID, whatever ends the
run. The last line: "vcpu-scale: N vCPUs up in B s, FULL_NOTED F ms
after, W wake-ups/s idle, R MiB RSS" for the largest count.

Not a test: numbers for the closing note of a change.
"""
import argparse
import os
import sys
import tempfile
import time

from statistics import median

from benchrun import Run, kill_live, vm_status as status  # noqa: E402
from benchstats import proc_cpu_s, proc_ctxt, proc_mem_kib, proc_threads  # noqa: E402

def wait_full_noted(run, sock):
    """The status once the VM is in FULL_NOTED, polled until run's
    deadline; None when it never gets there (or the VMM ended)."""
    while run.left() > 0 and run.p.poll() is None:
        st = status(sock)
        if st and st.get("state") == "FULL_NOTED":
            return st
        time.sleep(0.02)  # a bounded poll of a state the VMM publishes
    return None


def measure(args, n, tmp):
    """One boot of n vCPUs; a dict of the figures, or one with "error"."""
    sock = os.path.join(tmp, f"vm{n}.sock")
    cmd = [os.path.join(args.build, "vmm"), "--sysidle", "--cpus", str(n),
           "--mem", args.mem, "--control", sock, "--name", f"scale-{n}",
           "--append", f"hz={args.hz}", args.image]
    run = Run(cmd, args.timeout)
    try:
        if not run.read_until(b" cpus up"):
            return {"n": n, "error": "hung" if run.hung else "no boot"}
        line_ms = time.time() * 1000
        boot_s = time.monotonic() - run.t0
        line = run.out.decode(errors="replace").split(" cpus up")[0]
        up = int(line.rsplit(" ", 1)[-1])
        st = wait_full_noted(run, sock)
        if st is None:
            return {"n": n, "error": "no FULL_NOTED", "up": up}
        full_ms = st["since_unix_ms"] - line_ms
        pid = run.p.pid
        time.sleep(args.settle)  # the threads the status request woke settle
        c0, t0, w0 = proc_ctxt(pid), proc_cpu_s(pid), time.monotonic()
        time.sleep(args.window)  # the measurement window itself
        c1, t1, w1 = proc_ctxt(pid), proc_cpu_s(pid), time.monotonic()
        st1 = status(sock)
        rss, pss = proc_mem_kib(pid)
        return {
            "n": n, "up": up, "boot_s": boot_s, "full_ms": full_ms,
            "wakeups_s": (c1 - c0) / (w1 - w0),
            "cpu_pct": 100.0 * (t1 - t0) / (w1 - w0),
            "rss_mib": rss / 1024, "pss_mib": pss / 1024,
            "threads": proc_threads(pid),
            "stayed": bool(st1) and st1.get("state") == "FULL_NOTED" and
                      st1.get("since_unix_ms") == st["since_unix_ms"],
        }
    finally:
        run.signal(15)
        run.finish()


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default="build", help="build directory "
                    "with vmm and guest-tools/idle.elf (default build)")
    ap.add_argument("--vcpus", default="64,256,1024",
                    help="comma-separated vCPU counts, 1..1024 "
                    "(default 64,256,1024)")
    ap.add_argument("--mem", default="64M", help="guest RAM (default 64M; "
                    "the guest's AP stacks need 16 MiB + 16 KiB per CPU)")
    ap.add_argument("--hz", type=int, default=250,
                    help="the guest's tick on CPU 0 (default 250)")
    ap.add_argument("--window", type=float, default=10.0,
                    help="seconds measured in full idle (default 10)")
    ap.add_argument("--settle", type=float, default=1.0,
                    help="seconds from FULL_NOTED to the window (default 1)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="boots per count, medians reported (default 1)")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="seconds a boot may take to full idle, per "
                    "count (default 300)")
    args = ap.parse_args()
    try:
        counts = [int(x) for x in args.vcpus.split(",")]
    except ValueError:
        ap.error(f"--vcpus {args.vcpus!r}: expected numbers separated by "
                 "commas")
    if not counts or any(c < 1 or c > 1024 for c in counts):
        ap.error("--vcpus: each count must be 1..1024")
    if args.repeat < 1 or args.window <= 0 or args.timeout <= 0 or \
            args.settle < 0:
        ap.error("--repeat, --window and --timeout must be positive, "
                 "--settle not negative")
    args.image = os.path.join(args.build, "guest-tools", "idle.elf")
    for f in (os.path.join(args.build, "vmm"), args.image):
        if not os.path.exists(f):
            sys.exit(f"vcpu-scale: {f}: not found (build first)")
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        sys.exit("vcpu-scale: /dev/kvm is not usable here: nothing to "
                 "measure")

    keys = ("up", "boot_s", "full_ms", "wakeups_s", "cpu_pct", "rss_mib",
            "pss_mib", "threads")
    print(f"{'vcpus':>6} {'up':>5} {'boot_s':>7} {'full_ms':>8} "
          f"{'wakeups/s':>9} {'cpu_%':>6} {'rss_mib':>8} {'pss_mib':>8} "
          f"{'threads':>7}  stayed")
    rows = {}
    try:
        with tempfile.TemporaryDirectory(prefix="vcpu-scale.") as tmp:
            for n in counts:
                got = []
                for _ in range(args.repeat):
                    r = measure(args, n, tmp)
                    if "error" in r:
                        print(f"{n:>6} {r['error']}", flush=True)
                        break
                    got.append(r)
                if not got:
                    continue
                row = {k: median([g[k] for g in got]) for k in keys}
                row["stayed"] = all(g["stayed"] for g in got)
                rows[n] = row
                print(f"{n:>6} {row['up']:>5.0f} {row['boot_s']:>7.2f} "
                      f"{row['full_ms']:>8.1f} {row['wakeups_s']:>9.2f} "
                      f"{row['cpu_pct']:>6.2f} {row['rss_mib']:>8.1f} "
                      f"{row['pss_mib']:>8.1f} {row['threads']:>7.0f}  "
                      f"{'yes' if row['stayed'] else 'NO'}", flush=True)
    finally:
        kill_live()
    if not rows:
        sys.exit("vcpu-scale: no count booted")
    n = max(rows)
    r = rows[n]
    print(f"vcpu-scale: {r['up']:.0f} vCPUs up in {r['boot_s']:.2f} s, "
          f"FULL_NOTED {r['full_ms']:.0f} ms after, {r['wakeups_s']:.2f} "
          f"wake-ups/s idle, {r['rss_mib']:.1f} MiB RSS")


if __name__ == "__main__":
    main()
