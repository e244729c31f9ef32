/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Publishing a domain's state: its libvirt metadata (the urn:sysidle:1
 * element of common/URN-SYSIDLE.md, written by common's sysidle_doc.c,
 * prefix "sysidle", live) and the hooks (DIR/vm, DIR/vm.d/ *, through the
 * bridge's hook queue, hook_queue.c).
 */
#ifndef SYSIDLE_LIBVIRT_PUBLISH_H
#define SYSIDLE_LIBVIRT_PUBLISH_H

#include <stdbool.h>
#include <stdint.h>

#include <libvirt/libvirt.h>
#include <sysidle/sysidle.h>

#include "sysidle_doc.h"

#define PUBLISH_NS SYSIDLE_DOC_NS
#define PUBLISH_KEY SYSIDLE_DOC_PREFIX

/* Set @doc as the domain's live metadata, the element of
 * sysidle_doc_element(). 0, or -1 (libvirt error set). */
int publish_metadata(virDomainPtr dom, const struct sysidle_doc *doc);
/* Remove it. 0, or -1. */
int publish_remove(virDomainPtr dom);
/* What libvirt now holds (malloc'd), NULL: none or an error. */
char *publish_read_back(virDomainPtr dom);

/* The hooks for a state change from @from to @doc->state (at
 * @doc->since_unix_ms): "idle begin" on reaching FULL_NOTED, "idle end MS"
 * on leaving it after @full_idle_ms; @xml their stdin (hook_queue_post). */
void publish_hooks_change(const struct hook_domain *hd, enum sysidle_state from,
			  const struct sysidle_doc *doc, uint64_t full_idle_ms,
			  const char *xml);

#endif
