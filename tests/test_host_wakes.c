/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The libvirt bridge's host view of what wakes a domain
 * (tools/libvirt-bridge/host_wakes.c) on a fake /proc and a fake KVM
 * debugfs, written in a temporary directory: KVM's counters and the
 * threads' wake-ups read, summed per thread name, threads coming and
 * going, the last minute's rates from the ring, a TCG domain (no KVM
 * counters, said why), a process gone, bad files, the bounds, the JSON.
 */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tools/libvirt-bridge/host_wakes.h"

#define S 1000000000ull

static char root[256], proc[300], dbg[300];

/* Write @text to the file at the path formatted from @fmt under root,
 * making its directories. */
static void put(const char *text, const char *fmt, ...)
{
	char rel[512], path[1024], *p;
	va_list ap;
	FILE *f;

	va_start(ap, fmt);
	vsnprintf(rel, sizeof(rel), fmt, ap);
	va_end(ap);
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		mkdir(path, 0755);
		*p = '/';
	}
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fwrite(text, 1, strlen(text), f);
	fclose(f);
}

/* Thread @tid of process 4242 named @name with @vol voluntary switches. */
static void thread(int tid, const char *name, unsigned long vol)
{
	char comm[64], status[256];

	snprintf(comm, sizeof(comm), "%s\n", name);
	snprintf(status, sizeof(status), "Name:\t%s\nState:\tS (sleeping)\n"
		 "nonvoluntary_ctxt_switches:\t999999\n"
		 "voluntary_ctxt_switches:\t%lu\n", name, vol);
	put(comm, "proc/4242/task/%d/comm", tid);
	put(status, "proc/4242/task/%d/status", tid);
}

/* KVM counter @file of VM 4242-12 at @v. */
static void kvm(const char *file, unsigned long v)
{
	char b[32];

	snprintf(b, sizeof(b), "%lu\n", v);
	put(b, "kvm/4242-12/%s", file);
}

/* Process 4242: its main thread and two vCPU threads; with @with_kvm,
 * its VM 4242-12 in debugfs with every counter at 10. */
static void world(bool with_kvm)
{
	snprintf(root, sizeof(root), "/tmp/host-wakes-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	snprintf(proc, sizeof(proc), "%s/proc", root);
	snprintf(dbg, sizeof(dbg), "%s/kvm", root);
	mkdir(dbg, 0755);
	thread(4242, "qemu-system-x86", 10);
	thread(4250, "CPU 0/KVM", 100);
	thread(4251, "CPU 1/KVM", 200);
	if (with_kvm) {
		put("4250\n", "kvm/4242-12/vcpu0/pid");
		for (int k = 0; k < HW_KVM_N; k++)
			kvm(host_wakes_kvm_file((enum host_wakes_kvm)k), 10);
	}
}

static void world_end(void)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}

/* The index of thread name @name in @hw, or -1. */
static int name_at(const struct host_wakes *hw, const char *name)
{
	for (unsigned int i = 0; i < host_wakes_nthreads(hw); i++) {
		unsigned int n;
		uint64_t t;

		if (!strcmp(host_wakes_thread(hw, i, &n, &t), name))
			return (int)i;
	}
	return -1;
}

/* Thread name @name's wake-ups since first read and its threads. */
static uint64_t total_of(const struct host_wakes *hw, const char *name,
			 unsigned int *threads)
{
	int i = name_at(hw, name);
	uint64_t t;
	unsigned int n;

	ck_assert_int_ge(i, 0);
	host_wakes_thread(hw, (unsigned int)i, &n, &t);
	if (threads)
		*threads = n;
	return t;
}

/* @hw as JSON, in a static buffer. */
static const char *json(const struct host_wakes *hw)
{
	static char buf[16384];
	FILE *f = fmemopen(buf, sizeof(buf), "w");

	ck_assert_ptr_nonnull(f);
	host_wakes_json(f, hw);
	fclose(f);
	return buf;
}

