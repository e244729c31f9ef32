/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sysidlectl top: every VM of DIR, one row each, refreshed in place like
 * top(1): state, time in state, host thread wake-ups/s, host CPU %, and
 * what the consolidator did (paused: suspended; vCPU threads on fewer
 * CPUs than the process: packed). On a terminal it redraws every
 * interval and quits on 'q' (or SIGINT, SIGTERM), the terminal restored;
 * otherwise it prints @iterations snapshots, each after one interval (the
 * rates need two samples).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "monotonic.h"
#include "sysidlectl.h"

#define TOP_MAX_VMS 4096

/* What a VM was at the previous refresh, for its rates. */
struct sample {
	int pid;
	long long start;     /* its start time (a reused PID is another VM) */
	double wakeups;      /* vCPU halt exits + housekeeping wake-ups */
	double cpu_s;        /* utime + stime */
	double at;           /* monotonic seconds */
};

struct vmrow {
	char name[96], state[16], since[32], vcpus[24], pid[16];
	char held[40];       /* "-", "suspended", "packed 1", ... */
	double wake_rate, cpu_pct; /* NAN: not known yet */
	struct sample now;
	bool ok;
	char why[160];
};

static volatile sig_atomic_t top_signal, top_resized;

static void top_on_signal(int sig)
{
	if (sig == SIGWINCH)
		top_resized = 1;
	else
		top_signal = sig;
}

/* utime + stime in seconds and the start time of @pid (fields 14, 15,
 * 22 of /proc/PID/stat); -1 when it is gone. */
static int proc_cpu(int pid, double *cpu_s, long long *start)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	long long sta;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the command may hold anything */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
			 "%llu %llu %*d %*d %*d %*d %*d %*d %lld",
			 &ut, &st, &sta) != 3)
		return -1;
	*cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
	*start = sta;
	return 0;
}

/* "packed CPUS" when every vCPU thread of @vm may run on fewer CPUs than
 * its process (the consolidator moved them), else "". */
static void packed_of(json_object *vm, int pid, char *out, size_t size)
{
	json_object *a = ctl_member(vm, "vcpus", json_type_array);
	cpu_set_t proc, t, all;
	size_t n = a ? json_object_array_length(a) : 0;
	int first = -1, last = -1;

	*out = '\0';
	CPU_ZERO(&all);
	if (!n || sched_getaffinity(pid, sizeof(proc), &proc))
		return;
	for (size_t i = 0; i < n; i++) {
		json_object *tid = ctl_member(json_object_array_get_idx(a, i),
					      "tid", json_type_int);

		if (!tid || sched_getaffinity((pid_t)json_object_get_int(tid),
					      sizeof(t), &t))
			return;
		if (CPU_EQUAL(&t, &proc))
			return;
		CPU_OR(&all, &all, &t);
	}
	if (CPU_COUNT(&all) >= CPU_COUNT(&proc))
		return;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &all)) {
			if (first < 0)
				first = c;
			last = c;
		}
	if (CPU_COUNT(&all) == last - first + 1 && first != last)
		snprintf(out, size, "packed %d-%d", first, last);
	else if (CPU_COUNT(&all) == 1)
		snprintf(out, size, "packed %d", first);
	else
		snprintf(out, size, "packed %d CPUs", CPU_COUNT(&all));
}

/* One VM's row from its status (the rates are left to the caller). */
static void top_row(struct vmrow *r, const char *ent)
{
	json_object *vm, *reply, *a, *counters;
	size_t n, halted;
	char packed[32];

	memset(r, 0, sizeof(*r));
	r->wake_rate = r->cpu_pct = NAN;
	snprintf(r->name, sizeof(r->name), "%.*s", (int)(strlen(ent) - 5), ent);
	strcpy(r->state, "?");
	strcpy(r->since, "-");
	strcpy(r->vcpus, "-");
	strcpy(r->pid, "-");
	strcpy(r->held, "-");
	reply = fetch_status(ent, &vm, r->why, sizeof(r->why));
	if (!reply)
		return;
	r->ok = true;
	snprintf(r->name, sizeof(r->name), "%s", ctl_str_or(vm, "name", r->name));
	snprintf(r->state, sizeof(r->state), "%s", ctl_str_or(vm, "state", "?"));
	a = ctl_number(vm, "in_state_s");
	if (a)
		fmt_duration(json_object_get_double(a), r->since, sizeof(r->since));
	halted = vcpus_halted(vm, &n);
	snprintf(r->vcpus, sizeof(r->vcpus), "%zu/%zu", halted, n);
	a = ctl_member(vm, "pid", json_type_int);
	r->now.pid = a ? json_object_get_int(a) : 0;
	snprintf(r->pid, sizeof(r->pid), "%d", r->now.pid);
	counters = ctl_member(vm, "counters", json_type_object);
	r->now.wakeups = 0;
	if (counters) {
		a = ctl_number(counters, "halt_exits");
		r->now.wakeups += a ? json_object_get_double(a) : 0;
		a = ctl_number(counters, "housekeeping_wakeups");
		r->now.wakeups += a ? json_object_get_double(a) : 0;
	}
	r->now.at = monotonic_s();
	if (r->now.pid <= 0 ||
	    proc_cpu(r->now.pid, &r->now.cpu_s, &r->now.start))
		r->now.pid = 0;
	a = ctl_member(vm, "paused", json_type_boolean);
	packed_of(vm, r->now.pid, packed, sizeof(packed));
	snprintf(r->held, sizeof(r->held), "%s%s%s",
		 a && json_object_get_boolean(a) ? "suspended" : "",
		 a && json_object_get_boolean(a) && *packed ? ", " : "",
		 *packed ? packed : "");
	if (!*r->held)
		strcpy(r->held, "-");
	json_object_put(reply);
}

