/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sysidlectl why NAME --wakes-file FILE: what wakes a libvirt domain as
 * the host sees it, from the bridge's --wakes-file (tools/libvirt-bridge/
 * README.md, "What wakes a domain: the host's view"): KVM's counters of
 * the VM and the QEMU threads' wake-ups, with their rates and what each
 * thread is, said as the host's view (which thread woke, not what in the
 * guest asked for it). The file is read whole, at most WAKES_FILE_MAX
 * bytes; what does not parse is an error, never a crash.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sysidlectl.h"

#define WAKES_FILE_MAX (16L << 20)
#define WAKES_THREADS_SHOWN 8

/* What a QEMU thread is, by the start of its name. */
static const struct { const char *prefix, *what; } threads[] = {
	{ "CPU ", "a vCPU thread: woken from HLT by the guest's tick, IPIs, "
		  "its devices; which one only the guest's hardware can say "
		  "(sysidle-vmm's why)" },
	{ "qemu-system", "QEMU's main loop: its timers, device emulation, "
			 "the monitor" },
	{ "IO mon_iothread", "the monitor's I/O thread: a management "
			     "client talking to QEMU" },
	{ "IO ", "an I/O thread: disk or network requests" },
	{ "worker", "QEMU's worker threads: blocking I/O done for the "
		    "guest" },
	{ "call_rcu", "QEMU's RCU thread: memory freed after updates" },
	{ "vhost", "a vhost thread: virtio network or disk in the host "
		   "kernel" },
};

/* KVM's counters shown, with what they say. */
static const struct { const char *key, *what; } kvm_counters[] = {
	{ "halt_wakeup", "vCPU wake-ups from HLT, all vCPUs" },
	{ "irq_injections", "interrupts injected into the guest" },
	{ "signal_exits", "exits for a signal to a vCPU thread (someone "
			  "outside: a kick)" },
	{ "halt_successful_poll", "wake-ups caught while polling" },
};

/* The words for thread name @name ("" when unknown). */
static const char *thread_what(const char *name)
{
	for (size_t i = 0; i < sizeof(threads) / sizeof(threads[0]); i++)
		if (!strncmp(name, threads[i].prefix,
			     strlen(threads[i].prefix)))
			return threads[i].what;
	return "";
}

/* The file @path parsed (the caller puts it), or NULL after an error
 * line. */
json_object *wakes_file_read(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	size_t n;
	json_object *o;

	if (!f) {
		errmsg("--wakes-file %s: %s", path, strerror(errno));
		return NULL;
	}
	buf = malloc(WAKES_FILE_MAX + 1);
	if (!buf) {
		fclose(f);
		errmsg("out of memory");
		return NULL;
	}
	n = fread(buf, 1, WAKES_FILE_MAX + 1, f);
	fclose(f);
	if (n > WAKES_FILE_MAX) {
		free(buf);
		errmsg("--wakes-file %s: larger than %ld bytes", path,
		       WAKES_FILE_MAX);
		return NULL;
	}
	buf[n] = '\0';
	o = json_tokener_parse(buf);
	free(buf);
	if (!o || !ctl_member(o, "domains", json_type_array)) {
		json_object_put(o);
		errmsg("--wakes-file %s: not the bridge's wakes file (no "
		       "\"domains\" array)", path);
		return NULL;
	}
	return o;
}

/* The domain named @name (or of that uuid) in @file's domains, or NULL. */
json_object *wakes_file_domain(json_object *file, const char *name)
{
	json_object *a = ctl_member(file, "domains", json_type_array);

	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *d = json_object_array_get_idx(a, i);

		if (!strcmp(ctl_str_or(d, "vm", ""), name) ||
		    !strcmp(ctl_str_or(d, "uuid", ""), name))
			return d;
	}
	return NULL;
}

/* The human form of domain @d's host_wakeups @h. */
static void print_host(json_object *d, json_object *h)
{
	json_object *kvm = ctl_member(h, "kvm", json_type_object);
	json_object *ts = ctl_member(h, "threads", json_type_array);
	size_t n = ts ? json_object_array_length(ts) : 0;
	char rate[32];

	printf("%s: libvirt domain, the host's view (which of its threads "
	       "woke, not what in the guest asked for it), over the last "
	       "%.0fs\n", ctl_str_or(d, "vm", "?"), num_or(h, "window_s", 0));
	if (kvm) {
		printf("KVM's counters of the VM:\n");
		for (size_t i = 0; i < sizeof(kvm_counters) /
		     sizeof(kvm_counters[0]); i++) {
			json_object *c = ctl_member(kvm, kvm_counters[i].key,
						    json_type_object);
			json_object *r = ctl_number(c, "per_s");

			if (!c)
				continue;
			if (r)
				fmt_per_s(json_object_get_double(r), rate,
					  sizeof(rate));
			else
				snprintf(rate, sizeof(rate), "rate not known yet");
			printf("  %s %s: %s\n", kvm_counters[i].key, rate,
			       kvm_counters[i].what);
		}
	} else {
		printf("KVM's counters: none (%s)\n",
		       ctl_str_or(h, "kvm_absent", "not read"));
	}
	if (n)
		printf("Its threads, busiest first:\n");
	for (size_t i = 0; i < n && i < WAKES_THREADS_SHOWN; i++) {
		json_object *t = json_object_array_get_idx(ts, i);
		json_object *r = ctl_number(t, "per_s");
		const char *name = ctl_str_or(t, "name", "?");
		const char *what = thread_what(name);

		if (r)
			fmt_per_s(json_object_get_double(r), rate,
				  sizeof(rate));
		else
			snprintf(rate, sizeof(rate), "rate not known yet");
		printf("  %s %s%s%s\n", name, rate, *what ? ": " : "", what);
	}
}

/* See sysidlectl.h: @name a domain's name or uuid, @path the bridge's
 * --wakes-file. */
int cmd_why_libvirt(const char *name, const char *path)
{
	json_object *file = wakes_file_read(path), *d, *h;
	int rc = EXIT_ERR;

	if (!file)
		return EXIT_ERR;
	d = wakes_file_domain(file, name);
	h = ctl_member(d, "host_wakeups", json_type_object);
	if (!d) {
		errmsg("no libvirt domain '%s' in %s", name, path);
	} else if (!h || ctl_member(h, "absent", json_type_string)) {
		errmsg("%s: the host has no figures of it: %s", name,
		       ctl_str_or(h, "absent", "no host_wakeups"));
	} else {
		if (options()->json)
			print_json(d);
		else
			print_host(d, h);
		rc = flush_out();
	}
	json_object_put(file);
	return rc;
}
