#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Run the x86 kvm-unit-tests sections under this VMM, as the upstream
runner runs them under QEMU.

Reads x86/unittests.cfg of a prebuilt kvm-unit-tests tree (--suite, else
$KVM_UNIT_TESTS, else ../shared/kvm-unit-tests beside the source tree) and
runs each section's x86/FILE under VMM: `smp` as --cpus, `test_args` as the
command line, `-m` from qemu_params/extra_params as --mem, the section's
`timeout` (default 90 s; SIGTERM, then SIGKILL 2 s later). A section is
SKIP, not FAIL, when its `arch` is not x86_64, it needs `accel = tcg`, a
`check =` precondition (PATH=VALUE) does not hold here, it is in the
`nodefault` group (unless named with --only), or its file was not built.
Every section runs with --device pc-testdev, as QEMU's runner adds
-device pc-testdev to every one; -device edu and -device intel-iommu
(intremap=on, eim=off) become --device too. The -cpu flags the VMM
has (VMM_CPU_FLAGS: +x2apic, -tsc-deadline, x2apic=off, ...) go to its
--cpu; what it cannot apply (-cpu models and other flags, other
-device, -machine) is listed in the line, not silently dropped.

The guest's code (written to the isa-debug-exit port, returned by the VMM
as its exit status; QEMU returns it as (code << 1) | 1, which is why the
suite writes 77 >> 1 for a skip and 127 >> 1 for an abort): 0 PASS, 38
SKIP, 63 FAIL (aborted), other codes below 110 FAIL; the VMM's own
statuses are named (110 usage, 111 image, 112 KVM, 113 triple fault, 114
emulation failure; 128+N signal), and a run past its timeout is TIMEOUT.

  --expected FILE  run only the sections listed there (one per line, #
                   comments): they must pass; TAP output, exit 1 when one
                   does not
  --only A,B       run these sections (nodefault ones too)
  --sysidle        run every section with --sysidle
  --tap            TAP output (one test per section; SKIP as "# SKIP")