static const struct sample *prev_of(const struct vmrow *prev, size_t np,
				    const char *name)
{
	for (size_t i = 0; i < np; i++)
		if (prev[i].ok && !strcmp(prev[i].name, name))
			return &prev[i].now;
	return NULL;
}

/* Every VM of DIR now; @prev (@np rows) gives the rates. NULL on error. */
static struct vmrow *top_sample(const struct vmrow *prev, size_t np,
				size_t *n, int *rc)
{
	char **ents = list_sockets(n, rc);
	struct vmrow *rows;

	if (!ents)
		return NULL;
	if (*n > TOP_MAX_VMS)
		*n = TOP_MAX_VMS;
	rows = calloc(*n + 1, sizeof(*rows));
	for (size_t i = 0; rows && i < *n; i++) {
		top_row(&rows[i], ents[i]);
		/* the rate needs the same VM's previous sample */
		if (rows[i].ok) {
			const struct sample *p = prev_of(prev, np, rows[i].name);

			if (p && p->pid == rows[i].now.pid &&
			    p->start == rows[i].now.start && rows[i].now.pid &&
			    rows[i].now.at > p->at) {
				double dt = rows[i].now.at - p->at;

				rows[i].wake_rate = (rows[i].now.wakeups -
						     p->wakeups) / dt;
				rows[i].cpu_pct = 100.0 * (rows[i].now.cpu_s -
							   p->cpu_s) / dt;
			}
		}
	}
	for (size_t i = 0; i < *n; i++)
		free(ents[i]);
	free(ents);
	if (!rows) {
		errmsg("out of memory");
		*rc = EXIT_ERR;
	}
	return rows;
}

static void fmt_rate(double v, const char *f, char *buf, size_t size)
{
	if (isnan(v))
		snprintf(buf, size, "-");
	else
		snprintf(buf, size, f, v < 0 ? 0 : v);
}

/* The table, each line cut at @cols (0: no cut). */
static void top_print(const struct vmrow *rows, size_t n, int cols, bool tty)
{
	char line[512], wake[24], cpu[24];
	int w = 4;

	for (size_t i = 0; i < n; i++)
		if ((int)strlen(rows[i].name) > w)
			w = (int)strlen(rows[i].name);
	if (w > 40)
		w = 40;
	snprintf(line, sizeof(line), "%-*s  %-10s %-8s %-7s %8s %6s  %-8s %s",
		 w, "NAME", "STATE", "SINCE", "HALTED", "WAKEUP/s", "CPU%",
		 "PID", "HELD");
	printf("%.*s%s\n", cols > 0 ? cols : (int)sizeof(line), line,
	       tty ? "\033[K" : "");
	for (size_t i = 0; i < n; i++) {
		const struct vmrow *r = &rows[i];

		fmt_rate(r->wake_rate, "%.1f", wake, sizeof(wake));
		fmt_rate(r->cpu_pct, "%.1f", cpu, sizeof(cpu));
		if (r->ok)
			snprintf(line, sizeof(line),
				 "%-*.*s  %-10s %-8s %-7s %8s %6s  %-8s %s", w, w,
				 r->name, r->state, r->since, r->vcpus, wake, cpu,
				 r->pid, r->held);
		else
			snprintf(line, sizeof(line), "%-*.*s  ?  %s", w, w,
				 r->name, r->why);
		printf("%.*s%s\n", cols > 0 ? cols : (int)sizeof(line), line,
		       tty ? "\033[K" : "");
	}
}

