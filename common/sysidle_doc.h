/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The urn:sysidle:1 document: one element, one writer, one reader (see
 * URN-SYSIDLE.md). Written as a libvirt domain's live metadata (by the
 * libvirt bridge) and inside the domain XML a hook reads on stdin (by the
 * hook runner, for the VMM and the bridge):
 *
 *   <state name='FULL_NOTED' state='FULL_NOTED' num='4'
 *          since='2026-01-02T03:04:05.678Z' since_unix_ms='1767323045678'
 *          full_idle_periods='2' vcpus='2'/>
 *
 * in the namespace urn:sysidle:1 (prefix "sysidle" in a domain XML).
 */
#ifndef SYSIDLE_COMMON_SYSIDLE_DOC_H
#define SYSIDLE_COMMON_SYSIDLE_DOC_H

#include <stdbool.h>
#include <stdint.h>

#include <sysidle/sysidle.h>

#define SYSIDLE_DOC_NS "urn:sysidle:1"
#define SYSIDLE_DOC_PREFIX "sysidle" /* also libvirt's metadata key */
/* The longest text sysidle_doc_parse reads (the element, or a domain XML
 * holding it): 1 MiB. */
#define SYSIDLE_DOC_MAX (1u << 20)

/* The domain an event or a document is about. */
struct hook_domain {
	const char *name;   /* argv[1] of a hook, and <name> */
	const char *uuid;   /* <uuid>; also what tells domains apart */
	unsigned int ncpus; /* <vcpu> */
};

struct sysidle_doc {
	enum sysidle_state state;   /* name= and state= (the same), num= */
	uint64_t since_unix_ms;     /* wall clock of the change to @state;
				     * since_unix_ms= and since= */
	uint64_t full_idle_periods; /* FULL_NOTED reached, since watched */
	unsigned int vcpus;
	/* The duty cycle as of @since_unix_ms (duty_cycle.h): the share of
	 * the last 1 min, 1 h and 24 h fully idle, in thousandths (0..1000),
	 * written as full_idle_ratio_1m=, _1h=, _24h= ('0.973') when
	 * @has_duty; the last leave of full idle, left_full_idle_unix_ms=,
	 * when not 0. */
	bool has_duty;
	unsigned int full_idle_permille[3];
	uint64_t left_full_idle_unix_ms;
	/* The lease of a long-running writer (the libvirt bridge): who wrote
	 * it and until when a reader may trust it. valid_until_unix_ms 0: no
	 * lease, and none of these attributes is written (the VMM's hooks). */
	uint64_t valid_until_unix_ms;
	uint64_t writer_pid;         /* the writer process */
	uint64_t writer_start_ticks; /* its start: /proc/PID/stat field 22 */
	char writer_host[65];        /* its host name (gethostname) */
};

/* The element without a namespace prefix: what virDomainSetMetadata takes
 * (libvirt puts it in SYSIDLE_DOC_NS under the key SYSIDLE_DOC_PREFIX).
 * Malloc'd; NULL: out of memory. */
char *sysidle_doc_element(const struct sysidle_doc *doc);

/* The domain XML a hook reads on stdin, the element as libvirt's own domain
 * XML holds it, one line with its newline:
 *   <domain type='kvm'><name>NAME</name><uuid>UUID</uuid><vcpu>N</vcpu>
 *   <metadata><sysidle:state xmlns:sysidle='urn:sysidle:1' .../>
 *   </metadata></domain>
 * (@dom's name and uuid XML-escaped). Malloc'd; NULL: out of memory. */
char *sysidle_doc_domain_xml(const struct hook_domain *dom,
			     const struct sysidle_doc *doc);

/* Read the first element named "state" (any prefix, either quote) in @xml:
 * the element alone, libvirt's metadata, or a domain XML holding it. It
 * needs since_unix_ms= and at least one of name=, state=, num= (all those
 * present must agree); since=, full_idle_periods=, vcpus= and the lease
 * (valid_until_unix_ms=, writer_host=, writer_pid=, writer_start_ticks=)
 * are optional (0 or "" when missing), as are the duty cycle's
 * (full_idle_ratio_1m=, _1h=, _24h=: a decimal 0..1, its first 3 decimals
 * kept; @has_duty when any of them is there; left_full_idle_unix_ms=);
 * unknown attributes are ignored. @xml must be NULL or
 * NUL-terminated; at most SYSIDLE_DOC_MAX bytes of it are looked at for
 * its length, and the time taken is linear in it. Returns 0 and fills
 * @doc, or -1 (no such element, a bad or missing value, or a text longer
 * than SYSIDLE_DOC_MAX). */
int sysidle_doc_parse(const char *xml, struct sysidle_doc *doc);

#endif