Exit: 0 (every section run passed or skipped, or with --expected every
listed one passed), 1 otherwise, 77 when the suite is not there or
/dev/kvm cannot be opened (it says which: nothing passes silently; with TAP
output it is TAP's "1..0 # SKIP reason", exit 0, which a TAP harness
counts as skipped).
"""
import argparse
import os
import re
import shlex
import signal
import subprocess
import sys
import time

DEFAULT_TIMEOUT = 90.0
# The devices QEMU's runner gives every section; --device NAME here.
ALWAYS_DEVICES = ["pc-testdev"]
# The suite writes its status shifted right by one, so that QEMU's
# (code << 1) | 1 gives the harness 77 (skip) and 127 (abort); this VMM
# returns the code as written.
KUT_SKIP = 77 >> 1
KUT_ABORT = 127 >> 1
VMM_STATUS = {110: "usage error", 111: "bad image", 112: "KVM failure",
              113: "triple fault", 114: "emulation failure",
              115: "stats not written"}


def suite_dir(arg):
    if arg:
        return arg
    if os.environ.get("KVM_UNIT_TESTS"):
        return os.environ["KVM_UNIT_TESTS"]
    src = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    return os.path.join(os.path.dirname(src), "shared", "kvm-unit-tests")


def parse_cfg(path):
    """[name] sections of key = value lines, in file order."""
    sections, cur = [], None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            m = re.match(r"^\[(.+)\]\s*$", line)
            if m:
                cur = {"name": m.group(1)}
                sections.append(cur)
            elif cur is not None and "=" in line:
                k, v = line.split("=", 1)
                cur[k.strip()] = v.strip()
    return sections


def unquote(s):
    s = s.strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        return s[1:-1]
    return s


def parse_timeout(s):
    m = re.match(r"^(\d+(?:\.\d+)?)([smh]?)$", s.strip()) if s else None
    if not m:
        return DEFAULT_TIMEOUT
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


# QEMU -cpu feature flags the VMM's --cpu takes (QEMU spells them with
# '-' or '_').
VMM_CPU_FLAGS = ("x2apic", "tsc-deadline")


def cpu_flags(spec):
    """-cpu MODEL,FLAG,...: (the VMM's --cpu flags, what stays of -cpu
    that it cannot apply: the model and the other flags)."""
    model, *flags = spec.split(",")
    applied, rest = [], [model]
    for f in flags:
        m = re.match(r"^([+-]?)([\w.-]+?)(?:=(on|off|true|false))?$", f)
        name = m.group(2).replace("_", "-") if m else None
        if not m or name not in VMM_CPU_FLAGS or (m.group(1) and m.group(3)):
            rest.append(f)
            continue
        off = m.group(1) == "-" or m.group(3) in ("off", "false")
        applied.append(("-" if off else "+") + name)
    return applied, ",".join(rest)


# QEMU -device values the VMM models as --device NAME: the options it
# implements (anything else leaves the device not applied).
VMM_DEVICES = {"edu": set(), "intel-iommu": {"intremap=on", "eim=off"}}


def vmm_device(arg):
    """The --device NAME for a QEMU -device value, or None."""
    name, *opts = arg.split(",")
    if name in VMM_DEVICES and set(opts) <= VMM_DEVICES[name]:
        return name
    return None


def qemu_args(sec):
    """The memory size, what cannot be applied, the command line, the
    --cpu flags and the devices, from the QEMU options."""
    words = shlex.split(sec.get("qemu_params", "") + " " +
                        sec.get("extra_params", ""))
    mem, dropped, append, cpu, devices = None, [], None, [], []
    i = 0
    while i < len(words):
        w, arg = words[i], words[i + 1] if i + 1 < len(words) else ""
        if w == "-cpu" and arg:
            applied, rest = cpu_flags(arg)
            cpu += applied
            dropped.append(w + " " + rest)
            i += 2
        elif w == "-m":
            m = re.match(r"^(\d+)([MG]?)$", arg, re.I)
            if m:
                mem = m.group(1) + (m.group(2).upper() or "M")
            i += 2
        elif w == "-append":
            append = arg
            i += 2
        elif w == "-device" and arg in ALWAYS_DEVICES:
            i += 2  # given to every section (run_section)
        elif w == "-device" and vmm_device(arg):
            devices.append(vmm_device(arg))
            i += 2
        elif w == "-enable-kvm" or (w in ("-accel", "-machine") and
                                    arg in ("kvm", "accel=kvm")):
            i += 1 if w == "-enable-kvm" else 2  # KVM is all this VMM is
        elif w.startswith("-") and arg and not arg.startswith("-"):
            dropped.append(w + " " + arg)
            i += 2
        else:
            dropped.append(w)
            i += 1
    return mem, dropped, append, cpu, devices


def check_holds(spec):
    """check = PATH=VALUE ...: every one must hold on this host."""
    for item in spec.split():
        path, _, want = item.partition("=")
        try:
            with open(path) as f:
                if f.read().strip() != want:
                    return f"{path} is not {want}"
        except OSError:
            return f"{path} absent"
    return None


def skip_reason(sec, suite, named):
    if sec.get("arch", "x86_64") != "x86_64":
        return "arch " + sec["arch"]
    if sec.get("accel", "kvm") != "kvm":
        return "accel " + sec["accel"]
    groups = sec.get("groups", "").split()
    if "nodefault" in groups and not named:
        return "nodefault group"
    if sec.get("check"):
        why = check_holds(sec["check"])
        if why:
            return "check: " + why
    if not os.path.exists(os.path.join(suite, "x86", sec.get("file", ""))):
        return "not built: x86/" + sec.get("file", "?")
    return None


def smp_of(sec):
    v = sec.get("smp", "1")
    if v.isdigit():
        return int(v)
    return os.cpu_count() or 1  # $MAX_SMP and the like


def run_section(vmm, suite, sec, sysidle):
    """Returns (verdict, detail, seconds, the section's output)."""
    mem, dropped, append, cpu, devices = qemu_args(sec)
    args = unquote(sec.get("test_args", ""))
    if append is not None:
        args = (append + " " + args).strip()
    cmd = [vmm, "--control", "none", "--cpus", str(smp_of(sec))]
    for dev in ALWAYS_DEVICES:
        cmd += ["--device", dev]
    if mem:
        cmd += ["--mem", mem]
    if cpu:
        cmd += ["--cpu", ",".join(cpu)]
    for d in devices:
        cmd += ["--device", d]
    if sysidle:
        cmd.append("--sysidle")
    if args:
        cmd += ["--append", args]
    cmd.append(os.path.join(suite, "x86", sec["file"]))
    timeout = parse_timeout(sec.get("timeout"))
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, start_new_session=True)
    timed_out = False
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        p.send_signal(signal.SIGTERM)
        try:
            out, _ = p.communicate(timeout=2)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    secs = time.monotonic() - t0
    text = out.decode(errors="replace")
    summary = re.findall(r"^(SUMMARY: .*)$", text, re.M)
    fails = len(re.findall(r"^FAIL: ", text, re.M))
    note = summary[-1] if summary else f"{fails} FAIL lines"
    if dropped:
        note += "; not applied: " + " ".join(dropped)
    rc = p.returncode
    if timed_out:
        return "TIMEOUT", f"after {timeout:.0f} s; {note}", secs, text
    if rc == 0:
        return "PASS", note, secs, text
    if rc == KUT_SKIP:
        return "SKIP", "the test skipped itself; " + note, secs, text
    if rc == KUT_ABORT:
        return "FAIL", "the test aborted; " + note, secs, text
    if rc in VMM_STATUS:
        return "FAIL", f"vmm: {VMM_STATUS[rc]} ({rc}); {note}", secs, text
    if rc < 0 or rc >= 128:
        sig = -rc if rc < 0 else rc - 128
        return "FAIL", f"vmm killed by signal {sig}; {note}", secs, text
    return "FAIL", f"exit {rc}; {note}", secs, text