static void top_json(const struct vmrow *rows, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct vmrow *r = &rows[i];
		json_object *o = json_object_new_object();

		json_object_object_add(o, "name", json_object_new_string(r->name));
		json_object_object_add(o, "state", json_object_new_string(r->state));
		if (r->ok) {
			json_object_object_add(o, "since", json_object_new_string(r->since));
			json_object_object_add(o, "halted", json_object_new_string(r->vcpus));
			json_object_object_add(o, "pid", json_object_new_int(r->now.pid));
			json_object_object_add(o, "held", json_object_new_string(r->held));
			if (!isnan(r->wake_rate))
				json_object_object_add(o, "wakeups_per_s",
					json_object_new_double(r->wake_rate));
			if (!isnan(r->cpu_pct))
				json_object_object_add(o, "cpu_percent",
					json_object_new_double(r->cpu_pct));
		} else {
			json_object_object_add(o, "error", json_object_new_string(r->why));
		}
		print_json(o);
		json_object_put(o);
	}
}

static struct termios saved_tio;
static bool tio_saved;

static void top_restore(void)
{
	if (tio_saved) {
		/* the cursor back, the main screen back */
		fputs("\033[?25h\033[?1049l", stdout);
		fflush(stdout);
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
		tio_saved = false;
	}
}

int cmd_top(double interval_s, long iterations)
{
	bool tty = isatty(STDOUT_FILENO) && isatty(STDIN_FILENO) && !options()->json;
	struct sigaction sa = { .sa_handler = top_on_signal };
	struct vmrow *prev = NULL, *rows;
	size_t np = 0, n;
	sigset_t block, waitmask;
	int rc = EXIT_OK;
	long done = 0;

	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGWINCH);
	sigprocmask(SIG_BLOCK, &block, &waitmask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGWINCH, &sa, NULL);
	if (tty) {
		struct termios t;

		if (tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
			t = saved_tio;
			t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
			t.c_cc[VMIN] = 0;
			t.c_cc[VTIME] = 0;
			tio_saved = tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0;
		}
		fputs("\033[?1049h\033[?25l", stdout); /* own screen, no cursor */
	} else {
		/* rates need a first sample one interval before */
		prev = top_sample(NULL, 0, &np, &rc);
		if (!prev)
			return rc;
	}
	for (;;) {
		struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
		struct timespec ts = { .tv_sec = (time_t)interval_s,
			.tv_nsec = (long)((interval_s - (double)(time_t)interval_s) * 1e9) };
		double until = monotonic_s() + interval_s;
		char c;
		int r;

		if (!tty) {
			/* one interval, then a snapshot */
			while (!top_signal && monotonic_s() < until) {
				double left = until - monotonic_s();

				ts.tv_sec = (time_t)left;
				ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
				ppoll(NULL, 0, &ts, &waitmask);
			}
			if (top_signal)
				break;
		}
		rows = top_sample(prev, np, &n, &rc);
		if (!rows)
			break;
		free(prev);
		prev = rows;
		np = n;
		if (tty) {
			struct winsize ws = { 0 };
			char clk[32];
			struct timespec now;

			ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws);
			clock_gettime(CLOCK_REALTIME, &now);
			fmt_clock((int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000,
				  clk, sizeof(clk));
			printf("\033[Hsysidlectl top  %s  %zu VMs in %s, every %gs; "
			       "q quits\033[K\n\033[K\n", clk, n, options()->dir,
			       interval_s);
			top_print(rows, ws.ws_row > 4 && n > (size_t)ws.ws_row - 4 ?
				  (size_t)ws.ws_row - 4 : n, ws.ws_col, true);
			fputs("\033[J", stdout);
		} else if (options()->json) {
			top_json(rows, n);
		} else {
			top_print(rows, n, 0, false);
		}
		if (flush_out() != EXIT_OK) {
			rc = EXIT_ERR;
			break;
		}
		if (!tty) {
			if (iterations > 0 && ++done >= iterations)
				break;
			continue;
		}
		/* wait for the next refresh, a key, a signal or a resize */
		r = 0;
		while (!top_signal && !top_resized) {
			double left = until - monotonic_s();

			if (left <= 0)
				break;
			ts.tv_sec = (time_t)left;
			ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
			r = ppoll(&pfd, 1, &ts, &waitmask);
			if (r > 0 && read(STDIN_FILENO, &c, 1) == 1 &&
			    (c == 'q' || c == 'Q'))
				break;
			r = 0;
		}
		if (r > 0 || top_signal)
			break;
		top_resized = 0;
		if (iterations > 0 && ++done >= iterations)
			break;
	}
	top_restore();
	free(prev);
	sigprocmask(SIG_SETMASK, &waitmask, NULL);
	if (top_signal)
		return 128 + top_signal;
	return rc;
}
