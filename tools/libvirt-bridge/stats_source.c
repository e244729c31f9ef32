/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Samples from libvirt: virConnectGetAllDomainStats(VIR_DOMAIN_STATS_VCPU |
 * VIR_DOMAIN_STATS_STATE) for the active domains, and the helpers both
 * sources share (a statistic by name, a stats_domain as a domain_sample).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "monotonic.h"
#include "stats_source.h"

void stats_scan_free(struct stats_scan *scan)
{
	for (size_t i = 0; i < scan->n; i++) {
		struct stats_domain *sd = &scan->doms[i];

		if (sd->dom)
			virDomainFree(sd->dom);
		if (!sd->cached)
			free(sd->name);
		if (!sd->borrowed) {
			free(sd->vcpus);
			free(sd->seen);
		}
	}
	free(scan->doms);
	scan->doms = NULL;
	scan->n = 0;
}

bool stats_state_active(int state)
{
	return state != VIR_DOMAIN_SHUTOFF && state != VIR_DOMAIN_CRASHED &&
	       state != VIR_DOMAIN_NOSTATE;
}

/* vcpu.N.halt_exits.sum and the like: @n and the rest. */
static bool vcpu_key(const char *key, unsigned int *n, const char **rest)
{
	char *end;
	unsigned long v;

	if (strncmp(key, "vcpu.", 5) || key[5] < '0' || key[5] > '9')
		return false;
	errno = 0;
	v = strtoul(key + 5, &end, 10);
	if (errno || *end != '.' || v >= STATS_MAX_VCPUS)
		return false;
	*n = (unsigned int)v;
	*rest = end + 1;
	return true;
}

int stats_domain_set(struct stats_domain *sd, const char *key, uint64_t value)
{
	unsigned int n;
	const char *rest;

	if (!strcmp(key, "state.state")) {
		sd->state = (int)value;
		return 0;
	}
	if (!strcmp(key, "vcpu.current")) {
		sd->vcpu_current = value > STATS_MAX_VCPUS ? STATS_MAX_VCPUS :
				   (unsigned int)value;
		return 0;
	}
	if (!vcpu_key(key, &n, &rest))
		return 0;
	if (n >= sd->nvcpus) {
		struct vcpu_sample *v = realloc(sd->vcpus, (n + 1) * sizeof(*v));
		bool *seen;

		if (!v)
			return -1;
		sd->vcpus = v;
		seen = realloc(sd->seen, (n + 1) * sizeof(*seen));
		if (!seen)
			return -1;
		sd->seen = seen;
		memset(sd->vcpus + sd->nvcpus, 0,
		       (n + 1 - sd->nvcpus) * sizeof(*v));
		memset(sd->seen + sd->nvcpus, 0,
		       (n + 1 - sd->nvcpus) * sizeof(*seen));
		sd->nvcpus = n + 1;
	}
	sd->seen[n] = true;
	if (!strcmp(rest, "halt_exits.sum")) {
		sd->vcpus[n].has_halt_exits = true;
		sd->vcpus[n].halt_exits = value;
	} else if (!strcmp(rest, "blocking.cur")) {
		sd->vcpus[n].has_blocking = true;
		sd->vcpus[n].blocking = value != 0;
	} else if (!strcmp(rest, "halt_wait_ns.sum")) {
		sd->vcpus[n].has_halt_wait = true;
		sd->vcpus[n].halt_wait_ns = value;
	}
	return 0;
}

void stats_domain_sample(const struct stats_domain *sd, uint64_t t_ns,
			 struct vcpu_sample *buf, struct domain_sample *out)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < sd->nvcpus; i++)
		if (sd->seen[i])
			buf[n++] = sd->vcpus[i];
	*out = (struct domain_sample){
		.t_ns = t_ns,
		.running = sd->state == VIR_DOMAIN_RUNNING ||
			   sd->state == VIR_DOMAIN_BLOCKED,
		.paused = sd->state == VIR_DOMAIN_PAUSED,
		/* No vcpu.N.* at all: as many vCPUs as libvirt says, none
		 * with statistics (domain_idle: skipped). */
		.ncpus = n ? n : sd->vcpu_current,
		.vcpus = n ? buf : NULL,
	};
}

