/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * --idle-memory cold|pageout: the guest RAM of a VM that has stayed fully
 * idle for --idle-memory-delay is advised to the host kernel, once per
 * full-idle period, so that memory pressure takes it first.
 *
 * When. The housekeeping thread arms one one-shot timer ("idle-memory")
 * as it stops the tick for a full-idle period (idle_stop), the delay
 * later, and cancels it quietly as the period ends (idle_restart): a
 * period shorter than the delay costs no wake-up at all, a longer one
 * exactly one, and nothing here is periodic. At that wake-up the
 * housekeeping thread only hands the pass to the advice thread
 * (vmm-idlemem) and goes back to sleep.
 *
 * Where. On a thread of its own, never the housekeeping thread (which
 * serves the guest's timers and restarts the tick at a wake-up: a pass
 * over gigabytes of RAM must not delay either), and holding no lock a
 * vCPU path takes: the vCPUs are all halted when the pass starts, but a
 * wake-up may come at any time, and the pages advised are faulted back in
 * by the kernel like any others (MADV_COLD and MADV_PAGEOUT are safe
 * against concurrent access), so no vCPU is stopped for it. A pass looks
 * at the period's number between chunks: a VM that woke meanwhile ends
 * it there (counted as cancelled), as does the VMM's stop.
 *
 * What. mincore(2) over the RAM mapping, IDLE_MEMORY_CHUNK at a time,
 * finds the resident pages (the ranges the guest has touched, and not yet
 * given back); each run of them is madvise()d MADV_COLD (moved to the
 * inactive list: reclaimed first when memory runs short) or MADV_PAGEOUT
 * (reclaimed now: written to swap, then kept as clean swap cache, which
 * the first pressure frees without any further I/O). Never MADV_DONTNEED
 * or MADV_FREE: those drop the contents.
 *
 * Why that is safe for this RAM. vm->ram is one private anonymous mapping
 * (machine/kvm.c: MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, given to
 * KVM with KVM_SET_USER_MEMORY_REGION). A private anonymous page that is
 * reclaimed goes to swap, its page table entry pointing there, and the
 * next access (the guest through KVM, whose mapping the kernel's MMU
 * notifiers update, or a device model of the VMM) faults it back in with
 * the same contents. No page is pinned (no device assignment), so none is
 * skipped for that; the kernel may leave some alone (pages KSM shares).
 *
 * Swap. Anonymous memory can only be given back to swap: with no swap area
 * (/proc/swaps lists none) the kernel keeps every guest page whatever the
 * advice says. The start warns then, status says swap_available false,
 * and the advice still runs (it costs one pass; MADV_COLD still orders
 * the LRU for a swap area added later). zswap caches what goes to a swap
 * area and needs one too. Both are read again at each pass.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/error.h"
#include "base/housekeeping.h"
#include "base/time.h"
#include "idle/internal.h"
#include "machine/vm.h"

#ifndef MADV_COLD
#define MADV_COLD 20 /* Linux 5.4 */
#endif
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

#define IDLE_MEMORY_CHUNK (32ull << 20) /* bytes of RAM per mincore() */
#define PROC_READ_MAX 4096 /* bytes read of /proc/swaps, /proc/self/status */

static struct {
	int mode;                 /* enum idle_memory_mode; OFF: none of this */
	uint64_t delay_ns;
	uint8_t *ram;
	uint64_t ram_size, page;
	void (*notify)(void);     /* a pass ended (main.c: the metrics file) */
	unsigned char *vec;       /* advice thread only: one chunk's mincore */

	/* Housekeeping thread only. */
	struct hk_timer timer;
	uint64_t deadline;        /* the timer's, 0: not armed */
	/* Full-idle periods ended so far: written by the housekeeping thread
	 * (idle_memory_leave), read by the advice thread between chunks. */
	_Atomic uint64_t period;
	atomic_bool stopping;     /* idle_memory_stop: passes end early */

	pthread_mutex_t lock;     /* the request and the figures below */
	pthread_cond_t wake;
	bool requested, stop, started;
	uint64_t requested_period;
	pthread_t thread;
	struct idle_memory_status st; /* the figures: advice thread writes */
	bool warned_error;        /* advice thread only */
} mem = { .lock = PTHREAD_MUTEX_INITIALIZER,
	  .wake = PTHREAD_COND_INITIALIZER };

/* Any thread: see idle.h. */
const char *idle_memory_mode_name(int mode)
{
	return mode == IDLE_MEMORY_COLD ? "cold" :
	       mode == IDLE_MEMORY_PAGEOUT ? "pageout" : "off";
}

