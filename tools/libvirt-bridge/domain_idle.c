/* SPDX-License-Identifier: GPL-2.0-only */
/* One domain's full-idle state machine from vCPU samples: see domain_idle.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain_idle.h"

struct vcpu_track {
	bool have_prev;          /* a previous sample to compare with */
	struct vcpu_sample prev;
	bool idle;               /* entered in the library */
};

struct domain_idle {
	struct sysidle *s;       /* NULL: no statistics yet */
	unsigned int ncpus;
	struct vcpu_track *vcpus;
	uint64_t now_ns;         /* the library's clock: the current sample */
	uint64_t prev_ns;        /* the previous sample's */
	enum sysidle_state state;
	uint64_t since_ns;       /* sample time of the last change */
	uint64_t noted_ns;       /* when FULL_NOTED was reached */
	uint64_t full_periods;
	unsigned int idle_scans;
};

static uint64_t sample_clock(void *arg)
{
	return ((struct domain_idle *)arg)->now_ns;
}

struct domain_idle *domain_idle_new(void)
{
	return calloc(1, sizeof(struct domain_idle));
}

static void drop_machine(struct domain_idle *d)
{
	sysidle_destroy(d->s);
	free(d->vcpus);
	d->s = NULL;
	d->vcpus = NULL;
	d->ncpus = 0;
	d->idle_scans = 0;
}

void domain_idle_free(struct domain_idle *d)
{
	if (!d)
		return;
	drop_machine(d);
	free(d);
}

static int make_machine(struct domain_idle *d, unsigned int ncpus)
{
	struct sysidle_config cfg;

	sysidle_config_init(&cfg, ncpus);
	cfg.timekeeper = SYSIDLE_NO_TIMEKEEPER;
	cfg.clock = sample_clock;
	cfg.clock_arg = d;
	d->vcpus = calloc(ncpus, sizeof(*d->vcpus));
	d->s = d->vcpus ? sysidle_create(&cfg) : NULL;
	if (!d->s) {
		int err = errno ? errno : ENOMEM;

		free(d->vcpus);
		d->vcpus = NULL;
		errno = err;
		return -1;
	}
	d->ncpus = ncpus;
	d->idle_scans = 0;
	return 0;
}

/* The state changes to @to at the current sample: note the times. */
static void set_state(struct domain_idle *d, struct domain_idle_report *r,
		      enum sysidle_state to)
{
	if (d->state == SYSIDLE_FULL_NOTED && to != SYSIDLE_FULL_NOTED) {
		r->left_full = true;
		r->full_idle_ms = (d->now_ns - d->noted_ns) / 1000000u;
	}
	if (to == SYSIDLE_FULL_NOTED && d->state != SYSIDLE_FULL_NOTED) {
		d->noted_ns = d->now_ns;
		d->full_periods++;
	}
	if (to != d->state)
		d->since_ns = d->now_ns;
	d->state = to;
}

static bool has_stats(const struct domain_sample *s)
{
	if (!s->ncpus || !s->vcpus)
		return false;
	for (unsigned int i = 0; i < s->ncpus; i++)
		if (!s->vcpus[i].has_halt_exits ||
		    (!s->vcpus[i].has_blocking && !s->vcpus[i].has_halt_wait))
			return false;
	return true;
}

static const char went_back[] = "statistics went back (restarted)";

/* Was the vCPU idle for the whole interval (@elapsed ns) from @v->prev to
 * @vs? If not, @why says why. See domain_idle.h. */
static bool vcpu_idle(const struct vcpu_track *v, const struct vcpu_sample *vs,
		      uint64_t elapsed, const char **why)
{
	const struct vcpu_sample *p = &v->prev;
	bool waits = vs->has_halt_wait && p->has_halt_wait;

	if (!v->have_prev) {
		*why = "first sample";
		return false;
	}
	if (vs->halt_exits < p->halt_exits ||
	    (waits && vs->halt_wait_ns < p->halt_wait_ns)) {
		*why = went_back;
		return false;
	}
	if (vs->halt_exits != p->halt_exits) {
		*why = "woke and halted again";
		return false;
	}
	if (vs->has_blocking && p->has_blocking && vs->blocking && p->blocking)
		return true;
	if (waits && (vs->halt_wait_ns - p->halt_wait_ns) * 100 >=
		     elapsed * DOMAIN_IDLE_WAIT_PCT)
		return true;
	if (waits)
		*why = "not halted for the whole interval";
	else if (!vs->blocking)
		*why = "not blocking";
	else
		*why = "was not blocking at the previous sample";
	return false;
}

int domain_idle_scan(struct domain_idle *d, const struct domain_sample *s,
		     struct domain_idle_report *r)
{
	unsigned int i, idle = 0, first_busy = 0;
	const char *busy_why = NULL;
	uint64_t elapsed;
	char *p;
	size_t n;

