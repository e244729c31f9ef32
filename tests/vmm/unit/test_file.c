/* SPDX-License-Identifier: GPL-2.0-only */
/* base/file.c: the output files' checks, an open that never blocks (a FIFO
 * with no reader, a directory, a socket) and bounded writes to a pipe
 * nobody reads. In a temporary directory of its own. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/file.h"
#include "base/time.h"

static char dir[64], path[PATH_MAX], why[256];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/vmm-file-unit.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static const char *at(const char *name)
{
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return path;
}

START_TEST(check_paths)
{
	ck_assert_int_eq(output_check(at("new.json"), why, sizeof(why)), 0);
	ck_assert_int_eq(output_check(at("none/x.json"), why, sizeof(why)), -1);
	ck_assert_ptr_nonnull(strstr(why, "does not exist"));
	ck_assert_int_eq(output_check(dir, why, sizeof(why)), -1);
	ck_assert_str_eq(why, "is a directory");
	ck_assert_int_eq(mkfifo(at("fifo"), 0600), 0);
	/* no reader: checked without being opened */
	ck_assert_int_eq(output_check(at("fifo"), why, sizeof(why)), 0);
	ck_assert_int_eq(output_dir_check(at("none/m.prom"), why, sizeof(why)),
			 -1);
	ck_assert_int_eq(output_dir_check(at("m.prom"), why, sizeof(why)), 0);
}
END_TEST

START_TEST(open_kinds)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	bool fifo = true;
	int fd, s;

	fd = output_open(at("reg"), &fifo, why, sizeof(why));
	ck_assert_int_ge(fd, 0);
	ck_assert(!fifo);
	ck_assert(fcntl(fd, F_GETFL) & O_NONBLOCK);
	close(fd);
	errno = 0;
	ck_assert_int_eq(output_open(dir, NULL, why, sizeof(why)), -1);
	ck_assert_int_eq(errno, EISDIR);
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	at("sock");
	ck_assert_uint_lt(strlen(path), sizeof(a.sun_path));
	memcpy(a.sun_path, path, strlen(path) + 1);
	ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(output_open(at("sock"), NULL, why, sizeof(why)), -1);
	ck_assert_int_eq(errno, ENODEV);
	ck_assert_ptr_nonnull(strstr(why, "socket"));
	close(s);
	ck_assert_str_eq(file_kind_name(S_IFIFO), "a FIFO");
	ck_assert_str_eq(file_kind_name(S_IFREG), "a regular file");
}
END_TEST

START_TEST(open_fifo)
{
	bool fifo = false;
	int fd, r;

	ck_assert_int_eq(mkfifo(at("fifo"), 0600), 0);
	ck_assert_int_eq(output_open(path, &fifo, why, sizeof(why)), -1);
	ck_assert_int_eq(errno, ENXIO);
	ck_assert_str_eq(why, "is a FIFO with no reader");
	r = open(path, O_RDONLY | O_NONBLOCK);
	ck_assert_int_ge(r, 0);
	fd = output_open(path, &fifo, why, sizeof(why));
	ck_assert_int_ge(fd, 0);
	ck_assert(fifo);
	close(fd);
	close(r);
}
END_TEST

/* A pipe of one page that nobody reads: writes end at their deadline. */
START_TEST(write_bounded)
{
	static char buf[8192];
	int p[2];
	uint64_t t0, took;
	size_t n;

	ck_assert_int_eq(pipe2(p, O_NONBLOCK), 0);
	ck_assert_int_eq(fcntl(p[1], F_SETPIPE_SZ, 4096), 4096);
	memset(buf, 'x', sizeof(buf));
	t0 = now_ns();
	n = output_write(p[1], buf, sizeof(buf), t0 + 50000000ull);
	took = now_ns() - t0;
	ck_assert_uint_eq(n, 4096);
	ck_assert_int_eq(errno, ETIMEDOUT);
	ck_assert_uint_ge(took, 50000000ull);
	ck_assert_uint_lt(took, 1000000000ull);
	/* no deadline: not a moment's wait */
	t0 = now_ns();
	ck_assert_uint_eq(output_write(p[1], "line\n", 5, 0), 0);
	ck_assert_int_eq(errno, ETIMEDOUT);
	ck_assert_uint_lt(now_ns() - t0, 50000000ull);
	/* room again: a line goes in whole */
	ck_assert_int_eq(read(p[0], buf, sizeof(buf)), 4096);
	ck_assert_uint_eq(output_write(p[1], "line\n", 5, 0), 5);
	close(p[0]);
	/* the reader gone: EPIPE (the VMM ignores SIGPIPE) */
	signal(SIGPIPE, SIG_IGN);
	ck_assert_uint_eq(output_write(p[1], "line\n", 5, 0), 0);
	ck_assert_int_eq(errno, EPIPE);
	close(p[1]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("file");
	TCase *tc = tcase_create("outputs");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, check_paths);
	tcase_add_test(tc, open_kinds);
	tcase_add_test(tc, open_fifo);
	tcase_add_test(tc, write_bounded);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
