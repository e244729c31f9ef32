/* SPDX-License-Identifier: GPL-2.0-only */
/* What wakes a domain, from the host's files: see host_wakes.h. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host_wakes.h"
#include "stats_host.h"

#define WHY_MAX 200

/* One sample: when, KVM's counters, each thread name's wake-ups. */
struct hw_sample {
	uint64_t t_ns;
	uint64_t kvm[HW_KVM_N];
	uint64_t names[HOST_WAKES_NAMES];
};

/* A thread as last read: its id, its name's index, its count. */
struct hw_tid {
	int tid;
	unsigned int name;
	uint64_t voluntary;
};

struct host_wakes {
	int pid;                 /* 0: none */
	int kvm_dir;             /* the VM's debugfs directory, -1: none */
	unsigned int kvm_has;    /* bit k: counter k read in the newest */
	char why[WHY_MAX];       /* nothing there: why ("" otherwise) */
	char kvm_why[WHY_MAX];   /* no KVM counters: why */
	char names[HOST_WAKES_NAMES][HOST_WAKES_NAME_MAX];
	unsigned int nnames;
	unsigned int threads[HOST_WAKES_NAMES]; /* per name, newest sample */
	uint64_t totals[HOST_WAKES_NAMES];
	struct hw_tid tids[HOST_WAKES_THREADS], next[HOST_WAKES_THREADS];
	unsigned int ntids;
	bool capped;
	struct hw_sample ring[HOST_WAKES_RING];
	unsigned int head, count; /* the next slot, the samples held */
	uint64_t last_ns;
};

static const char *const kvm_files[HW_KVM_N] = {
	[HW_KVM_HALT_EXITS] = "halt_exits",
	[HW_KVM_HALT_WAKEUP] = "halt_wakeup",
	[HW_KVM_HALT_SUCCESSFUL_POLL] = "halt_successful_poll",
	[HW_KVM_HALT_ATTEMPTED_POLL] = "halt_attempted_poll",
	[HW_KVM_IRQ_INJECTIONS] = "irq_injections",
	[HW_KVM_IRQ_EXITS] = "irq_exits",
	[HW_KVM_SIGNAL_EXITS] = "signal_exits",
	[HW_KVM_EXITS] = "exits",
};

/* The caller guarantees k < HW_KVM_N. */
const char *host_wakes_kvm_file(enum host_wakes_kvm k)
{
	return kvm_files[k];
}

/* No requirement. */
struct host_wakes *host_wakes_new(void)
{
	struct host_wakes *hw = calloc(1, sizeof(*hw));

	if (!hw)
		return NULL;
	hw->kvm_dir = -1;
	snprintf(hw->why, sizeof(hw->why), "not read yet");
	return hw;
}

/* The caller guarantees @hw came from host_wakes_new or is NULL. */
void host_wakes_free(struct host_wakes *hw)
{
	if (!hw)
		return;
	if (hw->kvm_dir >= 0)
		close(hw->kvm_dir);
	free(hw);
}

/* Drop every figure (a new process, or none): the state of
 * host_wakes_new with @why. The caller guarantees @hw is valid. */
static void reset(struct host_wakes *hw, const char *why)
{
	if (hw->kvm_dir >= 0)
		close(hw->kvm_dir);
	memset(hw, 0, sizeof(*hw));
	hw->kvm_dir = -1;
	snprintf(hw->why, sizeof(hw->why), "%s", why);
}

/* The caller guarantees @hw is valid and @why a string. */
bool host_wakes_absent(struct host_wakes *hw, const char *why)
{
	if (!hw->pid && !strcmp(hw->why, why))
		return false;
	reset(hw, why);
	return true;
}

/* The caller guarantees @hw is valid. */
bool host_wakes_due(const struct host_wakes *hw, uint64_t now_ns)
{
	return !hw->count ||
	       now_ns >= hw->last_ns + HOST_WAKES_PERIOD_MS * 1000000ull;
}