START_TEST(test_kvm_and_threads)
{
	struct host_wakes *hw;
	unsigned int n;
	uint64_t v;
	double r;

	world(true);
	hw = host_wakes_new();
	ck_assert(strstr(json(hw), "\"absent\":\"not read yet\""));
	ck_assert(host_wakes_due(hw, 0));
	ck_assert_int_eq(host_wakes_sample(hw, 4242, proc, dbg, 5 * S), 0);
	/* the baseline: counts since now; KVM's as the kernel has them */
	ck_assert_int_eq(host_wakes_nthreads(hw), 3);
	ck_assert_uint_eq(total_of(hw, "CPU 0/KVM", &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert(host_wakes_kvm_total(hw, HW_KVM_HALT_WAKEUP, &v));
	ck_assert_uint_eq(v, 10);
	ck_assert(!host_wakes_kvm_rate(hw, HW_KVM_HALT_WAKEUP, &r));
	ck_assert(!host_wakes_thread_rate(hw, 0, &r));
	ck_assert(strstr(json(hw), "\"per_s\":null"));
	ck_assert(!host_wakes_due(hw, 5 * S + S / 2));
	ck_assert(host_wakes_due(hw, 6 * S));

	thread(4250, "CPU 0/KVM", 160);
	kvm("halt_wakeup", 40);
	kvm("signal_exits", 9);   /* went back: no negative rate */
	ck_assert_int_eq(host_wakes_sample(hw, 4242, proc, dbg, 15 * S), 0);
	ck_assert_uint_eq(total_of(hw, "CPU 0/KVM", NULL), 60);
	ck_assert_uint_eq(total_of(hw, "CPU 1/KVM", NULL), 0);
	ck_assert_uint_eq(host_wakes_span_ns(hw), 10 * S);
	ck_assert_uint_eq(host_wakes_samples(hw), 2);
	ck_assert(host_wakes_thread_rate(hw, (unsigned int)name_at(hw,
					 "CPU 0/KVM"), &r));
	ck_assert_double_eq_tol(r, 6.0, 1e-9);
	ck_assert(host_wakes_kvm_rate(hw, HW_KVM_HALT_WAKEUP, &r));
	ck_assert_double_eq_tol(r, 3.0, 1e-9);
	ck_assert(host_wakes_kvm_rate(hw, HW_KVM_SIGNAL_EXITS, &r));
	ck_assert_double_eq_tol(r, 0.0, 1e-9);
	ck_assert(strstr(json(hw), "\"source\":\"host\""));
	ck_assert(strstr(json(hw), "\"scope\":\"vm\""));
	ck_assert(strstr(json(hw), "\"halt_wakeup\":{\"total\":40,"
			 "\"per_s\":3.000}"));
	/* busiest first */
	ck_assert(strstr(json(hw), "\"threads\":[{\"name\":\"CPU 0/KVM\","
			 "\"threads\":1,\"wakeups_total\":60,\"per_s\":6.000}"));
	ck_assert(strstr(json(hw), "\"window_s\":10.000,\"samples\":2"));

	/* a worker comes (all its wake-ups count), CPU 1's thread goes
	 * (its count stays) */
	thread(4260, "worker", 5);
	thread(4261, "worker", 7);
	{
		char cmd[700];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s/4242/task/4251'", proc);
		ck_assert_int_eq(system(cmd), 0);
	}
	ck_assert_int_eq(host_wakes_sample(hw, 4242, proc, dbg, 16 * S), 0);
	ck_assert_uint_eq(total_of(hw, "worker", &n), 12);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(total_of(hw, "CPU 1/KVM", &n), 0);
	ck_assert_uint_eq(n, 0);
	host_wakes_free(hw);
	world_end();
}
END_TEST

START_TEST(test_window)
{
	struct host_wakes *hw;
	double r;

	world(true);
	hw = host_wakes_new();
	/* 2 wake-ups/s for 100 s, then 10/s for 30 s: a sample a second */
	for (unsigned int t = 0; t <= 130; t++) {
		unsigned long vol = t <= 100 ? 100 + 2 * t : 300 + 10 * (t - 100);

		thread(4250, "CPU 0/KVM", vol);
		kvm("halt_exits", vol);
		ck_assert_int_eq(host_wakes_sample(hw, 4242, proc, dbg,
						   1000 * S + t * S), 0);
		if (t == 100) {
			ck_assert_uint_eq(host_wakes_samples(hw), 61);
			ck_assert_uint_eq(host_wakes_span_ns(hw), 60 * S);
			ck_assert(host_wakes_kvm_rate(hw, HW_KVM_HALT_EXITS, &r));
			ck_assert_double_eq_tol(r, 2.0, 1e-9);
		}
	}
	/* the last minute: 30 s at 2/s, 30 s at 10/s */
	ck_assert_uint_eq(host_wakes_span_ns(hw), 60 * S);
	ck_assert(host_wakes_kvm_rate(hw, HW_KVM_HALT_EXITS, &r));
	ck_assert_double_eq_tol(r, 6.0, 1e-9);
	ck_assert(host_wakes_thread_rate(hw, (unsigned int)name_at(hw,
					 "CPU 0/KVM"), &r));
	ck_assert_double_eq_tol(r, 6.0, 1e-9);
	/* a gap longer than the window: one sample left in it */
	ck_assert_int_eq(host_wakes_sample(hw, 4242, proc, dbg, 1300 * S), 0);
	ck_assert_uint_eq(host_wakes_samples(hw), 1);
	ck_assert_uint_eq(host_wakes_span_ns(hw), 0);
	ck_assert(!host_wakes_kvm_rate(hw, HW_KVM_HALT_EXITS, &r));
	host_wakes_free(hw);
	world_end();
}
END_TEST

START_TEST(test_tcg_and_gone)
{
	struct host_wakes *hw;
	uint64_t v;
	double r;

	world(false);
	hw = host_wakes_new();
	ck_assert_int_eq(host_wakes_sample(hw, 4242, proc, dbg, S), 0);
	thread(4250, "CPU 0/KVM", 130);
	ck_assert_int_eq(host_wakes_sample(hw, 4242, proc, dbg, 3 * S), 0);
	ck_assert(!host_wakes_kvm_total(hw, HW_KVM_HALT_EXITS, &v));
	ck_assert(!host_wakes_kvm_rate(hw, HW_KVM_HALT_EXITS, &r));
	ck_assert(strstr(host_wakes_kvm_why(hw), "TCG"));
	ck_assert(strstr(json(hw), "\"kvm\":null,\"kvm_absent\":\"no KVM VM "
			 "of process 4242"));
	ck_assert(strstr(json(hw), "\"per_s\":15.000"));
	/* another process: the figures start again */
	ck_assert_int_eq(host_wakes_sample(hw, 4243, proc, dbg, 4 * S), -1);
	ck_assert_int_eq(host_wakes_pid(hw), 0);
	ck_assert(strstr(json(hw), "\"absent\":\"process 4243 is gone\""));
	ck_assert_int_eq(host_wakes_nthreads(hw), 0);
	host_wakes_absent(hw, "a replay (--stats-file): no process to read");
	ck_assert(strstr(json(hw), "\"absent\":\"a replay"));
	host_wakes_free(hw);
	host_wakes_free(NULL);
	world_end();
}
END_TEST

START_TEST(test_bad_files)
{
	struct host_wakes *hw;
	char big[8192];
	uint64_t v;

	world(true);
	kvm("halt_wakeup", 0);
	put("abc\n", "kvm/4242-12/halt_wakeup");
	put("-5\n", "kvm/4242-12/irq_injections");
	put("99999999999999999999999999\n", "kvm/4242-12/exits");
	put("", "kvm/4242-12/signal_exits");
	/* a status without the line, one with only the nonvoluntary one */
	put("CPU 0/KVM\n", "proc/4242/task/4250/comm");
	put("Name:\tx\n", "proc/4242/task/4250/status");
	put("nonvoluntary_ctxt_switches:\t5\n", "proc/4242/task/4251/status");
	/* a name longer than any comm, control bytes, and a status file
	 * larger than the buffer */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	put(big, "proc/4242/task/4270/comm");
	put(big, "proc/4242/task/4270/status");
	put("a\"b\\c\x01\xff\n", "proc/4242/task/4271/comm");
	put("voluntary_ctxt_switches:\t3\n", "proc/4242/task/4271/status");
	put("junk\n", "proc/4242/task/notatid");
	hw = host_wakes_new();
	ck_assert_int_eq(host_wakes_sample(hw, 4242, proc, dbg, S), 0);
	ck_assert(!host_wakes_kvm_total(hw, HW_KVM_HALT_WAKEUP, &v));
	ck_assert(!host_wakes_kvm_total(hw, HW_KVM_IRQ_INJECTIONS, &v));
	ck_assert(!host_wakes_kvm_total(hw, HW_KVM_EXITS, &v));
	ck_assert(!host_wakes_kvm_total(hw, HW_KVM_SIGNAL_EXITS, &v));
	ck_assert(host_wakes_kvm_total(hw, HW_KVM_HALT_EXITS, &v));
	ck_assert_int_eq(name_at(hw, "CPU 0/KVM"), -1);
	ck_assert_int_eq(name_at(hw, "CPU 1/KVM"), -1);
	ck_assert_int_ge(name_at(hw, "qemu-system-x86"), 0);
	ck_assert(strstr(json(hw), "{\"name\":\"a\\\"b\\\\c\\u0001?\""));
	/* every file of the process unreadable: gone, not a crash */
	{
		char cmd[700];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s/4242/task' '%s/4242-12'",
			 proc, dbg);
		ck_assert_int_eq(system(cmd), 0);
	}
	ck_assert_int_eq(host_wakes_sample(hw, 4242, proc, dbg, 2 * S), -1);
	ck_assert(strstr(json(hw), "\"absent\":\"process 4242 is gone\""));
	host_wakes_free(hw);
	world_end();
}
END_TEST

START_TEST(test_kvm_unreadable)
{
	struct host_wakes *hw;
	uint64_t v;

	world(true);
	for (int k = 0; k < HW_KVM_N; k++)
		put("x\n", "kvm/4242-12/%s",
		    host_wakes_kvm_file((enum host_wakes_kvm)k));
	hw = host_wakes_new();
	ck_assert_int_eq(host_wakes_sample(hw, 4242, proc, dbg, S), 0);
	ck_assert(!host_wakes_kvm_total(hw, HW_KVM_EXITS, &v));
	ck_assert(strstr(host_wakes_kvm_why(hw), "unreadable (not numbers)"));
	/* let go: the next sample does not read them again */
	kvm("exits", 5);
	ck_assert_int_eq(host_wakes_sample(hw, 4242, proc, dbg, 2 * S), 0);
	ck_assert(!host_wakes_kvm_total(hw, HW_KVM_EXITS, &v));
	ck_assert_int_ge(name_at(hw, "CPU 0/KVM"), 0);
	/* absent: a change once, then none */
	ck_assert(host_wakes_absent(hw, "gone"));
	ck_assert(!host_wakes_absent(hw, "gone"));
	ck_assert(host_wakes_absent(hw, "another reason"));
	host_wakes_free(hw);
	world_end();
}
END_TEST

START_TEST(test_bounds)
{
	struct host_wakes *hw;
	char name[32];
	unsigned int n;

	world(false);
	/* more names than the table holds, more threads than are read */
	for (int i = 0; i < HOST_WAKES_THREADS + 20; i++) {
		snprintf(name, sizeof(name), "w%d", i % 50);
		thread(5000 + i, name, 1);
	}
	hw = host_wakes_new();
	ck_assert_int_eq(host_wakes_sample(hw, 4242, proc, dbg, S), 0);
	ck_assert(host_wakes_capped(hw));
	ck_assert_int_eq(host_wakes_nthreads(hw), HOST_WAKES_NAMES);
	ck_assert_int_eq(name_at(hw, "other"), HOST_WAKES_NAMES - 1);
	total_of(hw, "other", &n);
	ck_assert_uint_gt(n, 0);
	ck_assert(strstr(json(hw), "\"threads_capped\":true"));
	host_wakes_free(hw);
	world_end();
}
END_TEST

START_TEST(test_json_string)
{
	char buf[256];
	FILE *f = fmemopen(buf, sizeof(buf), "w");

	ck_assert_ptr_nonnull(f);
	host_wakes_json_string(f, "w\xc3\xa9" "b\n\xc3");
	fputc(' ', f);
	host_wakes_json_string(f, NULL);
	fclose(f);
	ck_assert_str_eq(buf, "\"w\xc3\xa9" "b\\u000a?\" \"\"");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("host_wakes");
	TCase *tc = tcase_create("host_wakes");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_kvm_and_threads);
	tcase_add_test(tc, test_window);
	tcase_add_test(tc, test_tcg_and_gone);
	tcase_add_test(tc, test_bad_files);
	tcase_add_test(tc, test_kvm_unreadable);
	tcase_add_test(tc, test_bounds);
	tcase_add_test(tc, test_json_string);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
