"""What a soak run (tools/soak.py) measures and judges, as a part of Soak:
each VM process sampled (RSS, fds, threads), the quiescent points (no
client connected, no host event in flight, no hook running, the same fd
list twice in a row), the timed SIGTERM at the end, then the checks (exit
status and time, sanitizer reports, stats JSON, metrics file, hooks in
order and none left running, files left, growth after warm-up) and the
report. Python 3 standard library only."""
import json
import os
import re
import shutil
import signal
import sys
import time

from soak_vm import (EXIT_LIMIT, RSS_TOL_FRAC, RSS_TOL_KB, SANITIZER,
                     children, cmdline, fd_targets, log, median, pgid,
                     read_status)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "tests"))
from procfs import alive  # noqa: E402 (the tests' /proc reader)


class Checks:
    """Soak's sampling, quiescent points, stop and checks."""

    # -- sampling ----------------------------------------------------------
    def sample(self):
        t = self.elapsed()
        for v in self.vms:
            if v.died is not None:
                continue
            rc = v.p.poll()
            st = read_status(v.p.pid) if rc is None else None
            fds = fd_targets(v.p.pid) if rc is None else None
            if rc is not None or st is None or fds is None:
                rc = v.p.wait()
                v.died = (t, rc)
                self.fail("%s exited before the end, at %.0f s, status %s: "
                          "%s" % (v.name, t, rc, v.stderr().strip()[-500:]))
                continue
            v.samples.append((t, st[0], len(fds), st[1], st[2]))
        live = [v for v in self.vms if v.died is None and v.samples]
        last = [v.samples[-1] for v in live]
        rss = [s[1] for s in last]
        log("%7.0f %4d %10.1f %8.1f %7d %7d %7d %7d" %
            (t, len(live), sum(rss) / 1024, max(rss, default=0) / 1024,
             max((s[2] for s in last), default=0),
             sum(s[2] for s in last), sum(s[3] for s in last),
             sum(self.counts.values())))

    def quiesce(self, label):
        """Holds clients and host events still, waits until no hook runs
        and each VM's fd list is the same twice in a row, and keeps that
        (fd kinds, threads, RSS) under @label."""
        self.quiet.set()
        with self.busy_cv:
            self.busy_cv.wait_for(lambda: self.busy == 0, timeout=60)
            if self.busy:
                self.fail("%s: clients still busy after 60 s" % label)
        self.resume_all()
        pending = {v.idx for v in self.live_vms()}
        prev = {}
        end = time.monotonic() + 60
        while pending and time.monotonic() < end:
            kids = children([self.vms[i].p.pid for i in pending])
            for i in list(pending):
                v = self.vms[i]
                fds = fd_targets(v.p.pid)
                st = read_status(v.p.pid)
                if fds is None or st is None:
                    pending.discard(i)
                    continue
                if kids[v.p.pid]:
                    prev.pop(i, None)
                    continue
                if prev.get(i) == fds:
                    v.quiet[label] = (fds, st[1], st[0])
                    pending.discard(i)
                else:
                    prev[i] = fds
            time.sleep(0.1)
        for i in pending:
            self.fail("%s: %s never quiescent (a hook running, or its fds "
                      "changing) within 60 s" % (label, self.vms[i].name))
        log("# quiescent point '%s' at %.0f s" % (label, self.elapsed()))

    # -- the end -----------------------------------------------------------
    def stop_vms_timed(self):
        live = self.live_vms()
        sent = time.monotonic()
        for v in live:
            v.p.send_signal(signal.SIGTERM)
        left = {v.idx: v for v in live}
        hard = sent + 60
        while left and time.monotonic() < hard:
            for i, v in list(left.items()):
                rc = v.p.poll()
                if rc is not None:
                    v.exit = (rc, time.monotonic() - sent)
                    del left[i]
            time.sleep(0.01)
        for v in left.values():
            v.p.kill()
            v.exit = (v.p.wait(), None)
            self.fail("%s: no exit within 60 s of SIGTERM (killed)" % v.name)
        for v in self.vms:
            with v.lock:
                try:
                    v.p.stdin.close()
                except OSError:
                    pass

    def check_exit(self, v):
        rc, secs = v.exit
        if rc is None or secs is None:
            return
        limit = EXIT_LIMIT + (2 * v.hook_timeout if v.slow else 0)
        if rc != 143:
            self.fail("%s: exit status %s on SIGTERM (expected 143)" %
                      (v.name, rc))
        if secs > limit:
            self.fail("%s: exit took %.2f s after SIGTERM (limit %.1f s)" %
                      (v.name, secs, limit))
        err = v.stderr()
        if SANITIZER.search(err):
            self.fail("%s: sanitizer report on stderr:\n%s" %
                      (v.name, err[-2000:]))
        try:
            with open(v.stats) as f:
                st = json.load(f)
            if st.get("exit_status") != rc:
                self.fail("%s: stats JSON says exit_status %r, status was "
                          "%s" % (v.name, st.get("exit_status"), rc))
        except (OSError, ValueError) as e:
            self.fail("%s: stats JSON: %s" % (v.name, e))
        try:
            with open(v.metrics) as f:
                m = f.read()
            if not re.search(r"^sysidle_vm_up\{[^}]*\} 0$", m, re.M):
                self.fail("%s: metrics file lacks sysidle_vm_up 0" % v.name)
        except OSError as e:
            self.fail("%s: metrics file: %s" % (v.name, e))
        if os.path.exists(v.sock):
            self.fail("%s: stale socket %s left" % (v.name, v.sock))
        self.check_hooks(v)
        c = (v.final_status or {}).get("counters", {})
        if c.get("violations"):
            self.fail("%s: %d sysidle violations (FULL while a vCPU ran)" %
                      (v.name, c["violations"]))
        if c.get("events_dropped"):
            self.findings.append("%s: %d events dropped by the export "
                                 "thread" % (v.name, c["events_dropped"]))
        self.check_jiffies(v)

    def check_jiffies(self, v):
        """idle.elf reports its jiffies against the TSC after each serial
        wake-up: off is a finding for the pv tick and catchup (discard
        drops held ticks by design)."""
        try:
            with open(v.out_path, errors="replace") as f:
                out = f.read()
        except OSError:
            return
        v.jiffies = (out.count("idle: jiffies ok"),
                     len(re.findall(r"^idle: jiffies off", out, re.M)))
        if v.jiffies[1] and "discard" not in v.guest_args:
            self.findings.append(
                "%s: %d of %d jiffies reports off: %s" %
                (v.name, v.jiffies[1], sum(v.jiffies), "; ".join(
                    re.findall(r"^idle: jiffies off.*$", out, re.M)[:3])))

    def check_hooks(self, v):
        events = []
        try:
            with open(v.record) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) >= 4:
                        events.append(" ".join(parts[2:4]))
        except OSError:
            pass
        v.hook_events = events
        bad = None
        if not events or events[0] != "started begin":
            bad = "the first hook event is %r" % (events[:1],)
        elif events[-1] != "stopped end":
            bad = "the last hook event is %r" % (events[-1],)
        else:
            want = "idle begin"
            for i, e in enumerate(events[1:-1], 1):
                if e != want:
                    bad = "event %d is %r, expected %r" % (i, e, want)
                    break
                want = "idle end" if want == "idle begin" else "idle begin"
        if bad:
            self.fail("%s: hook events out of order: %s" % (v.name, bad))
        if v.slow:
            try:
                with open(v.pids) as f:
                    pids = [int(x) for x in f.read().split()]
            except OSError:
                pids = []
            # PIDs are reused (a soak makes thousands of processes): a PID
            # counts only if it still is the hook (its path on the command
            # line) or its "sleep 1000" child in the hook's process group.
            left = []
            for hook, child in zip(pids[0::2], pids[1::2]):
                if alive(hook) and self.top in cmdline(hook):
                    left.append(hook)
                if alive(child) and cmdline(child) == "sleep 1000" and \
                        pgid(child) == hook:
                    left.append(child)
            if left:
                self.fail("%s: hook processes left running: %s" %
                          (v.name, left))

    def check_leftovers(self):
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(
                        errors="replace")
            except OSError:
                continue
            if self.top in cmd and int(d) != os.getpid():
                self.fail("process %s left running: %s" % (d, cmd[:200]))
        left = os.listdir(self.sockdir)
        if left:
            self.fail("files left in the socket directory: %s" % left)
        extra = [f for f in os.listdir(os.path.join(self.top, "metrics"))
                 if not f.endswith(".prom")]
        if extra:
            self.fail("files left beside the metrics files: %s" % extra)

    # -- growth ------------------------------------------------------------
    def check_growth(self, v):
        post = [s for s in v.samples if s[0] >= self.o.warmup]
        if len(post) < 2:
            self.fail("%s: too few samples after warm-up (%d)" %
                      (v.name, len(post)))
            return None
        k = max(3, len(post) // 10)
        k = min(k, len(post) // 2) or 1
        base = median([s[1] for s in post[:k]])
        last = median([s[1] for s in post[-k:]])
        tol = max(RSS_TOL_KB, RSS_TOL_FRAC * base)
        if last - base > tol:
            self.fail("%s: RSS grew after warm-up: %d kB -> %d kB (+%d kB, "
                      "tolerance %d kB)" % (v.name, base, last, last - base,
                                            tol))
        a, b = v.quiet.get("warmup"), v.quiet.get("end")
        if a and b:
            if len(a[0]) != len(b[0]) or a[0] != b[0]:
                self.fail("%s: open fds at rest changed: %d -> %d (%s)" %
                          (v.name, len(a[0]), len(b[0]),
                           diff_kinds(a[0], b[0])))
            if a[1] != b[1]:
                self.fail("%s: threads at rest changed: %d -> %d" %
                          (v.name, a[1], b[1]))
        return base, last, k

    def write_csv(self, path):
        with open(path, "w") as f:
            f.write("t_s,vm,rss_kb,fds,threads,rss_anon_kb\n")
            rows = sorted((s[0], v.name) + s[1:] for v in self.vms
                          for s in v.samples)
            for r in rows:
                f.write("%.1f,%s,%d,%d,%d,%d\n" % r)

    def report(self):
        if self.o.csv:
            self.write_csv(self.o.csv)
        for v in self.vms:
            if v.exit:
                self.check_exit(v)
            else:
                v.hook_events = []
        self.check_leftovers()
        log("\n# per VM: RSS kB (first after warm-up, median of the first "
            "k / last k after warm-up, min/median/max over the run), fds "
            "(min/median/max of the samples; at rest after warm-up -> at "
            "the end), threads at rest, exit; anon: RssAnon kB, first and "
            "last after warm-up")
        log("%-7s %-10s %7s %7s %7s %17s %11s %11s %7s %7s %5s %10s %5s %5s "
            "%5s" %
            ("vm", "kind", "rss0", "base", "last", "rss min/med/max",
             "anon", "fds m/m/m", "fdrest", "thr", "exit", "exit_s", "hooks",
             "idle", "pause"))
        for v in self.vms:
            g = self.check_growth(v) if v.samples else None
            post = [s for s in v.samples if s[0] >= self.o.warmup]
            rss = [s[1] for s in v.samples]
            fds = [s[2] for s in v.samples]
            a, b = v.quiet.get("warmup"), v.quiet.get("end")
            c = (v.final_status or {}).get("counters", {})
            log("%-7s %-10s %7s %7s %7s %17s %11s %11s %7s %7s %5s %10s %5d "
                "%5s %5s" % (
                    v.name, v.kind, post[0][1] if post else "-",
                    "%d" % g[0] if g else "-", "%d" % g[1] if g else "-",
                    "%d/%d/%d" % (min(rss), median(rss), max(rss))
                    if rss else "-",
                    "%d->%d" % (post[0][4], post[-1][4]) if post else "-",
                    "%d/%d/%d" % (min(fds), median(fds), max(fds))
                    if fds else "-",
                    "%s->%s" % (len(a[0]) if a else "-",
                                len(b[0]) if b else "-"),
                    "%s->%s" % (a[1] if a else "-", b[1] if b else "-"),
                    v.exit[0] if v.exit else "-",
                    "%.3f" % v.exit[1] if v.exit and v.exit[1] is not None
                    else "-", len(getattr(v, "hook_events", [])),
                    c.get("full_idle_periods", "-"), c.get("pauses", "-")))
        log("\n# counters at the end (sum over VMs): " + ", ".join(
            "%s %s" % (k, sum((v.final_status or {}).get("counters", {})
                              .get(k, 0) for v in self.vms))
            for k in ("full_idle_periods", "force_exits", "violations",
                      "events_dropped", "watch_dropped", "hooks_run",
                      "hooks_failed", "hooks_dropped", "pauses",
                      "resumes_requested", "resumes_self")))
        log("# actions: " + ", ".join("%s %d" % kv
                                      for kv in sorted(self.counts.items())))
        warns = {}
        for v in self.vms:
            for line in v.stderr().splitlines():
                key = re.sub(r"\d+(\.\d+)?", "N", line)[:120]
                warns[key] = warns.get(key, 0) + 1
        if warns:
            log("# VMM stderr lines (numbers as N), count:")
            for k, n in sorted(warns.items(), key=lambda kv: -kv[1]):
                log("#   %5d  %s" % (n, k))
        rep = [(v.name,) + v.jiffies for v in self.vms
               if getattr(v, "jiffies", (0, 0)) != (0, 0)]
        if rep:
            log("# idle.elf jiffies reports after serial wake-ups (ok/off): " +
                ", ".join("%s %d/%d" % r for r in rep))
        for f in self.findings:
            log("# finding: " + f)
        if self.failures:
            log("\nsoak: FAIL (%d) - files kept in %s" %
                (len(self.failures), self.top))
            for f in self.failures:
                log("  - " + f.split("\n")[0])
        else:
            log("\nsoak: PASS: %d VMs, %d s, no growth after warm-up "
                "(RSS tolerance max(%d kB, %d%%), fds and threads at rest "
                "unchanged), every VM exited cleanly" %
                (len(self.vms), self.o.duration, RSS_TOL_KB,
                 RSS_TOL_FRAC * 100))
            if self.findings or self.o.keep:
                log("# files kept in %s" % self.top)
            else:
                shutil.rmtree(self.top, ignore_errors=True)


def diff_kinds(a, b):
    ca, cb = {}, {}
    for x in a:
        ca[x] = ca.get(x, 0) + 1
    for x in b:
        cb[x] = cb.get(x, 0) + 1
    return ", ".join("%s %d->%d" % (k, ca.get(k, 0), cb.get(k, 0))
                     for k in sorted(set(ca) | set(cb))
                     if ca.get(k, 0) != cb.get(k, 0))
