/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sysidle-libvirt's domains: one struct tracked per libvirt domain seen,
 * each scan fed to its machine (domain_idle.c), each change published: the
 * log line, the metadata (publish.c) and the hooks (hook_queue.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge.h"
#include "hook_queue.h"
#include "lease.h"
#include "metrics.h"
#include "monotonic.h"
#include "publish.h"


/* Buffers reused from scan to scan (grown, never shrunk, freed at exit):
 * a scan allocates nothing of its own for its bookkeeping. */
struct scratch {
	void *p;
	size_t size;
};
static struct scratch scan_buf, scan_ts, scan_lv;

/* @s as a zeroed array of @n elements of @size, or NULL. */
static void *scratch(struct scratch *s, size_t n, size_t size)
{
	if (n > SIZE_MAX / size)
		return NULL;
	if (n * size > s->size) {
		void *p = realloc(s->p, n * size);

		if (!p)
			return NULL;
		s->p = p;
		s->size = n * size;
	}
	return memset(s->p, 0, n * size);
}

static struct hook_domain hook_dom(const struct tracked *t)
{
	return (struct hook_domain){ t->name, t->uuid, t->ncpus };
}

/* @t's urn:sysidle:1 document for state @st since @since_unix_ms, with
 * the bridge's lease from now. */
static struct sysidle_doc doc_of(const struct bridge *b,
				 const struct tracked *t,
				 enum sysidle_state st, uint64_t since_unix_ms)
{
	struct sysidle_doc doc = {
		.state = st, .since_unix_ms = since_unix_ms,
		.full_idle_periods = domain_idle_full_periods(t->di),
		.vcpus = t->ncpus,
		.has_duty = t->duty_doc.tracked_ns > 0,
		.left_full_idle_unix_ms = t->duty_doc.left_unix_ms,
	};

	for (int w = 0; w < DUTY_WINDOWS; w++)
		doc.full_idle_permille[w] = t->duty_doc.w[w].permille;
	lease_fill(&b->opt, &doc, unix_ms());
	return doc;
}

/* @t is fully idle (@idle) or not from now on, @now_ms on the wall
 * clock: its duty cycle fed (begun at its first state), and the figures
 * as of now kept for its element. */
static void duty_note(struct tracked *t, bool idle, uint64_t now_ms)
{
	uint64_t now = monotonic_ns();

	if (!t->duty->start_ns) {
		duty_cycle_init(t->duty, now);
		t->duty_unix_ms = now_ms;
	}
	duty_cycle_set(t->duty, now, now_ms, idle);
	duty_cycle_read(t->duty, now, &t->duty_doc);
}

static struct tracked *tracked_get(struct bridge *b,
				   const struct stats_domain *sd)
{
	struct tracked *t, **d;

	for (size_t i = 0; i < b->ndoms; i++)
		if (!strcmp(b->doms[i]->uuid, sd->uuid))
			return b->doms[i];
	d = realloc(b->doms, (b->ndoms + 1) * sizeof(*d));
	if (!d)
		return NULL;
	b->doms = d;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->first_scan = b->scans_done;
	t->di = domain_idle_new();
	t->name = strdup(sd->name);
	t->duty = calloc(1, sizeof(*t->duty)); /* start_ns 0: not begun */
	if (!t->di || !t->name || !t->duty) {
		domain_idle_free(t->di);
		free(t->duty);
		free(t->name);
		free(t);
		return NULL;
	}
	memcpy(t->uuid, sd->uuid, sizeof(t->uuid));
	b->doms[b->ndoms++] = t;
	return t;
}

void tracked_free(struct tracked *t)
{
	host_vm_free(t->host);
	host_wakes_free(t->wakes);
	if (t->dom)
		virDomainFree(t->dom);
	free(t->xml);
	domain_idle_free(t->di);
	free(t->duty);
	free(t->name);
	free(t);
}

/* @t's metadata: @st since t->since_unix_ms, leased from now. */
static void set_metadata(const struct bridge *b, struct tracked *t,
			 enum sysidle_state st)
{
	struct sysidle_doc doc = doc_of(b, t, st, t->since_unix_ms);
	char *back;

	if (!t->dom)
		return;
	if (publish_metadata(t->dom, &doc) < 0) {
		if (!t->meta_failed)
			warn("%s: cannot set its metadata: %s (until it "
			     "works again, not repeated)", t->name, lv_error());
		t->meta_failed = true;
		metrics_error();
		return;
	}
	t->meta_failed = false;
	t->lease_until_ms = doc.valid_until_unix_ms;
	if (b->opt.verbose && !b->opt.once) {
		back = publish_read_back(t->dom);
		say("%s: metadata %s read back: %s", t->name, PUBLISH_NS,
		    back ? back : lv_error());
		free(back);
	}
}

/* A state published: the log line, the metadata (and, --verbose, what
 * libvirt then holds). */
static void publish(const struct bridge *b, struct tracked *t,
		    enum sysidle_state st, const char *why)
{
	if (st != t->published || !t->since_unix_ms) {
		t->since_unix_ms = unix_ms();
		duty_note(t, st == SYSIDLE_FULL_NOTED, t->since_unix_ms);
	}
	t->published = st;
	if (st == SYSIDLE_FULL_NOTED)
		t->noted_unix_ms = t->since_unix_ms;
	if (!b->opt.once) /* --once: print_once says it all at the end */
		say("%s: %s (%s)", t->name, sysidle_state_name(st), why);
	set_metadata(b, t, st);
	metrics_changed();
}

/* The domain's XML from libvirt for the hooks' stdin, kept as the one for
 * its "stopped" (the domain is gone by then): a failure keeps the last
 * one (NULL: never read, the hooks get the small XML instead). */
static const char *hook_xml(struct tracked *t)
{
	char *xml = t->dom ? virDomainGetXMLDesc(t->dom, 0) : NULL;

	if (xml) {
		free(t->xml);
		t->xml = xml;
	}
	return t->xml;
}

/* The hooks of @t's change from @from to t->published. */
static void hooks_change(const struct bridge *b, struct tracked *t,
			 enum sysidle_state from,
			 uint64_t full_idle_ms)
{
	struct hook_domain hd = hook_dom(t);
	struct sysidle_doc doc;

	if (b->opt.once || !hook_queue_active() ||
	    (from == SYSIDLE_FULL_NOTED) == (t->published == SYSIDLE_FULL_NOTED))
		return;
	doc = doc_of(b, t, t->published, t->since_unix_ms);
	publish_hooks_change(&hd, from, &doc, full_idle_ms, hook_xml(t));
}

/* @t is no longer watched: @gone, it stopped ("stopped end"); else the
 * bridge stops watching it while it runs ("unwatched end"). A fully idle
 * domain's idle period ends first. */
void unwatch(const struct bridge *b, struct tracked *t, const char *why,
	     bool gone)
{
	struct hook_domain hd = hook_dom(t);
	struct sysidle_doc doc;
	const char *xml;
	uint64_t now_ms;

	if (!t->watched || b->opt.once)
		return;
	now_ms = unix_ms();
	duty_note(t, false, now_ms); /* a leave, when fully idle */
	doc = doc_of(b, t, SYSIDLE_NOT, now_ms);
	xml = !hook_queue_active() ? NULL : gone ? t->xml : hook_xml(t);
	if (t->published == SYSIDLE_FULL_NOTED)
		publish_hooks_change(&hd, SYSIDLE_FULL_NOTED, &doc,
				     doc.since_unix_ms - t->noted_unix_ms, xml);
	hook_queue_post(&hd, gone ? "stopped" : "unwatched", "end", NULL,
			&doc, xml);
	say("%s: %s (%s)", t->name, gone ? "stopped" : "unwatched", why);
	t->watched = false;
	metrics_changed();
}

/* Renew @t's lease when a third of it is left. */
static void lease_renew(const struct bridge *b, struct tracked *t,
			uint64_t now_ms)
{
	if (t->watched && !b->opt.once && !t->meta_failed &&
	    lease_due(&b->opt, t->lease_until_ms, now_ms))
		set_metadata(b, t, t->published);
}

/* One scan's result for one domain. */
static void domain_scan(const struct bridge *b, struct tracked *t,
			const struct stats_domain *sd,
			uint64_t t_ns)
{
	struct vcpu_sample *buf = scratch(&scan_buf, sd->nvcpus + 1,
					  sizeof(*buf));
	struct domain_idle_report r;
	struct domain_sample s;
	enum sysidle_state from = t->published;
	char why[200];
	int rc;

	if (!buf) {
		warn("%s: out of memory", t->name);
		return;
	}
	stats_domain_sample(sd, t_ns, buf, &s);
	rc = domain_idle_scan(t->di, &s, &r);
	if (rc == DOMAIN_IDLE_ERROR) {
		warn("%s: %s", t->name, strerror(errno));
		return;
	}
	snprintf(t->reason, sizeof(t->reason), "%s", r.reason);
	t->skipped = rc == DOMAIN_IDLE_NO_STATS;
	t->skipped_once |= t->skipped;
	if (t->skipped) {
		if (!t->warned && !t->host_failed)
			warn("%s: no vcpu.N.halt_exits.sum with "
			     "vcpu.N.blocking.cur or vcpu.N.halt_wait_ns.sum "
			     "statistics (libvirt or the kernel lacks KVM's "
			     "binary statistics): not watched, never reported "
			     "idle", t->name);
		t->warned = true;
		if (t->watched && t->published != SYSIDLE_NOT) {
			publish(b, t, SYSIDLE_NOT, r.reason);
			hooks_change(b, t, from, r.full_idle_ms);
		}
		return;
	}
	t->ncpus = r.ncpus;
	if (!t->watched) {
		t->watched = true;
		snprintf(why, sizeof(why), "watching %u vCPU%s; %s", r.ncpus,
			 r.ncpus == 1 ? "" : "s", r.reason);
		publish(b, t, r.to, why);
		if (!b->opt.once && hook_queue_active()) {
			struct hook_domain hd = hook_dom(t);
			struct sysidle_doc doc = doc_of(b, t, t->published,
							t->since_unix_ms);

			/* started: it appeared while the bridge watched;
			 * watched: it ran before the bridge's first scan (or
			 * before its statistics could be read). */
			hook_queue_post(&hd, t->first_scan && !t->skipped_once ?
					"started" : "watched", "begin", NULL,
					&doc, hook_xml(t));
		}
		hooks_change(b, t, SYSIDLE_NOT, r.full_idle_ms);
		return;
	}
	if (r.to == from && !r.recreated)
		return;
	publish(b, t, r.to, r.reason);
	hooks_change(b, t, from, r.full_idle_ms);
}

/* After hook_queue_stop(): say how many hook events were never run, so whoever
 * finds fewer transitions in a hook's log than in the bridge's knows why. */
void report_dropped_hooks(void)
{
	uint64_t run, failed, dropped;

	hook_queue_counts(&run, &failed, &dropped);
	if (dropped)
		warn("%" PRIu64 " hook event%s dropped: the hooks ran slower "
		     "than the events came, and a domain's pending idle "
		     "events were coalesced (%" PRIu64 " hooks run)",
		     dropped, dropped == 1 ? "" : "s", run);
}

/* A replay record naming no libvirt domain: one warning per name. */
void warn_unknown(struct bridge *b, const char *name)
{
	char **u;

	for (size_t i = 0; i < b->nunknown; i++)
		if (!strcmp(b->unknown[i], name))
			return;
	u = realloc(b->unknown, (b->nunknown + 1) * sizeof(*u));
	if (!u || !(u[b->nunknown] = strdup(name))) {
		b->unknown = u ? u : b->unknown;
		return;
	}
	b->unknown = u;
	b->nunknown++;
	warn("--stats-file: no active libvirt domain '%s': its records are "
	     "ignored", name);
}

/* Attach @t to its QEMU process for b->opt.source; false: it cannot, said
 * once (auto: libvirt's statistics meanwhile; kvm, proc: not watched
 * meanwhile), tried again every ATTACH_RETRY_MS (a QEMU still starting,
 * debugfs mounted later). */
static bool host_attach(const struct bridge *b, struct tracked *t)
{
	uint64_t now = monotonic_ns();
	char why[256];

	if (t->host_failed && now < t->attach_retry_ns)
		return false;
	t->host = host_vm_attach(t->uuid, b->opt.source, "/proc",
				 STATS_KVM_DEBUGFS, why, sizeof(why));
	if (t->host) {
		say("%s: source %s (process %d, %u vCPU threads)", t->name,
		    stats_kind_name(host_vm_kind(t->host)),
		    host_vm_pid(t->host), host_vm_ncpus(t->host));
		t->host_failed = false;
		return true;
	}
	t->attach_retry_ns = now + ATTACH_RETRY_MS * 1000000ull;
	if (!t->host_failed && b->opt.source == STATS_AUTO)
		warn("%s: source libvirt: %s; libvirt's vCPU statistics make "
		     "QEMU wake every vCPU of the domain at every scan (tried "
		     "again every %u s)", t->name, why, ATTACH_RETRY_MS / 1000);
	else if (!t->host_failed)
		warn("%s: --source %s: %s: not watched, never reported idle "
		     "(tried again every %u s)", t->name,
		     stats_kind_name(b->opt.source), why,
		     ATTACH_RETRY_MS / 1000);
	t->host_failed = true;
	return false;
}

/* @sd's vCPU samples from this host (attaching @t first if need be);
 * false when they must still be asked from libvirt (auto, for a domain
 * the host sources cannot read). The replay's and --source libvirt's came
 * with the scan; a domain not running needs none; one --source kvm or
 * proc cannot read is left without samples (skipped). */
static bool host_sample(const struct bridge *b, struct tracked *t,
			struct stats_domain *sd)
{
	char why[256];

	if (b->opt.source == STATS_FILE || b->opt.source == STATS_LIBVIRT ||
	    b->opt.remote || (sd->state != VIR_DOMAIN_RUNNING &&
			   sd->state != VIR_DOMAIN_BLOCKED))
		return true;
	if (!t->host && !host_attach(b, t))
		return b->opt.source != STATS_AUTO;
	if (host_vm_sample(t->host, sd, why, sizeof(why)) == 0)
		return true;
	/* Restarted (a new QEMU process), or going: attach again. */
	say("%s: %s: attaching again", t->name, why);
	host_vm_free(t->host);
	t->host = NULL;
	if (!host_attach(b, t))
		return b->opt.source != STATS_AUTO;
	return host_vm_sample(t->host, sd, why, sizeof(why)) == 0 ||
	       b->opt.source != STATS_AUTO;
}

/* Not in the scan's list, but is @t's domain still running (a listing
 * that raced with something)? Only what libvirt says for sure counts:
 * "stopped" goes to the hooks only for a domain that stopped. */
static bool still_active(const struct bridge *b, struct tracked *t)
{
	if (!t->dom || b->opt.source == STATS_FILE)
		return false; /* a replay's state.state=5: gone */
	return virDomainIsActive(t->dom) == 1;
}

void process_scan(struct bridge *b, struct stats_scan *scan)
{
	struct tracked **ts = scratch(&scan_ts, scan->n + 1, sizeof(*ts));
	struct stats_domain **lv = scratch(&scan_lv, scan->n + 1, sizeof(*lv));
	size_t i, j, nlv = 0;
	static bool lv_failing;
	uint64_t now_ms;

	if (!ts || !lv) {
		warn("scan: out of memory");
		return;
	}
	for (i = 0; i < b->ndoms; i++)
		b->doms[i]->seen = false;
	for (i = 0; i < scan->n; i++) {
		struct stats_domain *sd = &scan->doms[i];
		struct tracked *t;

		if (!stats_state_active(sd->state))
			continue; /* shut off: gone, below */
		t = tracked_get(b, sd);
		if (!t) {
			warn("%s: out of memory", sd->name);
			continue;
		}
		t->seen = true;
		if (strcmp(t->name, sd->name)) {
			char *n = strdup(sd->name);

			if (n) {
				free(t->name);
				t->name = n;
			}
		}
		if (t->dom)
			virDomainFree(t->dom);
		t->dom = sd->dom; /* the scan's reference, now ours */
		ts[i] = t;
		if (!host_sample(b, t, sd))
			lv[nlv++] = sd;
	}
	/* The domains that only libvirt can tell about: one call for all. */
	if (nlv && stats_source_libvirt_vcpus(lv, nlv) < 0) {
		if (!lv_failing)
			warn("libvirt's vCPU statistics: %s (until they work "
			     "again, not repeated)", lv_error());
		lv_failing = true;
	} else if (nlv) {
		lv_failing = false;
	}
	for (i = 0; i < scan->n; i++) {
		if (!ts[i])
			continue;
		scan->doms[i].dom = NULL; /* now ts[i]->dom */
		domain_scan(b, ts[i], &scan->doms[i], scan->t_ns);
	}

	now_ms = unix_ms();
	for (i = j = 0; i < b->ndoms; i++) {
		if (b->doms[i]->seen || still_active(b, b->doms[i])) {
			lease_renew(b, b->doms[i], now_ms);
			b->doms[j++] = b->doms[i];
			continue;
		}
		unwatch(b, b->doms[i], "the domain is gone", true);
		tracked_free(b->doms[i]);
	}
	b->ndoms = j;
	b->scans_done++;
}

void print_once(const struct bridge *b)
{
	for (size_t i = 0; i < b->ndoms; i++) {
		struct tracked *t = b->doms[i];

		if (t->skipped)
			printf("%s: SKIPPED (%s)\n", t->name, t->reason);
		else
			printf("%s: %s (%s)\n", t->name,
			       sysidle_state_name(t->published), t->reason);
		if (b->opt.verbose && t->watched && t->dom) {
			char *back = publish_read_back(t->dom);

			printf("%s: metadata %s read back: %s\n", t->name,
			       PUBLISH_NS, back ? back : lv_error());
			free(back);
		}
	}
	if (!b->ndoms)
		printf("no active domains\n");
	fflush(stdout);
}

void domains_free(struct bridge *b)
{
	for (size_t i = 0; i < b->nunknown; i++)
		free(b->unknown[i]);
	free(b->unknown);
	b->unknown = NULL;
	b->nunknown = 0;
	free(b->doms);
	b->doms = NULL;
	b->ndoms = 0;
	free(scan_buf.p);
	free(scan_ts.p);
	free(scan_lv.p);
	scan_buf = scan_ts = scan_lv = (struct scratch){ 0 };
}
