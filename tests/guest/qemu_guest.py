#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Boot a guest-tools image under QEMU/KVM and judge it (TAP on stdout);
without a usable /dev/kvm, under QEMU's TCG with platform=tcg appended to
its command line (unless --needs-kvm).

Success: QEMU exits with status 1 (isa-debug-exit: (0 << 1) | 1), the guest
printed no "FAIL - " line and printed a line matching --expect. Every run
is bounded: on expiry QEMU is killed (SIGKILL, by PID) and the test fails
with "QEMU hung". Without qemu-system-x86_64, or without a usable /dev/kvm
for an image that needs KVM's CPU (--needs-kvm), the test says why and
exits 77 (skip); it never passes then.

--send types text on the guest's serial port (QEMU's stdin) once a line
matches --send-after; --runs N boots the image N times (each run must pass)
and --same REGEX requires the first line matching it to be identical in all.
--attempts N passes when one of N tries passes (each failed try is shown).
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
    accel = ['-enable-kvm'] if args.accel == 'kvm' else ['-accel', 'tcg']
    cmd = [qemu] + accel + ['-cpu', cpu, '-kernel', args.kernel,
           '-append', args.append,
           '-device', 'isa-debug-exit,iobase=0xf4,iosize=4',
           '-smp', str(args.smp), '-m', str(args.mem),
           '-display', 'none', '-serial', 'stdio', '-monitor', 'none',
           '-no-reboot']
    diag('$ ' + ' '.join(repr(c) if ' ' in c or not c else c for c in cmd))
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if args.send else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    out = b''
    hung = False
    seen = None  # when the --until line appeared
    sends = list(args.send)  # serial input still to type, one item per --send
    send_at = None           # when to type the next one
    # After the first item the next one also waits for a guest line printed
    # since the previous one went out (its answer): a loaded host can keep
    # the guest from taking an item for longer than --send-gap, and two
    # items then arrive as one.
    sent_nl = None           # newlines in the output when the last item went
    sent_t = None
    while True:
        now = time.monotonic()
        if sends and send_at is None and sent_nl is None and any(
                re.search(args.send_after, l.rstrip('\r'))
                for l in out.decode('utf-8', 'replace').splitlines()):
            send_at = now + args.send_gap
        elif sends and send_at is None and sent_nl is not None and \
                out.count(b'\n') > sent_nl:
            send_at = max(now, sent_t + args.send_gap)
        if sends and send_at is not None and now >= send_at:
            try:
                proc.stdin.write(sends.pop(0).encode())
                proc.stdin.flush()
            except OSError:
                sends = []
            send_at = None
            sent_nl, sent_t = out.count(b'\n'), now
        if seen is not None and now - seen >= args.linger:
            os.kill(proc.pid, signal.SIGKILL)  # booted and still running: done
            break
        left = start + timeout - now
        if left <= 0:
            hung = True
            break
        if not sel.select(min(left, 0.1 if sends else 1.0)):
            if proc.poll() is not None:
                break
            continue
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            break
        out += chunk
        done_lines = out[:out.rfind(b'\n') + 1].decode('utf-8', 'replace')
        if args.reject and any(re.search(r, l.rstrip('\r'))
                               for l in done_lines.splitlines()
                               for r in args.reject):
            # judged failed whatever follows: end it now, so that the
            # attempts left still fit in the test's time
            diag('a --reject line appeared: QEMU killed')
            os.kill(proc.pid, signal.SIGKILL)
            break
        if (seen is None and args.until and
                sum(1 for l in out.decode('utf-8', 'replace').splitlines()
                    if re.search(args.until, l.rstrip('\r'))) >= args.until_count):
            seen = time.monotonic()
    if hung:
        os.kill(proc.pid, signal.SIGKILL)
    if proc.stdin:
        try:
            proc.stdin.close()
        except OSError:
            pass
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
    ap.add_argument('--until-count', type=int, default=1,
                    help='with --until: that many lines must match')
    ap.add_argument('--linger', type=float, default=1.0)
    ap.add_argument('--reject', action='append', default=[],
                    help='regex no guest line may match (repeatable)')
    ap.add_argument('--send', action='append', default=[],
                    help='text to type on the guest serial port once a line matches '
                         '--send-after (repeatable: one item every --send-gap s, each '
                         'once the guest printed a line after the one before)')
    ap.add_argument('--send-after', default='.',
                    help='regex of the guest line that --send waits for')
    ap.add_argument('--send-gap', type=float, default=0.5)
    ap.add_argument('--runs', type=int, default=1,
                    help='boot the image this many times; each run must pass')
    ap.add_argument('--attempts', type=int, default=1,
                    help='boot up to this many times until one passes (for checks a loaded '
                         'host can spoil: every failed attempt is shown)')
    ap.add_argument('--same', default=None,
                    help='regex: the first line matching it must be identical in every run')
    ap.add_argument('--cpu', default=os.environ.get('GUEST_TEST_QEMU_CPU', 'host'))
    ap.add_argument('--needs-kvm', default=None, metavar='WHY',
                    help='skip (77) without a usable /dev/kvm, saying WHY; '
                         'otherwise such a host runs the image under TCG')
    args = ap.parse_args()

    qemu = shutil.which(os.environ.get('QEMU', 'qemu-system-x86_64'))
    if not qemu:
        print('1..0 # SKIP qemu-system-x86_64 not found in PATH')
        print('skip: qemu-system-x86_64 is not installed', file=sys.stderr)
        return SKIP
    args.accel = 'kvm'
    if not os.path.exists('/dev/kvm') or not os.access('/dev/kvm', os.R_OK | os.W_OK):
        if args.needs_kvm:
            print(f'1..0 # SKIP no usable /dev/kvm: {args.needs_kvm}')
            print(f'skip: no usable /dev/kvm: {args.needs_kvm}', file=sys.stderr)
            return SKIP
        args.accel = 'tcg'
        args.append = (args.append + ' platform=tcg').strip()
        if args.cpu == 'host':
            args.cpu = 'max'
        diag('/dev/kvm missing or not accessible: QEMU emulates the CPU (TCG)')
    if not os.path.exists(args.kernel):
        print(f'1..1\nnot ok 1 - {args.name} # image {args.kernel} missing')
        return 1

    print('1..1', flush=True)
    cpu = args.cpu
    for attempt in range(1, args.attempts + 1):
        if args.attempts > 1:
            diag(f'attempt {attempt} of {args.attempts}')
        cpu, why, secs, status = attempt_all(qemu, cpu, args)
        if not why:
            break
        if attempt < args.attempts:
            diag(f'attempt {attempt} failed: {why}')
    if why:
        print(f'not ok 1 - {args.name}: {why}')
        return 1
    again = f', attempt {attempt} of {args.attempts}' if attempt > 1 else ''
    if args.until:
        print(f'ok 1 - {args.name} (booted, still running {args.linger:.1f} s later, '
              f'killed; {secs:.1f} s{again})')
    else:
        print(f'ok 1 - {args.name} (QEMU status {status}, {secs:.1f} s'
              + (f', {args.runs} runs' if args.runs > 1 else '') + again + ')')
    return 0