/* Read the small file @dirfd/@path whole into @buf (@size > 1 bytes),
 * NUL-terminated; its length, or -1. The caller guarantees @buf holds
 * @size bytes. */
static ssize_t read_small(int dirfd, const char *path, char *buf,
			  size_t size)
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

/* The unsigned decimal at @s (after blanks); false when there is none.
 * The caller guarantees @s is NUL-terminated. */
static bool parse_u64(const char *s, uint64_t *v)
{
	char *end;

	s += strspn(s, " \t");
	if (!isdigit((unsigned char)*s))
		return false;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return !errno && (!*end || isspace((unsigned char)*end));
}

/* "voluntary_ctxt_switches:" in a status file's text @s (the line, not
 * the "nonvoluntary_" one). The caller guarantees @s is NUL-terminated. */
static bool voluntary_of(const char *s, uint64_t *v)
{
	static const char key[] = "voluntary_ctxt_switches:";
	const char *p = s;

	while ((p = strstr(p, key))) {
		if (p == s || p[-1] == '\n')
			return parse_u64(p + sizeof(key) - 1, v);
		p += sizeof(key) - 1;
	}
	return false;
}

/* The index of thread name @name, added when new; the last slot is
 * "other" once the table is full. The caller guarantees @hw is valid and
 * @name NUL-terminated (longer than HOST_WAKES_NAME_MAX - 1 bytes: cut). */
static unsigned int name_index(struct host_wakes *hw, const char *name)
{
	size_t len;

	for (unsigned int i = 0; i < hw->nnames; i++)
		if (!strcmp(hw->names[i], name))
			return i;
	if (hw->nnames == HOST_WAKES_NAMES - 1) {
		snprintf(hw->names[hw->nnames], HOST_WAKES_NAME_MAX, "other");
		return hw->nnames++;
	}
	if (hw->nnames == HOST_WAKES_NAMES)
		return HOST_WAKES_NAMES - 1;
	len = strnlen(name, HOST_WAKES_NAME_MAX - 1);
	memcpy(hw->names[hw->nnames], name, len);
	hw->names[hw->nnames][len] = '\0';
	return hw->nnames++;
}

/* One thread (its directory @tname under the open directory @task) into
 * hw->next[@n]; false when it cannot be read (gone meanwhile). The caller
 * guarantees @n < HOST_WAKES_THREADS. */
static bool read_thread(struct host_wakes *hw, int task, const char *tname,
			unsigned int n)
{
	char path[64], comm[64], status[4096];
	uint64_t vol;
	ssize_t len;

	snprintf(path, sizeof(path), "%s/comm", tname);
	len = read_small(task, path, comm, HOST_WAKES_NAME_MAX);
	if (len <= 0)
		return false;
	comm[strcspn(comm, "\n")] = '\0';
	snprintf(path, sizeof(path), "%s/status", tname);
	if (read_small(task, path, status, sizeof(status)) <= 0 ||
	    !voluntary_of(status, &vol))
		return false;
	hw->next[n] = (struct hw_tid){ .tid = atoi(tname),
				       .name = name_index(hw, comm),
				       .voluntary = vol };
	return true;
}

/* The threads of hw->pid under @proc_root: each one's wake-ups since the
 * last sample added to its name's total (a thread new since then: all of
 * them, but nothing at the first sample, the baseline). -1: the process
 * is gone. The caller guarantees hw->pid > 0. */
static int read_threads(struct host_wakes *hw, const char *proc_root)
{
	char path[300];
	unsigned int n = 0;
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "%s/%d/task", proc_root, hw->pid);
	d = opendir(path);
	if (!d)
		return -1;
	hw->capped = false;
	while ((e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		if (n == HOST_WAKES_THREADS) {
			hw->capped = true;
			break;
		}
		n += read_thread(hw, dirfd(d), e->d_name, n);
	}
	closedir(d);
	if (!n)
		return -1;
	memset(hw->threads, 0, sizeof(hw->threads));
	for (unsigned int i = 0; i < n; i++) {
		struct hw_tid *t = &hw->next[i];
		uint64_t add = hw->count ? t->voluntary : 0;

		for (unsigned int j = 0; j < hw->ntids; j++)
			if (hw->tids[j].tid == t->tid) {
				add = t->voluntary >= hw->tids[j].voluntary ?
				      t->voluntary - hw->tids[j].voluntary : 0;
				break;
			}
		hw->totals[t->name] += add;
		hw->threads[t->name]++;
	}
	memcpy(hw->tids, hw->next, n * sizeof(hw->tids[0]));
	hw->ntids = n;
	return 0;
}

