/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Fuzz target: sysidle-libvirt's --stats-file reader (stats_file.c) and
 * what the bridge does with each scan it replays: the statistics by name
 * (stats_source.c) and the domain's state machine (domain_idle.c). The
 * input is the file. Its domains are matched against libvirt's test
 * driver (in process, no daemon: one running domain named "test").
 * Invariants: a file is either refused with a message or yields at least
 * one scan; every scan's report is consistent (idle vCPUs <= vCPUs, a
 * state the library knows, a since time that is a sample's time).
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <libvirt/virterror.h>

#include "domain_idle.h"
#include "stats_source.h"

#define FUZZ_SCANS_MAX 64 /* scans replayed per input */

static virConnectPtr conn;

static void quiet(void *opaque, virErrorPtr err)
{
	(void)opaque;
	(void)err;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	virSetErrorFunc(NULL, quiet);
	conn = virConnectOpen("test:///default");
	if (!conn) {
		fprintf(stderr, "fuzz-stats-file: libvirt's test driver "
			"(test:///default) does not open\n");
		exit(1);
	}
	return 0;
}

/* One replayed scan into @d; checks the report. */
static void feed(struct domain_idle *d, const struct stats_scan *scan)
{
	for (size_t i = 0; i < scan->n; i++) {
		const struct stats_domain *sd = &scan->doms[i];
		struct vcpu_sample *buf = calloc(sd->nvcpus + 1, sizeof(*buf));
		struct domain_sample s;
		struct domain_idle_report r;
		int rc;

		if (!buf)
			return;
		stats_domain_sample(sd, scan->t_ns, buf, &s);
		rc = domain_idle_scan(d, &s, &r);
		if (rc == DOMAIN_IDLE_OK) {
			assert(r.idle_cpus <= r.ncpus);
			assert(r.to <= SYSIDLE_FULL_NOTED);
			assert(domain_idle_state(d) == r.to);
			assert(domain_idle_since_ns(d) <= scan->t_ns);
		}
		assert(memchr(r.reason, '\0', sizeof(r.reason)));
		free(buf);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64], err[256] = "";
	struct stats_file *f;
	struct domain_idle *d;
	bool stopped = false;
	int fd = memfd_create("stats", MFD_CLOEXEC);

	if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size)) {
		perror("fuzz-stats-file: memfd");
		abort();
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	f = stats_file_open(path, -1, &stopped, err, sizeof(err));
	close(fd);
	if (!f) {
		assert(err[0] && !stopped); /* refused, saying why */
		return 0;
	}
	assert(!stats_file_done(f)); /* at least one scan */
	d = domain_idle_new();
	for (int n = 0; d && n < FUZZ_SCANS_MAX && !stats_file_done(f); n++) {
		struct stats_scan scan;

		if (stats_file_next(f, conn, &scan))
			break;
		feed(d, &scan);
		for (size_t i = 0; stats_file_unmatched(f, i); i++)
			;
		stats_scan_free(&scan);
	}
	domain_idle_free(d);
	stats_file_close(f);
	return 0;
}
