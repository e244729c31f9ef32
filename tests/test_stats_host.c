/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The libvirt bridge's host sources (tools/libvirt-bridge/stats_host.c) on
 * a fake /proc and a fake KVM debugfs, written in a temporary directory:
 * a QEMU process found by its -uuid, its vCPU threads from debugfs
 * (kvm) or by name (proc), their samples, KVM's blocking count as a veto,
 * and what makes an attach or a sample fail.
 */
#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tools/libvirt-bridge/stats_host.h"

#define UUID "5a1d1e00-0000-4000-8000-000000000001"

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

/* QEMU process 4242 with -uuid @uuid and two vCPU threads 4250, 4251
 * named "CPU N/KVM", each asleep with run count 7; a process 100 that is
 * something else; with @kvm, its VM 4242-12 in debugfs (and 4242-3, a VM
 * without vCPUs) with @blocked vCPUs blocked. */
static void world(const char *uuid, bool kvm, int blocked)
{
	char cmd[256];
	int n;

	snprintf(root, sizeof(root), "/tmp/stats-host-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	snprintf(proc, sizeof(proc), "%s/proc", root);
	snprintf(dbg, sizeof(dbg), "%s/kvm", root);
	mkdir(dbg, 0755);
	put("sleep\0" "100\0", "proc/100/cmdline");
	n = snprintf(cmd, sizeof(cmd), "qemu-system-x86_64%c-name%cguest=a%c"
		     "-uuid%c%s%c-m%c128", 0, 0, 0, 0, uuid, 0, 0);
	{
		char path[600];
		FILE *f;

		snprintf(path, sizeof(path), "%s/4242", proc);
		mkdir(path, 0755);
		snprintf(path, sizeof(path), "%s/4242/cmdline", proc);
		f = fopen(path, "w");
		ck_assert_ptr_nonnull(f);
		fwrite(cmd, 1, (size_t)n + 1, f);
		fclose(f);
	}
	for (int i = 0; i < 2; i++) {
		char comm[32], stat[128];

		snprintf(comm, sizeof(comm), "CPU %d/KVM\n", i);
		snprintf(stat, sizeof(stat), "%d (CPU %d/KVM) S 1 2 3\n",
			 4250 + i, i);
		put(comm, "proc/4242/task/%d/comm", 4250 + i);
		put(stat, "proc/4242/task/%d/stat", 4250 + i);
		put("1000 20 7\n", "proc/4242/task/%d/schedstat", 4250 + i);
	}
	put("qemu-system-x86\n", "proc/4242/task/4242/comm");
	if (kvm) {
		char b[16];

		snprintf(b, sizeof(b), "%d\n", blocked);
		put("3\n", "kvm/4242-3/halt_exits");
		put("4250\n", "kvm/4242-12/vcpu0/pid");
		put("4251\n", "kvm/4242-12/vcpu1/pid");
		put(b, "kvm/4242-12/blocking");
	}
}

static void world_end(void)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_kvm_attach_and_sample)
{
	struct stats_domain sd = { 0 };
	char why[256];
	struct host_vm *h;

	world(UUID, true, 2);
	/* the uuid as libvirt writes it; QEMU's may be in another case */
	h = host_vm_attach("5A1D1E00-0000-4000-8000-000000000001", STATS_AUTO,
			   proc, dbg, why, sizeof(why));
	ck_assert_msg(h != NULL, "%s", why);
	ck_assert_int_eq(host_vm_kind(h), STATS_KVM);
	ck_assert_int_eq(host_vm_pid(h), 4242);
	ck_assert_uint_eq(host_vm_ncpus(h), 2);
	ck_assert_int_eq(host_vm_sample(h, &sd, why, sizeof(why)), 0);
	ck_assert_uint_eq(sd.nvcpus, 2);
	ck_assert(sd.borrowed);
	for (int i = 0; i < 2; i++) {
		ck_assert(sd.seen[i]);
		ck_assert(sd.vcpus[i].has_halt_exits);
		ck_assert_uint_eq(sd.vcpus[i].halt_exits, 7);
		ck_assert(sd.vcpus[i].blocking);
	}
	/* vCPU 1 ran (its count moved) and runs now: read afresh each time,
	 * through the descriptors opened at attach */
	put("1500 30 9\n", "proc/4242/task/4251/schedstat");
	put("4251 (CPU 1/KVM) R 1 2 3\n", "proc/4242/task/4251/stat");
	ck_assert_int_eq(host_vm_sample(h, &sd, why, sizeof(why)), 0);
	ck_assert_uint_eq(sd.vcpus[1].halt_exits, 9);
	ck_assert(!sd.vcpus[1].blocking);
	ck_assert(sd.vcpus[0].blocking);
	host_vm_free(h);
	world_end();
}
END_TEST