/* KVM's counters into @s (hw->kvm_has says which were read). None read:
 * the directory is let go, with why (the VM gone; or its files refused,
 * as a kernel in lockdown refuses debugfs files that can be written, which
 * KVM's counters are: they can be cleared). The caller guarantees @s is
 * the sample being taken, zeroed. */
static void read_kvm(struct host_wakes *hw, struct hw_sample *s)
{
	char buf[64];
	int err = 0;

	hw->kvm_has = 0;
	for (int k = 0; hw->kvm_dir >= 0 && k < HW_KVM_N; k++) {
		if (read_small(hw->kvm_dir, kvm_files[k], buf, sizeof(buf)) < 0)
			err = err ? err : errno;
		else if (parse_u64(buf, &s->kvm[k]))
			hw->kvm_has |= 1u << k;
	}
	if (hw->kvm_dir < 0 || hw->kvm_has)
		return;
	close(hw->kvm_dir);
	hw->kvm_dir = -1;
	if (err == EPERM || err == EACCES)
		snprintf(hw->kvm_why, sizeof(hw->kvm_why), "KVM's counters of "
			 "process %d in debugfs cannot be read: %s (debugfs "
			 "restricted: kernel lockdown)", hw->pid, strerror(err));
	else
		snprintf(hw->kvm_why, sizeof(hw->kvm_why), "KVM's counters of "
			 "process %d in debugfs are gone or unreadable (%s)",
			 hw->pid, err ? strerror(err) : "not numbers");
}

/* See host_wakes.h for what the caller guarantees. */
int host_wakes_sample(struct host_wakes *hw, int pid, const char *proc_root,
		      const char *debugfs, uint64_t now_ns)
{
	struct hw_sample *s;

	if (pid != hw->pid) {
		reset(hw, "");
		hw->pid = pid;
		hw->kvm_dir = host_kvm_dir(debugfs, pid);
		if (hw->kvm_dir < 0)
			snprintf(hw->kvm_why, sizeof(hw->kvm_why), "no KVM VM "
				 "of process %d in %s (a domain KVM does not "
				 "run, TCG; or debugfs not mounted)", pid,
				 debugfs);
	}
	if (read_threads(hw, proc_root) < 0) {
		char why[WHY_MAX];

		snprintf(why, sizeof(why), "process %d is gone", pid);
		reset(hw, why);
		return -1;
	}
	s = &hw->ring[hw->head];
	memset(s, 0, sizeof(*s));
	s->t_ns = now_ns;
	memcpy(s->names, hw->totals, sizeof(s->names));
	read_kvm(hw, s);
	hw->head = (hw->head + 1) % HOST_WAKES_RING;
	if (hw->count < HOST_WAKES_RING)
		hw->count++;
	hw->last_ns = now_ns;
	hw->why[0] = '\0';
	return 0;
}

/* The caller guarantees @hw is valid; see host_wakes.h. */
int host_wakes_pid(const struct host_wakes *hw)
{
	return hw->pid;
}

/* The caller guarantees @hw is valid; see host_wakes.h. */
const char *host_wakes_why(const struct host_wakes *hw)
{
	return hw->why;
}

/* The caller guarantees @hw is valid; see host_wakes.h. */
const char *host_wakes_kvm_why(const struct host_wakes *hw)
{
	return hw->kvm_has ? "" : hw->kvm_why[0] ? hw->kvm_why :
	       "KVM's counters not read";
}

