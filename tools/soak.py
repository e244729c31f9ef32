#!/usr/bin/env python3
"""Soak run: many VMs under --sysidle for a long time, with random wake-ups,
control clients and hooks; fails on resource growth or an unclean exit.

usage: soak.py [--build DIR] [--vms N] [--duration S] [--warmup S]
               [--interval S] [--seed N] [--clients N] [--event-mean S]
               [--csv FILE] [--keep]

Each VM gets a private control socket, metrics file, stats file and hooks
directory in one temporary directory. Guests (build/guest-tools and the
VMM's test guests) go idle and wake by themselves now and then (burst.elf's
seeded rounds, the pv or LAPIC tick); the host adds wake-ups at random
times from a seeded RNG: serial input, SIGUSR2, kick, pause and resume.
Concurrently, control clients (sysidlectl status/list/watch and raw socket
clients that stay silent, vanish mid-request or never read) talk to random
VMs. Every --interval seconds each VM process is sampled: RSS (VmRSS), open
fds and threads.

It fails (exit 1, each reason on its own line) when, after --warmup:
  - a VM's RSS grew by more than max(1 MiB, 5%): the median of the last
    samples against the median of the first samples after warm-up (k =
    max(3, a tenth of the post-warm-up samples) each);
  - a VM's open fds or threads differ between two quiescent points (right
    after warm-up and at the end: no client connected, no host event in
    flight, no hook running, the same fd list twice in a row);
and when a VM exited before the end; did not exit with status 143 within
2 s of SIGTERM (plus two --hook-timeouts for a VM whose hook hangs); left
a sanitizer report on stderr, no parseable stats JSON, a metrics file
without `sysidle_vm_up 0`, its socket file, or a hook process; its hooks
did not see started, then idle begin/end alternating, then stopped; or a
control request that should have worked did not. Exit 2: bad usage or the
VMs could not start; 77: no usable /dev/kvm (skipped). Python 3 standard
library only.

Its parts, beside it: soak_run.py (the run: the VMs planned, started,
sampled and stopped), soak_vm.py (one VM, what is read of it in /proc),
soak_load.py (the host events and control clients), soak_checks.py (the
sampling, the quiescent points and every check, the report).
"""
import argparse
import os
import random
import sys

from soak_run import Soak


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build", help="the build directory")
    ap.add_argument("--vms", type=int, default=16)
    ap.add_argument("--duration", type=float, default=600,
                    help="seconds (default 600)")
    ap.add_argument("--warmup", type=float, default=None,
                    help="seconds before growth counts (default 60, or a "
                    "quarter of a shorter --duration)")
    ap.add_argument("--interval", type=float, default=5,
                    help="seconds between samples (default 5)")
    ap.add_argument("--seed", type=int, default=None,
                    help="the RNG seed (default: random, printed)")
    ap.add_argument("--clients", type=int, default=3,
                    help="concurrent control client threads (default 3)")
    ap.add_argument("--event-mean", type=float, default=20,
                    help="mean seconds between two host events for one VM "
                    "(default 20)")
    ap.add_argument("--csv", metavar="FILE",
                    help="also write every sample, one line per VM per "
                    "sample: t_s,vm,rss_kb,fds,threads,rss_anon_kb")
    ap.add_argument("--keep", action="store_true",
                    help="keep the temporary directory after a pass "
                    "(kept anyway after a failure or a finding)")
    o = ap.parse_args()
    if o.seed is None:
        o.seed = random.SystemRandom().randrange(1 << 31)
    if o.warmup is None:
        o.warmup = min(60.0, o.duration / 4)
    if o.vms < 1 or o.duration <= 0 or o.interval <= 0 or \
            not 0 <= o.warmup < o.duration or o.clients < 0 or \
            o.event_mean <= 0:
        ap.error("bad --vms, --duration, --warmup, --interval, --clients "
                 "or --event-mean")
    for exe in ("vmm", "sysidlectl"):
        if not os.access(os.path.join(o.build, exe), os.X_OK):
            ap.error("%s/%s is missing: build first" % (o.build, exe))
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        print("soak: skipped: /dev/kvm is not usable", file=sys.stderr)
        return 77
    return Soak(o).run()


if __name__ == "__main__":
    sys.exit(main())
