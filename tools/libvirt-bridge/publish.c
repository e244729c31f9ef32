/* SPDX-License-Identifier: GPL-2.0-only */
/* A domain's state to libvirt's metadata and to the hooks: see publish.h. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "hook_queue.h"
#include "publish.h"

int publish_metadata(virDomainPtr dom, const struct sysidle_doc *doc)
{
	char *xml = sysidle_doc_element(doc);
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
			  const struct sysidle_doc *doc, uint64_t full_idle_ms,
			  const char *xml)
{
	enum sysidle_state to = doc->state;
	char ms[32];

	if (from == SYSIDLE_FULL_NOTED && to != SYSIDLE_FULL_NOTED) {
		snprintf(ms, sizeof(ms), "%" PRIu64, full_idle_ms);
		hook_queue_post(hd, "idle", "end", ms, doc, xml);
	} else if (to == SYSIDLE_FULL_NOTED && from != SYSIDLE_FULL_NOTED) {
		hook_queue_post(hd, "idle", "begin", NULL, doc, xml);
	}
}