	memset(r, 0, sizeof(*r));
	r->from = d->state;
	if (s->t_ns > d->now_ns)
		d->now_ns = s->t_ns;
	if (s->running && !has_stats(s)) {
		drop_machine(d);
		set_state(d, r, SYSIDLE_NOT);
		r->to = d->state;
		snprintf(r->reason, sizeof(r->reason), "no vcpu.N.halt_exits.sum"
			 " with vcpu.N.blocking.cur or vcpu.N.halt_wait_ns.sum "
			 "statistics: not watched");
		return DOMAIN_IDLE_NO_STATS;
	}
	if (s->running && d->s && d->ncpus != s->ncpus) {
		r->recreated = true;
		r->old_ncpus = d->ncpus;
		drop_machine(d);
		set_state(d, r, SYSIDLE_NOT);
	}
	if (s->running && !d->s && make_machine(d, s->ncpus) < 0)
		return DOMAIN_IDLE_ERROR;
	if (!d->s) {
		/* Not running, never seen running with statistics. */
		r->to = d->state;
		snprintf(r->reason, sizeof(r->reason), "not running");
		return DOMAIN_IDLE_OK;
	}

	if (s->paused) {
		/* Suspended: nothing runs, nothing is learnt; the state stays
		 * (a consolidator that suspended a fully idle domain must not
		 * see it wake). The next running sample is a new baseline. */
		for (i = 0; i < d->ncpus; i++)
			d->vcpus[i].have_prev = false;
		d->prev_ns = d->now_ns;
		r->to = d->state;
		r->ncpus = d->ncpus;
		r->idle_scans = d->idle_scans;
		snprintf(r->reason, sizeof(r->reason), "domain paused: state "
			 "kept");
		return DOMAIN_IDLE_OK;
	}
	elapsed = d->now_ns - d->prev_ns;
	/* Exits first, then entries, then the scan. */
	for (int pass = 0; pass < 2; pass++) {
		for (i = 0; i < d->ncpus; i++) {
			struct vcpu_track *v = &d->vcpus[i];
			const struct vcpu_sample *vs = s->running ? &s->vcpus[i] : NULL;
			const char *why = "not running";
			bool now_idle = vs && vcpu_idle(v, vs, elapsed, &why);

			if (why == went_back)
				r->counter_reset = true;
			if (pass == 0 && !now_idle) {
				if (!busy_why) {
					busy_why = why;
					first_busy = i;
				}
				if (v->idle) {
					v->idle = false;
					sysidle_exit(d->s, i);
				}
			} else if (pass == 1 && now_idle) {
				idle++;
				if (!v->idle) {
					v->idle = true;
					sysidle_enter(d->s, i);
				}
			}
		}
	}
	for (i = 0; i < d->ncpus; i++) {
		d->vcpus[i].have_prev = s->running;
		if (s->running)
			d->vcpus[i].prev = s->vcpus[i];
	}
	d->prev_ns = d->now_ns;
	/* The library's poll scans inline on a small machine; above that the
	 * caller scans at its own pace: here, once per sample. */
	if (d->ncpus > SYSIDLE_DEFAULT_SMALL)
		sysidle_scan(d->s);
	sysidle_poll(d->s);
	d->idle_scans = idle == d->ncpus ? d->idle_scans + 1 : 0;
	set_state(d, r, sysidle_state(d->s));

	r->to = d->state;
	r->ncpus = d->ncpus;
	r->idle_cpus = idle;
	r->idle_scans = d->idle_scans;
	p = r->reason;
	n = sizeof(r->reason);
	if (r->recreated) {
		int k = snprintf(p, n, "vCPU count %u -> %u, machine recreated; ",
				 r->old_ncpus, d->ncpus);

		p += k;
		n -= (size_t)k;
	}
	if (idle == d->ncpus)
		snprintf(p, n, "%u vCPU%s idle for %u scan%s", d->ncpus,
			 d->ncpus == 1 ? "" : "s", d->idle_scans,
			 d->idle_scans == 1 ? "" : "s");
	else if (!s->running)
		snprintf(p, n, "domain not running");
	else if (r->left_full)
		snprintf(p, n, "full idle ended after %" PRIu64 " ms: vCPU %u "
			 "%s", r->full_idle_ms, first_busy, busy_why);
	else
		snprintf(p, n, "vCPU %u %s; %u of %u vCPUs idle", first_busy,
			 busy_why, idle, d->ncpus);
	return DOMAIN_IDLE_OK;
}

enum sysidle_state domain_idle_state(const struct domain_idle *d)
{
	return d->state;
}

unsigned int domain_idle_ncpus(const struct domain_idle *d)
{
	return d->ncpus;
}

uint64_t domain_idle_full_periods(const struct domain_idle *d)
{
	return d->full_periods;
}

uint64_t domain_idle_since_ns(const struct domain_idle *d)
{
	return d->since_ns;
}
