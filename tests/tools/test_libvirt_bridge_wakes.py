#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""sysidle-libvirt's host view of what wakes a domain, on a real QEMU
domain of a private libvirtd (private_libvirtd.py, as
test_libvirt_fleet.py): KVM where /dev/kvm is usable, else TCG.

  1. The domain (idle.elf hz=0, 2 vCPUs) boots; the bridge runs with
     --metrics-file and --wakes-file.
  2. --wakes-file: the domain's "host_wakeups" object says "source":
     "host", names its QEMU process, and after two samples has rates over
     the window: KVM's counters (halt_exits, halt_wakeup, irq_injections,
     signal_exits, ...) with totals and rates >= 0 (a TCG domain, or a
     kernel in lockdown that refuses KVM's debugfs counters: "kvm": null
     and "kvm_absent" saying why), the threads by name with the vCPU
     threads ("CPU N/KVM", or ".../TCG") among them.
  3. Between two writes of the file, no total goes down, and the window
     grows.
  4. --metrics-file: sysidle_libvirt_kvm_halt_wakeups_total,
     _irq_injections_total, _signal_exits_total and
     sysidle_libvirt_thread_wakeups_total{thread="CPU 0/KVM"} for the
     domain (vm, uuid labels), sysidle_libvirt_host_wakeups_available; no
     counter goes down between two writes.
     promtool check metrics finds nothing to say (where installed).
  5. SIGTERM: the bridge exits 0 and removes --wakes-file.

usage: test_libvirt_bridge_wakes.py BUILD_DIR
TAP on stdout. Exit: 0 passed, 1 a check failed, 77 nothing could run."""
import json
import os
import re
import shutil
import subprocess
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
import private_libvirtd as plv  # noqa: E402
import tap  # noqa: E402
from tap import check  # noqa: E402

SETTLE_S = 30            # for the first figures with rates
KVM_KEYS = ["halt_exits", "halt_wakeup", "irq_injections", "signal_exits"]


def wakes_of(path, name):
    """The domain @name's entry of the --wakes-file @path, or None."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    for d in doc.get("domains", []):
        if d.get("vm") == name:
            return d
    return None


def with_rates(path, name, min_samples):
    d = wakes_of(path, name)
    hw = d and d.get("host_wakeups")
    if hw and hw.get("samples", 0) >= min_samples:
        return d
    return None