/* Both threads asleep, KVM says one vCPU is blocked in it: which thread
 * sleeps elsewhere is unknown, so neither counts as halted. */
START_TEST(test_kvm_blocking_veto)
{
	struct stats_domain sd = { 0 };
	char why[256];
	struct host_vm *h;

	world(UUID, true, 1);
	h = host_vm_attach(UUID, STATS_KVM, proc, dbg, why, sizeof(why));
	ck_assert_msg(h != NULL, "%s", why);
	ck_assert_int_eq(host_vm_sample(h, &sd, why, sizeof(why)), 0);
	ck_assert(!sd.vcpus[0].blocking && !sd.vcpus[1].blocking);
	/* KVM's count back to 2: halted again */
	put("2\n", "kvm/4242-12/blocking");
	ck_assert_int_eq(host_vm_sample(h, &sd, why, sizeof(why)), 0);
	ck_assert(sd.vcpus[0].blocking && sd.vcpus[1].blocking);
	/* KVM's statistics gone (the VM closed): the sample fails */
	put("", "kvm/4242-12/blocking");
	ck_assert_int_eq(host_vm_sample(h, &sd, why, sizeof(why)), -1);
	ck_assert_msg(strstr(why, "KVM's statistics of process 4242"), "%s",
		      why);
	host_vm_free(h);
	world_end();
}
END_TEST

START_TEST(test_proc_fallback)
{
	struct stats_domain sd = { 0 };
	char why[256];
	struct host_vm *h;

	world(UUID, false, 0);
	/* auto without debugfs: proc, the threads by their names */
	h = host_vm_attach(UUID, STATS_AUTO, proc, dbg, why, sizeof(why));
	ck_assert_msg(h != NULL, "%s", why);
	ck_assert_int_eq(host_vm_kind(h), STATS_PROC);
	ck_assert_uint_eq(host_vm_ncpus(h), 2);
	ck_assert_int_eq(host_vm_sample(h, &sd, why, sizeof(why)), 0);
	ck_assert(sd.vcpus[0].blocking && sd.vcpus[1].blocking);
	/* a thread whose files read empty (gone): the sample fails, naming
	 * it */
	put("", "proc/4242/task/4250/schedstat");
	ck_assert_int_eq(host_vm_sample(h, &sd, why, sizeof(why)), -1);
	ck_assert_msg(strstr(why, "vCPU 0's thread of process 4242"), "%s",
		      why);
	host_vm_free(h);
	/* --source kvm without debugfs: refused, saying where it looked */
	h = host_vm_attach(UUID, STATS_KVM, proc, dbg, why, sizeof(why));
	ck_assert_ptr_null(h);
	ck_assert_msg(strstr(why, "is debugfs mounted?"), "%s", why);
	world_end();
}
END_TEST

START_TEST(test_attach_refused)
{
	char why[256];
	struct host_vm *h;

	world(UUID, false, 0);
	h = host_vm_attach("5a1d1e00-0000-4000-8000-000000000099", STATS_AUTO,
			   proc, dbg, why, sizeof(why));
	ck_assert_ptr_null(h);
	ck_assert_msg(strstr(why, "no process with '-uuid "), "%s", why);
	/* vCPU threads 0 and 2 but no 1: not QEMU's numbering */
	put("CPU 2/KVM\n", "proc/4242/task/4251/comm");
	h = host_vm_attach(UUID, STATS_PROC, proc, dbg, why, sizeof(why));
	ck_assert_ptr_null(h);
	ck_assert_msg(strstr(why, "no vCPU threads of process 4242"), "%s",
		      why);
	world_end();
}
END_TEST

/* A thread name with ") S" in it: the state is after the last ')'. */
START_TEST(test_stat_parse)
{
	struct stats_domain sd = { 0 };
	char why[256];
	struct host_vm *h;

	world(UUID, false, 0);
	h = host_vm_attach(UUID, STATS_PROC, proc, dbg, why, sizeof(why));
	ck_assert_msg(h != NULL, "%s", why);
	put("4250 (x) S (y) R 1 2 3\n", "proc/4242/task/4250/stat");
	ck_assert_int_eq(host_vm_sample(h, &sd, why, sizeof(why)), 0);
	ck_assert(!sd.vcpus[0].blocking);
	host_vm_free(h);
	ck_assert_int_eq(stats_kind_parse("kvm"), STATS_KVM);
	ck_assert_int_eq(stats_kind_parse("file"), -1);
	ck_assert_str_eq(stats_kind_name(STATS_PROC), "proc");
	world_end();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stats_host");
	TCase *tc = tcase_create("host");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_kvm_attach_and_sample);
	tcase_add_test(tc, test_kvm_blocking_veto);
	tcase_add_test(tc, test_proc_fallback);
	tcase_add_test(tc, test_attach_refused);
	tcase_add_test(tc, test_stat_parse);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