/* The newest sample; NULL: none. The caller guarantees @hw is valid. */
static const struct hw_sample *newest(const struct host_wakes *hw)
{
	if (!hw->count)
		return NULL;
	return &hw->ring[(hw->head + HOST_WAKES_RING - 1) % HOST_WAKES_RING];
}

/* The oldest sample within HOST_WAKES_WINDOW_MS of the newest, and how
 * many there are in the window (@n); NULL: none. */
static const struct hw_sample *oldest(const struct host_wakes *hw,
				      unsigned int *n)
{
	const struct hw_sample *last = newest(hw), *o = last;
	uint64_t window = HOST_WAKES_WINDOW_MS * 1000000ull;

	*n = last ? 1 : 0;
	for (unsigned int i = 2; last && i <= hw->count; i++) {
		const struct hw_sample *s = &hw->ring[(hw->head +
			HOST_WAKES_RING - i) % HOST_WAKES_RING];

		if (s->t_ns + window < last->t_ns)
			break;
		o = s;
		++*n;
	}
	return o;
}

/* The caller guarantees @hw is valid; see host_wakes.h. */
bool host_wakes_kvm_total(const struct host_wakes *hw, enum host_wakes_kvm k,
			  uint64_t *total)
{
	const struct hw_sample *s = newest(hw);

	if (!s || !(hw->kvm_has & (1u << k)))
		return false;
	*total = s->kvm[k];
	return true;
}

/* The caller guarantees @hw is valid; see host_wakes.h. */
uint64_t host_wakes_span_ns(const struct host_wakes *hw)
{
	unsigned int n;
	const struct hw_sample *o = oldest(hw, &n);

	return n > 1 ? newest(hw)->t_ns - o->t_ns : 0;
}

/* The caller guarantees @hw is valid; see host_wakes.h. */
unsigned int host_wakes_samples(const struct host_wakes *hw)
{
	unsigned int n;

	oldest(hw, &n);
	return n;
}

/* (@to - @from) per second over @span_ns; 0 when it went back. The caller
 * guarantees @span_ns > 0. */
static double rate(uint64_t from, uint64_t to, uint64_t span_ns)
{
	return to > from ? (double)(to - from) * 1e9 / (double)span_ns : 0.0;
}

/* The VM's debugfs directory is the one found when the process was, so
 * a counter read in the newest sample was read in the older ones. The
 * caller guarantees @hw is valid and k < HW_KVM_N. */
bool host_wakes_kvm_rate(const struct host_wakes *hw, enum host_wakes_kvm k,
			 double *per_s)
{
	unsigned int n;
	const struct hw_sample *o = oldest(hw, &n);
	uint64_t span = host_wakes_span_ns(hw);

	if (!span || !(hw->kvm_has & (1u << k)))
		return false;
	*per_s = rate(o->kvm[k], newest(hw)->kvm[k], span);
	return true;
}

/* The caller guarantees @hw is valid; see host_wakes.h. */
unsigned int host_wakes_nthreads(const struct host_wakes *hw)
{
	return hw->count ? hw->nnames : 0;
}

/* The caller guarantees i < host_wakes_nthreads(hw). */
const char *host_wakes_thread(const struct host_wakes *hw, unsigned int i,
			      unsigned int *threads, uint64_t *total)
{
	*threads = hw->threads[i];
	*total = hw->totals[i];
	return hw->names[i];
}

/* The caller guarantees i < host_wakes_nthreads(hw). A name first seen
 * within the window has 0 in the older samples: its threads' wake-ups
 * all count in it (they began since the baseline). */
bool host_wakes_thread_rate(const struct host_wakes *hw, unsigned int i,
			    double *per_s)
{
	unsigned int n;
	const struct hw_sample *o = oldest(hw, &n);
	uint64_t span = host_wakes_span_ns(hw);

	if (!span)
		return false;
	*per_s = rate(o->names[i], newest(hw)->names[i], span);
	return true;
}

/* The caller guarantees @hw is valid; see host_wakes.h. */
bool host_wakes_capped(const struct host_wakes *hw)
{
	return hw->capped;
}