def metrics(path):
    """{(family, labels): value} of the Prometheus text file @path."""
    out = {}
    for line in plv.read(path).splitlines():
        m = re.match(r'^([a-z_]+)(\{[^}]*\})? (\S+)$', line)
        if m:
            out[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return out


def kvm_readable(qpid):
    """(KVM's counters of @qpid's VM can be read here, why not): a kernel
    in lockdown refuses debugfs files that can be written (KVM's counters
    can be cleared), and the bridge must then say so."""
    base = "/sys/kernel/debug/kvm"
    try:
        dirs = [d for d in os.listdir(base) if d.startswith("%d-" % qpid)]
    except OSError as e:
        return False, "no KVM debugfs (%s)" % e
    for d in dirs:
        try:
            with open(os.path.join(base, d, "halt_exits")) as f:
                f.read()
            return True, None
        except OSError as e:
            why = "%s/%s/halt_exits: %s" % (base, d, e.strerror)
    return False, why if dirs else "no VM of process %d in debugfs" % qpid


def check_wakes(d, qpid, virt):
    hw = d["host_wakeups"]
    check(hw.get("source") == "host" and "not a guest-side" in
          hw.get("about", ""), "host_wakeups says source host, and that "
          "it is the host's view", json.dumps(hw))
    check(hw.get("pid") == qpid, "host_wakeups names the QEMU process %s" %
          qpid, json.dumps(hw))
    check(hw.get("window_s", 0) > 0, "a window of %s s" %
          hw.get("window_s"), json.dumps(hw))
    kvm = hw.get("kvm")
    readable, why = kvm_readable(qpid) if virt == "kvm" else (False, None)
    if virt == "kvm" and not readable:
        check(kvm is None and hw.get("kvm_absent"),
              "KVM's counters cannot be read on this host (%s): absent, "
              "and why (%s)" % (why, hw.get("kvm_absent")), json.dumps(hw))
    elif virt == "kvm":
        ok = isinstance(kvm, dict) and kvm.get("scope") == "vm" and all(
            k in kvm and kvm[k]["total"] >= 0 and
            kvm[k]["per_s"] is not None and kvm[k]["per_s"] >= 0
            for k in KVM_KEYS)
        check(ok, "KVM's counters of the VM (%s): totals, rates >= 0" %
              ", ".join("%s %s, %s/s" % (k, kvm[k]["total"], kvm[k]["per_s"])
                        for k in KVM_KEYS if kvm and k in kvm),
              json.dumps(hw))
    else:
        check(kvm is None and "TCG" in hw.get("kvm_absent", ""),
              "a TCG domain: no KVM counters, and why", json.dumps(hw))
    names = {t["name"]: t for t in hw.get("threads", [])}
    mark = "KVM" if virt == "kvm" else "TCG"
    vcpus = ["CPU 0/%s" % mark, "CPU 1/%s" % mark]
    check(all(v in names and names[v]["wakeups_total"] >= 0 and
              names[v]["per_s"] is not None and names[v]["per_s"] >= 0
              for v in vcpus),
          "the vCPU threads' wake-ups: %s" % ", ".join(
              "%s %s/s" % (t["name"], t["per_s"])
              for t in hw.get("threads", [])), json.dumps(hw))


def check_growth(d1, d2):
    h1, h2 = d1["host_wakeups"], d2["host_wakeups"]
    down = []
    for k, v in (h1.get("kvm") or {}).items():
        if isinstance(v, dict) and h2["kvm"][k]["total"] < v["total"]:
            down.append(k)
    t2 = {t["name"]: t for t in h2.get("threads", [])}
    for t in h1.get("threads", []):
        if t2.get(t["name"], {"wakeups_total": -1})["wakeups_total"] < \
                t["wakeups_total"]:
            down.append(t["name"])
    check(not down and h2["window_s"] > h1["window_s"],
          "between two writes no total goes down (%s), the window grows "
          "(%s s to %s s)" % (down, h1["window_s"], h2["window_s"]),
          json.dumps([h1, h2]))


def check_metrics(m1, m2, name, virt, readable):
    def dom(family, extra=""):
        for (f, labels), v in m2.items():
            if f == family and ('vm="%s"' % name) in labels and \
                    extra in labels:
                return v
        return None
    if readable:
        vals = {f: dom("sysidle_libvirt_kvm_%s_total" % f) for f in
                ["halt_wakeups", "irq_injections", "signal_exits",
                 "halt_exits"]}
        check(all(v is not None and v >= 0 for v in vals.values()),
              "metrics: KVM's counters of the domain %s" % vals)
    check(dom("sysidle_libvirt_host_wakeups_available", 'part="kvm"') ==
          (1 if readable else 0) and
          dom("sysidle_libvirt_host_wakeups_available",
              'part="threads"') == 1,
          "metrics: sysidle_libvirt_host_wakeups_available (kvm, threads)")
    mark = "KVM" if virt == "kvm" else "TCG"
    v = dom("sysidle_libvirt_thread_wakeups_total",
            'thread="CPU 0/%s"' % mark)
    check(v is not None and v >= 0,
          "metrics: sysidle_libvirt_thread_wakeups_total{thread=\"CPU "
          "0/%s\"} %s" % (mark, v))
    down = [k for k, v in m1.items() if k[0].endswith("_total") and
            k in m2 and m2[k] < v]
    check(not down, "metrics: no counter went down between two writes",
          "%s" % down)


def lint(text):
    """promtool check metrics on the metrics file (skipped without it)."""
    promtool = shutil.which("promtool")
    if not promtool:
        tap.skip("metrics: promtool check metrics", "promtool not found")
        return
    r = subprocess.run([promtool, "check", "metrics"], input=text,
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and not (r.stdout + r.stderr).strip(),
          "metrics: promtool check metrics exits 0 with no lint output",
          r.stdout + r.stderr)


def check_report(build, d, mfile, wfile, name):
    """The domain's duty cycle in the --wakes-file (each window's share
    fully idle, over a span), and sysidlectl report taking it from there
    with the bridge's metrics file."""
    duty = d.get("duty", {})
    check(all(0 <= duty.get("full_idle_ratio_" + w, -1) <= 1 and
              duty.get("span_%s_s" % w, 0) > 0 for w in ("1m", "1h", "24h"))
          and duty.get("tracked_s", 0) > 0,
          "--wakes-file: the domain's duty cycle, each window's share fully "
          "idle over its span", json.dumps(duty))
    r = subprocess.run([os.path.join(build, "sysidlectl"), "--json",
                        "report", "--bridge-metrics", mfile, "--wakes-file",
                        wfile], capture_output=True, text=True, timeout=30)
    rows = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    row = next((x for x in rows if x.get("name") == name), {})
    check(r.returncode == 0 and row.get("kind") == "libvirt" and
          row.get("full_idle_ratio") is not None and
          row.get("advice") in ("suspend or pack", "nothing"),
          "report --wakes-file: the domain's share fully idle and a "
          "recommendation (%s, %s)" % (row.get("full_idle_ratio"),
                                       row.get("advice")),
          r.stdout + r.stderr)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    build = sys.argv[1]
    kernel = os.path.abspath(os.path.join(build, "guest-tools", "idle.elf"))
    bridge = os.path.join(build, "sysidle-libvirt")
    libvirt, why = plv.prerequisites(kernel)
    if libvirt is None:
        return plv.skip_all(why)
    if not os.access(bridge, os.X_OK):
        return plv.skip_all("%s not built" % bridge)
    if not os.path.isdir("/sys/kernel/debug/kvm"):
        subprocess.run(["mount", "-t", "debugfs", "none",
                        "/sys/kernel/debug"], capture_output=True)
    tmp, lv = plv.prepare(libvirt, "sysidle-wakes-")
    conn = None
    helpers = []
    try:
        lv.start()
        c = lv.connect(libvirt)
        if c is None or c == "exited":
            print("1..0 # SKIP libvirtd did not start")
            plv.diag(plv.read(lv.log)[-3000:])
            return 77
        conn = c
        name = "sysidle-wakes-%d" % os.getpid()
        serial = os.path.join(tmp, "serial.log")
        conn.createXML(plv.domain_xml(name, kernel, serial, 2), 0)
        up = plv.poll_until(lambda: "idle: 2 cpus up" in plv.read(serial),
                            plv.BOOT_TIMEOUT_S, 0.2)
        if not check(bool(up), "domain %s boots idle.elf on 2 vCPUs (%s)" %
                     (name, plv.VIRT), plv.read(serial) +
                     lv.domain_log(name)):
            return 1
        pids = lv.qemu_pids()
        qpid = pids[0] if pids else None
        log = os.path.join(tmp, "bridge.log")
        mfile = os.path.join(tmp, "bridge.prom")
        wfile = os.path.join(tmp, "wakes.json")
        b = plv.start_daemon([bridge, "--libvirt", lv.uri, "--interval",
                              "100", "--hooks", os.path.join(tmp, "none"),
                              "--metrics-file", mfile, "--wakes-file",
                              wfile], log, helpers)
        d1 = plv.poll_until(lambda: b.poll() is None and
                            with_rates(wfile, name, 2), SETTLE_S, 0.2)
        if not check(d1 is not None, "--wakes-file has the domain with two "
                     "samples", plv.read(log) + plv.read(wfile)):
            return 1
        m1 = metrics(mfile)
        check_wakes(d1, qpid, plv.VIRT)
        plv.diag(json.dumps(d1, indent=1)[:3000])
        d2 = plv.poll_until(lambda: with_rates(
            wfile, name, d1["host_wakeups"]["samples"] + 2), SETTLE_S, 0.2)
        if check(d2 is not None, "--wakes-file written again with more "
                 "samples", plv.read(wfile)):
            check_growth(d1, d2)
        # the metrics file is rewritten every 10 s while nothing changes
        before = plv.read(mfile)
        plv.poll_until(lambda: plv.read(mfile) != before, 15, 0.2)
        check_metrics(m1, metrics(mfile), name, plv.VIRT,
                      plv.VIRT == "kvm" and kvm_readable(qpid)[0])
        text = plv.read(mfile)
        plv.diag("\n".join(l for l in text.splitlines() if re.match(
            r"sysidle_libvirt_(kvm_|thread|host_wakeups)", l)))
        lint(text)
        check_report(build, d2 or d1, mfile, wfile, name)
        rc = plv.kill_pid(b.pid, proc=b)
        check(not rc and b.returncode == 0 and not os.path.exists(wfile),
              "SIGTERM: the bridge exits 0 and removes --wakes-file "
              "(status %s)" % b.returncode, plv.read(log))
    except KeyboardInterrupt as e:
        check(False, "interrupted (%s)" % e)
    except Exception as e:
        check(False, "unexpected error: %s" % e, traceback.format_exc())
    finally:
        plv.teardown(libvirt, lv, conn, helpers, "sysidle-wakes-")
        shutil.rmtree(tmp, ignore_errors=True)
    return tap.finish()


if __name__ == "__main__":
    sys.exit(main())
