/* SPDX-License-Identifier: GPL-2.0-only */
/* A domain's state to libvirt's metadata and to the hooks: see publish.h. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "publish.h"

char *publish_element(const struct publish_state *ps)
{
	char *xml;

	if (asprintf(&xml, "<state name=\"%s\" num=\"%d\" since_unix_ms=\"%"
		     PRIu64 "\" full_idle_periods=\"%" PRIu64 "\" vcpus=\"%u\"/>",
		     sysidle_state_name(ps->state), (int)ps->state,
		     ps->since_unix_ms, ps->full_idle_periods, ps->vcpus) < 0)
		return NULL;
	return xml;
}

int publish_metadata(virDomainPtr dom, const struct publish_state *ps)
{
	char *xml = publish_element(ps);
	int rc;

	if (!xml)
		return -1;
	rc = virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, xml,
				  PUBLISH_KEY, PUBLISH_NS,
				  VIR_DOMAIN_AFFECT_LIVE);
	free(xml);
	return rc < 0 ? -1 : 0;
}

int publish_remove(virDomainPtr dom)
{
	return virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, NULL,
				    PUBLISH_KEY, PUBLISH_NS,
				    VIR_DOMAIN_AFFECT_LIVE) < 0 ? -1 : 0;
}

char *publish_read_back(virDomainPtr dom)
{
	return virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT,
				    PUBLISH_NS, VIR_DOMAIN_AFFECT_LIVE);
}

void publish_hooks_change(const struct hook_domain *hd, enum sysidle_state from,
			  enum sysidle_state to, uint64_t full_idle_ms,
			  uint64_t unix_ms)
{
	char ms[32];

	if (from == SYSIDLE_FULL_NOTED && to != SYSIDLE_FULL_NOTED) {
		snprintf(ms, sizeof(ms), "%" PRIu64, full_idle_ms);
		hooks_post(hd, "idle", "end", ms, (int)to, unix_ms);
	} else if (to == SYSIDLE_FULL_NOTED && from != SYSIDLE_FULL_NOTED) {
		hooks_post(hd, "idle", "begin", NULL, (int)to, unix_ms);
	}
}
