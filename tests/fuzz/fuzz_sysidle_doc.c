/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Fuzz target: the documents common/ reads. The input is tried as
 *  - a urn:sysidle:1 document (sysidle_doc_parse: the element alone,
 *    libvirt's metadata or a domain XML holding it). What it accepts must
 *    survive a round trip: written back (sysidle_doc_element, and inside a
 *    hook's domain XML with the input as the domain's name and uuid, which
 *    must be escaped) and read again, it gives the same document;
 *  - a hook timeout (hooks_parse_timeout): what it accepts is a positive
 *    duration.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "hookrun.h"
#include "sysidle_doc.h"

static void same(const struct sysidle_doc *a, const struct sysidle_doc *b)
{
	assert(a->state == b->state);
	assert(a->since_unix_ms == b->since_unix_ms);
	assert(a->full_idle_periods == b->full_idle_periods);
	assert(a->vcpus == b->vcpus);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	struct sysidle_doc doc, again;
	uint64_t ns;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	if (sysidle_doc_parse(text, &doc) == 0) {
		struct hook_domain dom = { text, text, doc.vcpus };
		char *el = sysidle_doc_element(&doc);
		char *xml = sysidle_doc_domain_xml(&dom, &doc);

		assert(doc.state < SYSIDLE_NR_STATES);
		assert(el && sysidle_doc_parse(el, &again) == 0);
		same(&doc, &again);
		assert(xml && sysidle_doc_parse(xml, &again) == 0);
		same(&doc, &again);
		free(el);
		free(xml);
	}
	if (hooks_parse_timeout(text, &ns) == 0)
		assert(ns > 0 && ns <= HOOKS_TIMEOUT_MAX_S * 1000000000ull);
	free(text);
	return 0;
}