def read_list(path):
    with open(path) as f:
        return [l.split("#", 1)[0].strip() for l in f
                if l.split("#", 1)[0].strip()]


def kvm_unusable():
    """Why /dev/kvm cannot be opened read-write; None when it can."""
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
    except OSError as e:
        return e.strerror
    return None


def skip_all(why, tap):
    """Nothing runs: says why, as TAP's skip-all plan (exit 0, what meson
    reads) or as a comment line with exit 77."""
    if tap:
        print(f"1..0 # SKIP {why}")
        return 0
    print(f"# {why}: skipped")
    return 77


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vmm", required=True)
    ap.add_argument("--suite")
    ap.add_argument("--expected")
    ap.add_argument("--only")
    ap.add_argument("--sysidle", action="store_true")
    ap.add_argument("--tap", action="store_true")
    ap.add_argument("--log-dir", help="keep each section's output here")
    a = ap.parse_args()
    suite = suite_dir(a.suite)
    cfg = os.path.join(suite, "x86", "unittests.cfg")
    if not os.path.exists(cfg):
        return skip_all(f"kvm-unit-tests not found ({cfg} absent)",
                        a.tap or a.expected)
    why = kvm_unusable()
    if why:
        return skip_all(f"/dev/kvm not usable ({why})", a.tap or a.expected)
    sections = parse_cfg(cfg)
    by_name = {s["name"]: s for s in sections}
    wanted = None
    if a.expected:
        wanted = read_list(a.expected)
    elif a.only:
        wanted = [x for x in a.only.split(",") if x]
    if wanted is not None:
        unknown = [w for w in wanted if w not in by_name]
        if unknown:
            print(f"kut_run: no such section: {', '.join(unknown)}",
                  file=sys.stderr)
            return 1
        sections = [by_name[w] for w in wanted]
    tap = a.tap or a.expected
    if tap:
        print(f"1..{len(sections)}")
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0, "TIMEOUT": 0}
    bad = []
    mode = " --sysidle" if a.sysidle else ""
    for i, sec in enumerate(sections, 1):
        why = skip_reason(sec, suite, wanted is not None)
        if why:
            verdict, detail, secs, text = "SKIP", why, 0.0, ""
        else:
            verdict, detail, secs, text = run_section(a.vmm, suite, sec,
                                                      a.sysidle)
        if a.log_dir and text:
            os.makedirs(a.log_dir, exist_ok=True)
            with open(os.path.join(a.log_dir, sec["name"] + ".log"), "w") as f:
                f.write(text)
        counts[verdict] += 1
        if verdict in ("FAIL", "TIMEOUT") or (a.expected and verdict != "PASS"):
            bad.append(sec["name"])
        line = f"{sec['name']}{mode}: {verdict} ({secs:.1f} s) {detail}"
        if tap:
            ok = verdict == "PASS" or (verdict == "SKIP" and not a.expected)
            print(f"{'ok' if ok else 'not ok'} {i} - {line}"
                  f"{' # SKIP' if verdict == 'SKIP' and not a.expected else ''}")
        else:
            print(f"{verdict:7s} {sec['name']:28s} {secs:6.1f} s  {detail}")
        sys.stdout.flush()
    print(f"# kvm-unit-tests{mode}: {counts['PASS']} pass, {counts['FAIL']} "
          f"fail, {counts['TIMEOUT']} timeout, {counts['SKIP']} skip, of "
          f"{len(sections)} sections")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