def attempt_all(qemu, cpu, args):  # -> cpu, why (None: passed), seconds, status
    same = []  # the first --same match of each run
    for run in range(1, args.runs + 1):
        if args.runs > 1:
            diag(f'run {run} of {args.runs}')
        status, hung, out, secs, seen = run_qemu(qemu, cpu, args, args.timeout)
        if (not hung and cpu == 'host' and status != args.status
                and 'failed to set MSR 0x10a' in out):
            diag(f'QEMU refused -cpu host here (MSR 0x10a); retrying with -cpu {CPU_FALLBACK}')
            cpu = CPU_FALLBACK
            status, hung, out, secs, seen = run_qemu(qemu, cpu, args, args.timeout)
        why = judge(args, status, hung, out, secs, seen, run)
        if why:
            return cpu, why, secs, status
        if args.same:
            hit = [l.rstrip('\r') for l in out.splitlines() if re.search(args.same, l.rstrip('\r'))]
            same.append(hit[0] if hit else None)
    if args.same:
        if None in same or len(set(same)) != 1:
            return cpu, (f'the line matching {args.same!r} differs between runs: '
                         + ' / '.join(repr(l) for l in same)), secs, status
        diag(f'all {args.runs} runs printed: {same[0]}')
    return cpu, None, secs, status


def judge(args, status, hung, out, secs, seen, run):  # -> None (passed) or why not
    for line in out.splitlines():
        diag(line)
    lines = [l.rstrip('\r') for l in out.splitlines()]
    fails = [l for l in lines if l.startswith('FAIL - ')]
    missing = [e for e in args.expect if not any(re.search(e, l) for l in lines)]
    rejected = [l for l in lines if any(re.search(r, l) for r in args.reject)]

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
    if rejected:
        why.append('rejected guest line(s): ' + '; '.join(repr(l) for l in rejected[:3]))
    if why:
        where = f'run {run}: ' if args.runs > 1 else ''
        return where + ' / '.join(why) + f' ({secs:.1f} s)'
    return None


if __name__ == '__main__':
    sys.exit(main())