/* Any thread: up to PROC_READ_MAX - 1 bytes of the file @path into @buf,
 * NUL-terminated; the length, or -1. */
static ssize_t read_small(const char *path, char *buf)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	do
		n = read(fd, buf, PROC_READ_MAX - 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

/* Any thread: whether the host has a swap area on (/proc/swaps has a line
 * under its header) and zswap enabled. */
static void host_swap_read(bool *swap, bool *zswap)
{
	char buf[PROC_READ_MAX];
	const char *nl;

	*swap = read_small("/proc/swaps", buf) > 0 &&
		(nl = strchr(buf, '\n')) && nl[1] != '\0';
	*zswap = read_small("/sys/module/zswap/parameters/enabled", buf) > 0 &&
		 (buf[0] == 'Y' || buf[0] == '1');
}

/* Any thread: the process's RssAnon (/proc/self/status), bytes; 0 when
 * it cannot be read. */
static uint64_t rss_anon_bytes(void)
{
	char buf[PROC_READ_MAX];
	const char *p;

	if (read_small("/proc/self/status", buf) <= 0 ||
	    !(p = strstr(buf, "\nRssAnon:")))
		return 0;
	return strtoull(p + 9, NULL, 10) << 10; /* kB */
}

/* The advice thread: whether the pass for the full-idle period @period
 * must end (the VM woke, or the VMM stops). */
static bool pass_cut(uint64_t period)
{
	/* relaxed, both: pair with the increment in idle_memory_leave and
	 * the store in idle_memory_stop; flags that end the pass early,
	 * publishing no data (a pass that misses one by a chunk only
	 * advises a chunk more, which is safe). */
	return atomic_load_explicit(&mem.period, memory_order_relaxed) !=
	       period ||
	       atomic_load_explicit(&mem.stopping, memory_order_relaxed);
}

/* The advice thread: the guest RAM's resident bytes (mincore), -1 on an
 * error (errno set). */
static int64_t resident_bytes(void)
{
	uint64_t n = 0, len, pages;

	for (uint64_t off = 0; off < mem.ram_size; off += IDLE_MEMORY_CHUNK) {
		len = mem.ram_size - off < IDLE_MEMORY_CHUNK ?
		      mem.ram_size - off : IDLE_MEMORY_CHUNK;
		if (mincore(mem.ram + off, len, mem.vec))
			return -1;
		pages = len / mem.page;
		for (uint64_t i = 0; i < pages; i++)
			n += mem.vec[i] & 1;
	}
	return (int64_t)(n * mem.page);
}

/* The advice thread, holding no lock: advise the resident runs of one
 * chunk at @off (@len bytes) with @advice; adds their bytes to @advised.
 * 0, or -1 with errno set and the call that failed in @failed. */
static int advise_chunk(uint64_t off, uint64_t len, int advice,
			uint64_t *advised, const char **failed)
{
	uint64_t pages = len / mem.page, i = 0, j;

	*failed = "mincore";
	if (mincore(mem.ram + off, len, mem.vec))
		return -1;
	*failed = "madvise";
	while (i < pages) {
		if (!(mem.vec[i] & 1)) {
			i++;
			continue;
		}
		for (j = i + 1; j < pages && (mem.vec[j] & 1); j++)
			;
		if (madvise(mem.ram + off + i * mem.page, (j - i) * mem.page,
			    advice))
			return -1;
		*advised += (j - i) * mem.page;
		i = j;
	}
	return 0;
}

/* @b bytes as MiB with one decimal: two printf arguments. */
#define MIB_1(b) (uint64_t)(b) >> 20, ((uint64_t)(b) % (1u << 20)) * 10 >> 20

/* The advice thread: one line for --sysidle-log, a warning for an error
 * (@err from the call @failed; once), the housekeeping thread kicked to
 * write the line (idle_flush), the metrics file rewritten (notify). Not at
 * the VMM's stop, which cut the pass short: those threads are stopping. */
static void pass_report(const struct idle_memory_status *st, bool done,
			int err, const char *failed, uint64_t advised)
{
	const char *mode = idle_memory_mode_name(mem.mode);
	uint64_t now = now_ns();

	/* relaxed: pairs with the store in idle_memory_stop; a flag. */
	if (atomic_load_explicit(&mem.stopping, memory_order_relaxed))
		return;
	if (err && !mem.warned_error) {
		mem.warned_error = true;
		vmm_warn("--idle-memory %s: %s: %s (the pass ends there; each "
			 "full-idle period tries again, further errors not "
			 "reported)", mode, failed, strerror(err));
	}
	if (err)
		idle_log(now, "idle-memory %s: failed: %s: %s", mode, failed,
			 strerror(err));
	else if (!done)
		idle_log(now, "idle-memory %s: cut short by a wake-up after "
			 "%" PRIu64 ".%" PRIu64 " MiB", mode, MIB_1(advised));
	else
		idle_log(now, "idle-memory %s: advised %" PRIu64 ".%" PRIu64
			 " MiB resident of %" PRIu64 " MiB in %" PRIu64 " ms "
			 "(RssAnon %" PRIu64 ".%" PRIu64 " -> %" PRIu64 ".%"
			 PRIu64 " MiB)%s", mode, MIB_1(st->last_advised_bytes),
			 mem.ram_size >> 20, st->last_duration_ns / 1000000u,
			 MIB_1(st->last_rss_anon_before_bytes),
			 MIB_1(st->last_rss_anon_after_bytes),
			 st->swap_available ? "" : "; no swap on this host: "
			 "nothing can be given back");
	housekeeping_kick();
	if (mem.notify)
		mem.notify();
}

/*
 * The advice thread, holding no lock: one pass for the full-idle period
 * @period, chunk by chunk, ended early when the period ends (pass_cut).
 * The figures go to mem.st under mem.lock at the end.
 */
static void advise_pass(uint64_t period)
{
	int advice = mem.mode == IDLE_MEMORY_PAGEOUT ? MADV_PAGEOUT : MADV_COLD;
	uint64_t t0 = now_ns(), advised = 0, len, rss_before, rss_after = 0;
	uint64_t end_ns = 0;
	int64_t resident, after = 0;
	bool swap, zswap, done = true;
	struct idle_memory_status copy;
	const char *failed = "mincore";
	int err = 0;

	host_swap_read(&swap, &zswap);
	rss_before = rss_anon_bytes();
	resident = resident_bytes();
	if (resident < 0)
		err = errno;
	for (uint64_t off = 0; !err && off < mem.ram_size;
	     off += IDLE_MEMORY_CHUNK) {
		if (pass_cut(period)) {
			done = false;
			break;
		}
		len = mem.ram_size - off < IDLE_MEMORY_CHUNK ?
		      mem.ram_size - off : IDLE_MEMORY_CHUNK;
		if (advise_chunk(off, len, advice, &advised, &failed))
			err = errno;
	}
	if (!err && done) {
		after = resident_bytes();
		if (after < 0) {
			err = errno;
			failed = "mincore";
		}
		rss_after = rss_anon_bytes();
		end_ns = now_ns();
	}
	pthread_mutex_lock(&mem.lock);
	mem.st.swap_available = swap;
	mem.st.zswap_enabled = zswap;
	mem.st.advised_bytes_total += advised;
	if (err) {
		mem.st.failed++;
	} else if (!done) {
		mem.st.cancelled++;
	} else {
		mem.st.advised++;
		mem.st.last_advised_bytes = advised;
		mem.st.last_resident_before_bytes = (uint64_t)resident;
		mem.st.last_resident_after_bytes = (uint64_t)after;
		mem.st.last_rss_anon_before_bytes = rss_before;
		mem.st.last_rss_anon_after_bytes = rss_after;
		mem.st.last_unix_ms = mono_to_unix_ms(end_ns);
		mem.st.last_duration_ns = end_ns - t0;
	}
	copy = mem.st;
	pthread_mutex_unlock(&mem.lock);
	pass_report(&copy, done, err, failed, advised);
}

/* The advice thread (vmm-idlemem): waits for a pass to be asked for
 * (idle_memory_fire), runs it, until idle_memory_stop. */
static void *advice_thread(void *arg)
{
	uint64_t period;

	(void)arg;
	pthread_setname_np(pthread_self(), "vmm-idlemem");
	pthread_mutex_lock(&mem.lock);
	for (;;) {
		while (!mem.requested && !mem.stop)
			pthread_cond_wait(&mem.wake, &mem.lock);
		if (mem.stop)
			break;
		mem.requested = false;
		period = mem.requested_period;
		pthread_mutex_unlock(&mem.lock);
		advise_pass(period);
		pthread_mutex_lock(&mem.lock);
	}
	pthread_mutex_unlock(&mem.lock);
	return NULL;
}

/*
 * Housekeeping thread, the timer due: the VM has been fully idle for the
 * delay (idle_memory_leave cancels the timer when the period ends; a
 * deadline that is not the current one is a stale wake-up). The pass is
 * the advice thread's; this only asks for it.
 */
static void idle_memory_fire(struct hk_timer *t, uint64_t deadline_ns)
{
	(void)t;
	if (!deadline_ns || deadline_ns != mem.deadline ||
	    !idle_layer()->stopped)
		return;
	mem.deadline = 0;
	pthread_mutex_lock(&mem.lock);
	mem.requested = true;
	/* relaxed: this thread is the only writer (idle_memory_leave). */
	mem.requested_period = atomic_load_explicit(&mem.period,
						    memory_order_relaxed);
	pthread_cond_signal(&mem.wake);
	pthread_mutex_unlock(&mem.lock);
}

/* Housekeeping thread, idle_stop: a full-idle period begins at @now. */
void idle_memory_full_idle(uint64_t now)
{
	if (mem.mode == IDLE_MEMORY_OFF)
		return;
	mem.deadline = now + mem.delay_ns;
	hk_timer_arm(&mem.timer, mem.deadline);
}

/* Housekeeping thread, idle_restart: the full-idle period ends; its
 * pending advice is dropped, a pass running ends at its next chunk. */
void idle_memory_leave(void)
{
	if (mem.mode == IDLE_MEMORY_OFF)
		return;
	if (mem.deadline) {
		mem.deadline = 0;
		/* quiet: its deadline is far; no wake-up for it */
		hk_timer_cancel_quiet(&mem.timer);
	}
	/* relaxed: pairs with the loads in pass_cut and idle_memory_fire;
	 * a flag, no data published through it. */
	atomic_fetch_add_explicit(&mem.period, 1, memory_order_relaxed);
}

/*
 * Main thread, from idle_init (also without --idle-memory: status shows
 * the host's swap then), before the housekeeping thread starts: the
 * timer, the advice thread, the host's swap read and warned about. 0, or
 * -1 after vmm_fail.
 */
int idle_memory_init(struct vm *vm, const struct idle_config *cfg)
{
	long page = sysconf(_SC_PAGESIZE);
	bool swap, zswap;

	mem.mode = cfg->idle_memory;
	mem.delay_ns = cfg->idle_memory_delay_ns;
	mem.ram = vm->ram;
	mem.ram_size = vm->ram_size;
	mem.page = page > 0 ? (uint64_t)page : 4096;
	host_swap_read(&swap, &zswap);
	mem.st.mode = mem.mode;
	mem.st.delay_ns = mem.delay_ns;
	mem.st.ram_bytes = mem.ram_size;
	mem.st.swap_available = swap;
	mem.st.zswap_enabled = zswap;
	/* before any thread that reads them starts: plain initialisation */
	atomic_init(&mem.period, 0);
	atomic_init(&mem.stopping, false);
	if (mem.mode == IDLE_MEMORY_OFF)
		return 0;
	mem.vec = malloc(IDLE_MEMORY_CHUNK / mem.page);
	if (!mem.vec)
		return vmm_fail(VMM_EXIT_KVM, "--idle-memory: out of memory");
	hk_timer_init(&mem.timer, idle_memory_fire);
	hk_timer_set_name(&mem.timer, "idle-memory");
	if (pthread_create(&mem.thread, NULL, advice_thread, NULL))
		return vmm_fail(VMM_EXIT_KVM, "--idle-memory: cannot start "
				"its thread");
	mem.started = true;
	if (!swap)
		vmm_warn("--idle-memory %s: this host has no swap (/proc/swaps "
			 "lists none%s): guest RAM is anonymous memory, which "
			 "the kernel gives back only by swapping it out, so "
			 "nothing can be given back; the advice still runs "
			 "(status: idle_memory.swap_available false)",
			 idle_memory_mode_name(mem.mode), zswap ?
			 "; zswap is on, but it only caches what goes to a "
			 "swap area" : ", and zswap is off");
	return 0;
}

/* Main thread, before the housekeeping thread starts: see idle.h. */
void idle_memory_set_notify(void (*advised)(void))
{
	mem.notify = advised;
}

/* Main thread, after the vCPUs stopped and before the housekeeping and
 * export threads stop (the thread kicks one and notifies the other). */
void idle_memory_stop(void)
{
	if (!mem.started)
		return;
	/* relaxed: pairs with the load in pass_cut; the join below orders
	 * the rest. */
	atomic_store_explicit(&mem.stopping, true, memory_order_relaxed);
	pthread_mutex_lock(&mem.lock);
	mem.stop = true;
	pthread_cond_signal(&mem.wake);
	pthread_mutex_unlock(&mem.lock);
	pthread_join(mem.thread, NULL);
	mem.started = false;
	free(mem.vec);
	mem.vec = NULL;
}

/* Any thread: see idle.h. */
void idle_memory_read_status(struct idle_memory_status *st)
{
	pthread_mutex_lock(&mem.lock);
	*st = mem.st;
	pthread_mutex_unlock(&mem.lock);
}
