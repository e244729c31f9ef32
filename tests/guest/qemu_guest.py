#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Boot a guest-tools image under QEMU/KVM and judge it (TAP on stdout).

Success: QEMU exits with status 1 (isa-debug-exit: (0 << 1) | 1), the guest
printed no "FAIL - " line and printed a line matching --expect. Every run
is bounded: on expiry QEMU is killed (SIGKILL, by PID) and the test fails
with "QEMU hung". Without qemu-system-x86_64 or a usable /dev/kvm the test
says why and exits 77 (skip); it never passes then.
"""
import argparse
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import time

SKIP = 77

# QEMU 7.2 with "-cpu host" aborts on some nested KVM hosts that refuse
# IA32_ARCH_CAPABILITIES ("failed to set MSR 0x10a"); retry without it.
CPU_FALLBACK = 'host,-arch-capabilities'


def diag(line):
    print('# ' + line.rstrip('\r\n'), flush=True)


def run_qemu(qemu, cpu, args, timeout):  # -> status, hung, output, seconds, until-seen
    cmd = [qemu, '-enable-kvm', '-cpu', cpu, '-kernel', args.kernel,
           '-append', args.append,
           '-device', 'isa-debug-exit,iobase=0xf4,iosize=4',
           '-smp', str(args.smp), '-m', str(args.mem),
           '-display', 'none', '-serial', 'stdio', '-monitor', 'none',
           '-no-reboot']
    diag('$ ' + ' '.join(repr(c) if ' ' in c or not c else c for c in cmd))
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    out = b''
    hung = False
    seen = None  # when the --until line appeared
    while True:
        now = time.monotonic()
        if seen is not None and now - seen >= args.linger:
            os.kill(proc.pid, signal.SIGKILL)  # booted and still running: done
            break
        left = start + timeout - now
        if left <= 0:
            hung = True
            break
        if not sel.select(min(left, 1.0)):
            if proc.poll() is not None:
                break
            continue
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            break
        out += chunk
        if (seen is None and args.until and
                any(re.search(args.until, l.rstrip('\r'))
                    for l in out.decode('utf-8', 'replace').splitlines())):
            seen = time.monotonic()
    if hung:
        os.kill(proc.pid, signal.SIGKILL)
    try:
        status = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        status = proc.wait()
    rest = proc.stdout.read()
    if rest:
        out += rest
    proc.stdout.close()
    if seen is not None and hung:
        hung = False
    return status, hung, out.decode('utf-8', 'replace'), time.monotonic() - start, seen


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--name', required=True)
    ap.add_argument('--kernel', required=True)
    ap.add_argument('--append', default='')
    ap.add_argument('--smp', type=int, default=1)
    ap.add_argument('--mem', type=int, default=256)
    ap.add_argument('--timeout', type=float, default=90.0,
                    help='seconds before QEMU is killed as hung')
    ap.add_argument('--expect', action='append', default=[],
                    help='regex a guest line must match (repeatable)')
    ap.add_argument('--status', type=int, default=1,
                    help='expected QEMU exit status: (guest code << 1) | 1')
    ap.add_argument('--until', default=None,
                    help='for images that never exit: success once a guest line matches '
                         'this regex and the guest is still running --linger s later')
    ap.add_argument('--linger', type=float, default=1.0)
    ap.add_argument('--cpu', default=os.environ.get('GUEST_TEST_QEMU_CPU', 'host'))
    args = ap.parse_args()

    qemu = shutil.which(os.environ.get('QEMU', 'qemu-system-x86_64'))
    if not qemu:
        print('1..0 # SKIP qemu-system-x86_64 not found in PATH')
        print('skip: qemu-system-x86_64 is not installed', file=sys.stderr)
        return SKIP
    if not os.path.exists('/dev/kvm') or not os.access('/dev/kvm', os.R_OK | os.W_OK):
        print('1..0 # SKIP /dev/kvm missing or not accessible')
        print('skip: /dev/kvm is missing or not accessible', file=sys.stderr)
        return SKIP
    if not os.path.exists(args.kernel):
        print(f'1..1\nnot ok 1 - {args.name} # image {args.kernel} missing')
        return 1

    print('1..1', flush=True)
    status, hung, out, secs, seen = run_qemu(qemu, args.cpu, args, args.timeout)
    if (not hung and args.cpu == 'host' and status != args.status
            and 'failed to set MSR 0x10a' in out):
        diag(f'QEMU refused -cpu host here (MSR 0x10a); retrying with -cpu {CPU_FALLBACK}')
        status, hung, out, secs, seen = run_qemu(qemu, CPU_FALLBACK, args, args.timeout)

    for line in out.splitlines():
        diag(line)
    lines = [l.rstrip('\r') for l in out.splitlines()]
    fails = [l for l in lines if l.startswith('FAIL - ')]
    missing = [e for e in args.expect if not any(re.search(e, l) for l in lines)]

    why = []
    if hung:
        why.append(f'QEMU hung (killed with SIGKILL after {args.timeout:.0f} s)')
    elif args.until:
        if seen is None:
            why.append(f'QEMU exited (status {status}) before a line matched {args.until!r}')
    elif status != args.status:
        guest = f' = guest exit code {(status - 1) // 2}' if status > 1 and status % 2 else ''
        why.append(f'QEMU exit status {status}{guest}, want {args.status}')
    if fails and args.status == 1:
        why.append(f'{len(fails)} guest check(s) failed: ' + '; '.join(fails[:3]))
    if missing:
        why.append('no guest line matched ' + ', '.join(repr(m) for m in missing))
    if why:
        print(f'not ok 1 - {args.name}: ' + ' / '.join(why) + f' ({secs:.1f} s)')
        return 1
    if args.until:
        print(f'ok 1 - {args.name} (booted, still running {args.linger:.1f} s later, '
              f'killed; {secs:.1f} s)')
    else:
        print(f'ok 1 - {args.name} (QEMU status {status}, {secs:.1f} s)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
