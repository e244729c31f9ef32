/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Where the bridge's samples come from: one scan is the list of libvirt's
 * active domains, each with its state and its vCPUs' halt-exit counts and
 * blocking flags. stats_source.c asks libvirt for all of it in one call
 * (virConnectGetAllDomainStats); with --stats-file, stats_file.c replays
 * recorded statistics instead while the domains still come from libvirt.
 */
#ifndef SYSIDLE_LIBVIRT_STATS_SOURCE_H
#define SYSIDLE_LIBVIRT_STATS_SOURCE_H

#include <stdbool.h>
#include <stdint.h>

#include <libvirt/libvirt.h>

#include "domain_idle.h"

#define STATS_MAX_VCPUS 16384 /* vcpu.N above this: ignored */

/* One domain in one scan. */
struct stats_domain {
	virDomainPtr dom;        /* a reference owned by the scan */
	char *name;
	char uuid[VIR_UUID_STRING_BUFLEN];
	int state;               /* virDomainState (state.state) */
	unsigned int vcpu_current; /* vcpu.current, 0: not given */
	/* vcpu.N.*, indexed by N; seen[N]: some vcpu.N.* statistic given */
	struct vcpu_sample *vcpus;
	bool *seen;
	unsigned int nvcpus;     /* allocated: highest N + 1 */
	bool borrowed;           /* vcpus and seen belong to a host_vm
				  * (stats_host.c): not freed with the scan */
	bool cached;             /* name belongs to the cached domain list
				  * (stats_source_list): not freed either */
};

struct stats_scan {
	uint64_t t_ns;           /* when (monotonic; recorded time in replay) */
	struct stats_domain *doms;
	size_t n;
};

void stats_scan_free(struct stats_scan *scan);

/* Record statistic @key = @value for @sd (unknown keys are ignored).
 * Returns -1 on out of memory. */
int stats_domain_set(struct stats_domain *sd, const char *key, uint64_t value);

/* Is @state a domain that is there (running, paused, ...)? Shut off and
 * crashed domains are not. */
bool stats_state_active(int state);

/* The sample domain_idle wants from @sd; @buf gets the compacted vCPUs
 * (the indices seen, in order; at least @sd->nvcpus entries). */
void stats_domain_sample(const struct stats_domain *sd, uint64_t t_ns,
			 struct vcpu_sample *buf, struct domain_sample *out);

/* stats_source.c: one virConnectGetAllDomainStats call for the active
 * domains, VIR_DOMAIN_STATS_STATE and, with @vcpus, VIR_DOMAIN_STATS_VCPU
 * (which has QEMU run a job on every vCPU thread of every domain). 0, or
 * -1 (libvirt's error is left set). */
int stats_source_libvirt(virConnectPtr conn, bool vcpus,
			 struct stats_scan *out);
/* The active domains and their states, without statistics: from the
 * list kept since the last time it was asked for (@relist: ask libvirt
 * again, one virConnectGetAllDomainStats(VIR_DOMAIN_STATS_STATE) call).
 * 0, or -1 (libvirt's error is left set; the list is dropped). */
int stats_source_list(virConnectPtr conn, bool relist,
		      struct stats_scan *out);
/* Drop the kept list (its connection is closing). */
void stats_source_list_drop(void);
/* The vCPU statistics of the @n domains @sds of a scan (which have none
 * yet) in one virDomainListGetStats call. 0, or -1 (libvirt's error). */
int stats_source_libvirt_vcpus(struct stats_domain **sds, size_t n);

/* stats_file.c: recorded statistics (--stats-file). The file is read and
 * checked whole by stats_file_open (errors: a message in @err, NULL). The
 * caller guarantees that @stop_fd is a descriptor (-1: none) that becomes
 * readable when the program must stop (the stop signals' signalfd): the
 * reading, and a FIFO's wait for a writer, then end within one read
 * (NULL, *@stopped true). @stop_fd is polled, never read. */
struct stats_file;
struct stats_file *stats_file_open(const char *path, int stop_fd,
				   bool *stopped, char *err, size_t esize);
void stats_file_close(struct stats_file *f);
/* True when every scan of the file has been replayed. */
bool stats_file_done(const struct stats_file *f);
/* The next recorded scan, applied to libvirt's active domains (a domain
 * is matched by name or uuid; one without a record has no statistics).
 * 0, -1 (a libvirt error, left set; the scan is not consumed). */
int stats_file_next(struct stats_file *f, virConnectPtr conn,
		    struct stats_scan *out);
/* Records of the last scan that named no libvirt domain (for a warning). */
const char *stats_file_unmatched(const struct stats_file *f, size_t i);

#endif
