/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Publishing a domain's state: its libvirt metadata (an element in the
 * namespace urn:sysidle:1, prefix "sysidle", live) and the hooks (DIR/vm,
 * DIR/vm.d/ *, run by the VMM's hooks.c).
 */
#ifndef SYSIDLE_LIBVIRT_PUBLISH_H
#define SYSIDLE_LIBVIRT_PUBLISH_H

#include <stdbool.h>
#include <stdint.h>

#include <libvirt/libvirt.h>
#include <sysidle/sysidle.h>

#include "../../vmm/hooks.h"

#define PUBLISH_NS "urn:sysidle:1"
#define PUBLISH_KEY "sysidle"

struct publish_state {
	enum sysidle_state state;
	uint64_t since_unix_ms;      /* wall clock of the change to @state */
	uint64_t full_idle_periods;  /* FULL_NOTED reached, since watched */
	unsigned int vcpus;
};

/* The element, e.g. <state name="FULL_NOTED" num="4"
 * since_unix_ms="1767225600123" full_idle_periods="2" vcpus="2"/>
 * (malloc'd; NULL: out of memory). */
char *publish_element(const struct publish_state *ps);
/* Set it as the domain's live metadata. 0, or -1 (libvirt error set). */
int publish_metadata(virDomainPtr dom, const struct publish_state *ps);
/* Remove it. 0, or -1. */
int publish_remove(virDomainPtr dom);
/* What libvirt now holds (malloc'd), NULL: none or an error. */
char *publish_read_back(virDomainPtr dom);

/* The hooks for a state change from @from to @to at @unix_ms: "idle begin"
 * on reaching FULL_NOTED, "idle end MS" on leaving it after @full_idle_ms. */
void publish_hooks_change(const struct hook_domain *hd, enum sysidle_state from,
			  enum sysidle_state to, uint64_t full_idle_ms,
			  uint64_t unix_ms);

#endif