/* A typed parameter as a number (strings: not one of ours). */
static bool param_value(const virTypedParameter *p, uint64_t *v)
{
	switch (p->type) {
	case VIR_TYPED_PARAM_INT: *v = (uint64_t)(int64_t)p->value.i; break;
	case VIR_TYPED_PARAM_UINT: *v = p->value.ui; break;
	case VIR_TYPED_PARAM_LLONG: *v = (uint64_t)p->value.l; break;
	case VIR_TYPED_PARAM_ULLONG: *v = p->value.ul; break;
	case VIR_TYPED_PARAM_BOOLEAN: *v = p->value.b != 0; break;
	case VIR_TYPED_PARAM_DOUBLE: *v = (uint64_t)p->value.d; break;
	default: return false;
	}
	return true;
}

/* @rec's statistics into @sd. 0, or -1 (out of memory). */
static int record_params(const virDomainStatsRecord *rec,
			 struct stats_domain *sd)
{
	uint64_t v;

	for (int j = 0; j < rec->nparams; j++)
		if (param_value(&rec->params[j], &v) &&
		    stats_domain_set(sd, rec->params[j].field, v) < 0)
			return -1;
	return 0;
}

int stats_source_libvirt_vcpus(struct stats_domain **sds, size_t n)
{
	virDomainStatsRecordPtr *recs = NULL;
	virDomainPtr *list = calloc(n + 1, sizeof(*list));
	int got, rc = 0;

	if (!list)
		return -1;
	for (size_t i = 0; i < n; i++)
		list[i] = sds[i]->dom;
	got = virDomainListGetStats(list, VIR_DOMAIN_STATS_VCPU, &recs, 0);
	free(list);
	if (got < 0)
		return -1;
	for (int i = 0; i < got && !rc; i++) {
		char uuid[VIR_UUID_STRING_BUFLEN];

		if (virDomainGetUUIDString(recs[i]->dom, uuid) < 0)
			continue;
		for (size_t k = 0; k < n; k++)
			if (!strcmp(sds[k]->uuid, uuid))
				rc = record_params(recs[i], sds[k]);
	}
	virDomainStatsRecordListFree(recs);
	return rc;
}

int stats_source_libvirt(virConnectPtr conn, bool vcpus,
			 struct stats_scan *out)
{
	virDomainStatsRecordPtr *recs = NULL;
	int n, rc = 0;

	memset(out, 0, sizeof(*out));
	n = virConnectGetAllDomainStats(conn, VIR_DOMAIN_STATS_STATE |
					(vcpus ? VIR_DOMAIN_STATS_VCPU : 0),
					&recs,
					VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE);
	out->t_ns = monotonic_ns();
	if (n < 0)
		return -1;
	out->doms = calloc((size_t)n + 1, sizeof(*out->doms));
	if (!out->doms) {
		virDomainStatsRecordListFree(recs);
		return -1;
	}
	for (int i = 0; i < n && !rc; i++) {
		struct stats_domain *sd = &out->doms[out->n];
		const char *name = virDomainGetName(recs[i]->dom);

		if (!name || virDomainGetUUIDString(recs[i]->dom, sd->uuid) < 0)
			continue; /* gone meanwhile */
		sd->name = strdup(name);
		sd->state = VIR_DOMAIN_RUNNING;
		if (!sd->name || virDomainRef(recs[i]->dom) < 0) {
			free(sd->name);
			sd->name = NULL;
			rc = -1;
			break;
		}
		sd->dom = recs[i]->dom;
		out->n++;
		rc = record_params(recs[i], sd);
	}
	virDomainStatsRecordListFree(recs);
	if (rc)
		stats_scan_free(out);
	return rc;
}

/* The list kept between relists: its domains' references and names. */
static struct stats_scan kept;
static bool have_kept;

void stats_source_list_drop(void)
{
	stats_scan_free(&kept);
	have_kept = false;
}

int stats_source_list(virConnectPtr conn, bool relist,
		      struct stats_scan *out)
{
	memset(out, 0, sizeof(*out));
	if (relist || !have_kept) {
		stats_source_list_drop();
		if (stats_source_libvirt(conn, false, &kept) < 0)
			return -1;
		have_kept = true;
	}
	out->t_ns = monotonic_ns();
	out->doms = calloc(kept.n + 1, sizeof(*out->doms));
	if (!out->doms)
		return -1;
	for (size_t i = 0; i < kept.n; i++) {
		struct stats_domain *sd = &out->doms[i];

		if (virDomainRef(kept.doms[i].dom) < 0)
			continue;
		sd->dom = kept.doms[i].dom;
		sd->name = kept.doms[i].name;
		sd->cached = true;
		memcpy(sd->uuid, kept.doms[i].uuid, sizeof(sd->uuid));
		sd->state = kept.doms[i].state;
		out->n++;
	}
	return 0;
}
