/* SPDX-License-Identifier: GPL-2.0-only */
/* A domain's vCPU samples from this host's /proc and KVM's debugfs: see
 * stats_host.h. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stats_host.h"

#define HOST_MAX_VCPUS 4096
#define CMDLINE_MAX 65536

struct host_vm {
	enum stats_kind kind;
	int pid;
	int kvm_dir;             /* debugfs PID-FD directory, -1: proc */
	unsigned int n;          /* vCPUs */
	int *schedstat, *stat;   /* per vCPU thread, open */
	struct vcpu_sample *vcpus;
	bool *seen;
};

const char *stats_kind_name(enum stats_kind k)
{
	switch (k) {
	case STATS_AUTO: return "auto";
	case STATS_KVM: return "kvm";
	case STATS_PROC: return "proc";
	case STATS_LIBVIRT: return "libvirt";
	case STATS_FILE: return "file";
	}
	return "?";
}

int stats_kind_parse(const char *s)
{
	for (int k = STATS_AUTO; k <= STATS_LIBVIRT; k++)
		if (!strcmp(s, stats_kind_name((enum stats_kind)k)))
			return k;
	return -1;
}

/* Read a small file at @dirfd/@path whole (NUL-terminated); its length,
 * or -1. */
static ssize_t read_small(int dirfd, const char *path, char *buf, size_t size)
{
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

/* The first number in @s; false when there is none. */
static bool first_u64(const char *s, uint64_t *v)
{
	char *end;

	s += strspn(s, " \t");
	if (!isdigit((unsigned char)*s))
		return false;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return !errno;
}

/* Is @pid the QEMU process with "-uuid @uuid" among its arguments? */
static bool is_domain(int proc, const char *pid, const char *uuid)
{
	static char cmd[CMDLINE_MAX];
	char path[300];
	ssize_t n;

	snprintf(path, sizeof(path), "%s/cmdline", pid);
	n = read_small(proc, path, cmd, sizeof(cmd));
	for (ssize_t i = 0; n > 0 && i < n;) {
		size_t len = strlen(cmd + i);

		if (!strcmp(cmd + i, "-uuid") && i + (ssize_t)len + 1 < n)
			return !strcasecmp(cmd + i + len + 1, uuid);
		i += (ssize_t)len + 1;
	}
	return false;
}

/* The pid of the domain @uuid's QEMU process, or -1. */
static int find_pid(const char *proc_root, const char *uuid)
{
	int proc = open(proc_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = proc >= 0 ? fdopendir(dup(proc)) : NULL;
	struct dirent *e;
	int pid = -1;

	while (d && (e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		if (is_domain(proc, e->d_name, uuid)) {
			pid = atoi(e->d_name);
			break;
		}
	}
	if (d)
		closedir(d);
	if (proc >= 0)
		close(proc);
	return pid;
}

/* debugfs: the directory PID-FD of @pid's VM that has vCPUs, or -1. */
static int kvm_dir_of(const char *debugfs, int pid)
{
	DIR *d = opendir(debugfs);
	struct dirent *e;
	char prefix[32], path[300];
	int fd = -1;

	snprintf(prefix, sizeof(prefix), "%d-", pid);
	while (d && fd < 0 && (e = readdir(d))) {
		struct stat st;

		if (strncmp(e->d_name, prefix, strlen(prefix)))
			continue;
		snprintf(path, sizeof(path), "%s/vcpu0", e->d_name);
		if (fstatat(dirfd(d), path, &st, 0) == 0)
			fd = openat(dirfd(d), e->d_name,
				    O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	if (d)
		closedir(d);
	return fd;
}

/* The vCPU threads: from debugfs (vcpuN/pid), else the threads named
 * "CPU N/KVM". @tids[N] for vCPU N; their number, or -1. */
static int find_tids(int kvm_dir, int proc, int pid, int *tids)
{
	char path[300], buf[64];
	unsigned int n = 0, v;
	struct dirent *e;
	int fd;
	DIR *d;

	if (kvm_dir >= 0) {
		for (; n < HOST_MAX_VCPUS; n++) {
			uint64_t t;

			snprintf(path, sizeof(path), "vcpu%u/pid", n);
			if (read_small(kvm_dir, path, buf, sizeof(buf)) < 0 ||
			    !first_u64(buf, &t))
				break;
			tids[n] = (int)t;
		}
		return n ? (int)n : -1;
	}
	snprintf(path, sizeof(path), "%d/task", pid);
	fd = openat(proc, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d && fd >= 0)
		close(fd);
	for (unsigned int i = 0; i < HOST_MAX_VCPUS; i++)
		tids[i] = 0;
	while (d && (e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "%s/comm", e->d_name);
		if (read_small(dirfd(d), path, buf, sizeof(buf)) < 0 ||
		    sscanf(buf, "CPU %u/KVM", &v) != 1 || v >= HOST_MAX_VCPUS)
			continue;
		tids[v] = atoi(e->d_name);
		if (v + 1 > n)
			n = v + 1;
	}
	if (d)
		closedir(d);
	for (unsigned int i = 0; i < n; i++)
		if (!tids[i])
			return -1; /* a gap: not QEMU's numbering */
	return n ? (int)n : -1;
}

void host_vm_free(struct host_vm *h)
{
	if (!h)
		return;
	for (unsigned int i = 0; i < h->n; i++) {
		if (h->schedstat[i] >= 0)
			close(h->schedstat[i]);
		if (h->stat[i] >= 0)
			close(h->stat[i]);
	}
	if (h->kvm_dir >= 0)
		close(h->kvm_dir);
	free(h->schedstat);
	free(h->stat);
	free(h->vcpus);
	free(h->seen);
	free(h);
}

/* Open vCPU @i's thread files. */
static bool open_thread(struct host_vm *h, int proc, unsigned int i, int tid)
{
	char path[96];

	snprintf(path, sizeof(path), "%d/task/%d/schedstat", h->pid, tid);
	h->schedstat[i] = openat(proc, path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "%d/task/%d/stat", h->pid, tid);
	h->stat[i] = openat(proc, path, O_RDONLY | O_CLOEXEC);
	return h->schedstat[i] >= 0 && h->stat[i] >= 0;
}

struct host_vm *host_vm_attach(const char *uuid, enum stats_kind want,
			       const char *proc_root, const char *debugfs,
			       char *why, size_t whysize)
{
	static int tids[HOST_MAX_VCPUS];
	struct host_vm *h;
	int pid, proc, n;

	pid = find_pid(proc_root, uuid);
	if (pid < 0) {
		snprintf(why, whysize, "no process with '-uuid %s' in %s",
			 uuid, proc_root);
		return NULL;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		snprintf(why, whysize, "out of memory");
		return NULL;
	}
	h->pid = pid;
	h->kvm_dir = want == STATS_PROC ? -1 : kvm_dir_of(debugfs, pid);
	if (h->kvm_dir < 0 && want == STATS_KVM) {
		snprintf(why, whysize, "no VM of process %d in %s (is debugfs "
			 "mounted?)", pid, debugfs);
		free(h);
		return NULL;
	}
	h->kind = h->kvm_dir >= 0 ? STATS_KVM : STATS_PROC;
	proc = open(proc_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	n = proc >= 0 ? find_tids(h->kvm_dir, proc, pid, tids) : -1;
	if (n < 0) {
		snprintf(why, whysize, "no vCPU threads of process %d (%s)",
			 pid, h->kvm_dir >= 0 ? "debugfs vcpuN/pid" :
			 "threads named 'CPU N/KVM'");
		goto fail;
	}
	h->schedstat = malloc((size_t)n * sizeof(int));
	h->stat = malloc((size_t)n * sizeof(int));
	h->vcpus = calloc((size_t)n, sizeof(*h->vcpus));
	h->seen = calloc((size_t)n, sizeof(*h->seen));
	if (!h->schedstat || !h->stat || !h->vcpus || !h->seen) {
		snprintf(why, whysize, "out of memory");
		goto fail;
	}
	for (int i = 0; i < n; i++) {
		h->n = (unsigned int)i + 1;
		if (!open_thread(h, proc, (unsigned int)i, tids[i])) {
			snprintf(why, whysize, "vCPU %d's thread %d: %s", i,
				 tids[i], strerror(errno));
			goto fail;
		}
		h->seen[i] = true;
	}
	close(proc);
	return h;
fail:
	if (proc >= 0)
		close(proc);
	host_vm_free(h);
	return NULL;
}

enum stats_kind host_vm_kind(const struct host_vm *h)
{
	return h->kind;
}

int host_vm_pid(const struct host_vm *h)
{
	return h->pid;
}

unsigned int host_vm_ncpus(const struct host_vm *h)
{
	return h->n;
}

/* One thread's sample: its run count (schedstat's third field) and
 * whether it sleeps (stat's state, after the last ')'). */
static bool thread_sample(int schedstat, int stat, struct vcpu_sample *v)
{
	char buf[512], *p;
	ssize_t n = pread(schedstat, buf, sizeof(buf) - 1, 0);
	uint64_t runs;

	if (n <= 0)
		return false;
	buf[n] = '\0';
	if (sscanf(buf, "%*u %*u %" SCNu64, &runs) != 1)
		return false;
	n = pread(stat, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return false;
	*v = (struct vcpu_sample){
		.has_halt_exits = true, .halt_exits = runs,
		.has_blocking = true, .blocking = p[2] == 'S',
	};
	return true;
}

int host_vm_sample(struct host_vm *h, struct stats_domain *sd, char *why,
		   size_t whysize)
{
	unsigned int sleeping = 0;
	char buf[64];
	uint64_t blocked;

	for (unsigned int i = 0; i < h->n; i++) {
		if (!thread_sample(h->schedstat[i], h->stat[i], &h->vcpus[i])) {
			snprintf(why, whysize, "vCPU %u's thread of process "
				 "%d is gone", i, h->pid);
			return -1;
		}
		sleeping += h->vcpus[i].blocking;
	}
	if (h->kvm_dir >= 0) {
		if (read_small(h->kvm_dir, "blocking", buf, sizeof(buf)) < 0 ||
		    !first_u64(buf, &blocked)) {
			snprintf(why, whysize, "KVM's statistics of process "
				 "%d are gone", h->pid);
			return -1;
		}
		/* Fewer vCPUs blocked in KVM than threads asleep: some
		 * thread sleeps on something else (which one, KVM does not
		 * say), so none counts as halted. */
		if (blocked < sleeping)
			for (unsigned int i = 0; i < h->n; i++)
				h->vcpus[i].blocking = false;
	}
	sd->vcpus = h->vcpus;
	sd->seen = h->seen;
	sd->nvcpus = h->n;
	sd->borrowed = true;
	return 0;
}

/* No requirement: see stats_host.h. */
int host_find_pid(const char *proc_root, const char *uuid)
{
	return find_pid(proc_root, uuid);
}

/* No requirement: see stats_host.h. */
int host_kvm_dir(const char *debugfs, int pid)
{
	return kvm_dir_of(debugfs, pid);
}
