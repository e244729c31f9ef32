/* SPDX-License-Identifier: GPL-2.0-only */
/* Unit tests of common/: the urn:sysidle:1 writer and reader, the hook
 * runner's timeout parser and directory check, the control socket paths and
 * its line reader's bound. */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "conffile.h"
#include "ctl_client.h"
#include "hookrun.h"
#include "monotonic.h"
#include "sysidle_doc.h"

static void same_doc(const struct sysidle_doc *a, const struct sysidle_doc *b)
{
	ck_assert_int_eq(a->state, b->state);
	ck_assert_uint_eq(a->since_unix_ms, b->since_unix_ms);
	ck_assert_uint_eq(a->full_idle_periods, b->full_idle_periods);
	ck_assert_uint_eq(a->vcpus, b->vcpus);
	ck_assert_uint_eq(a->valid_until_unix_ms, b->valid_until_unix_ms);
	ck_assert_uint_eq(a->writer_pid, b->writer_pid);
	ck_assert_uint_eq(a->writer_start_ticks, b->writer_start_ticks);
	ck_assert_str_eq(a->writer_host, b->writer_host);
	ck_assert_int_eq(a->has_duty, b->has_duty);
	for (int i = 0; i < 3; i++)
		ck_assert_uint_eq(a->full_idle_permille[i],
				  b->full_idle_permille[i]);
	ck_assert_uint_eq(a->left_full_idle_unix_ms, b->left_full_idle_unix_ms);
}

/* The duty cycle's attributes: after vcpus, before the lease, read back;
 * a reader takes other spellings of a ratio in 0..1 and refuses the rest;
 * a document without them (older writers) still parses. */
START_TEST(test_doc_duty)
{
	struct sysidle_doc d = { .state = SYSIDLE_NOT,
				 .since_unix_ms = 1767323045678ull,
				 .full_idle_periods = 2, .vcpus = 1,
				 .has_duty = true,
				 .full_idle_permille = { 1000, 973, 5 },
				 .left_full_idle_unix_ms = 1767323045678ull,
				 .valid_until_unix_ms = 9, .writer_pid = 7,
				 .writer_host = "h" };
	static const struct { const char *v; int ok; unsigned int p; } r[] = {
		{ "0", 1, 0 }, { "1", 1, 1000 }, { "0.5", 1, 500 },
		{ "0.9739", 1, 973 }, { "1.000000", 1, 1000 },
		{ "1.001", 0, 0 }, { "2", 0, 0 }, { "-0.1", 0, 0 },
		{ "0.", 0, 0 }, { ".5", 0, 0 }, { "0.5x", 0, 0 }, { "", 0, 0 },
		{ "0.1234567890123456789", 0, 0 },
	};
	struct sysidle_doc back;
	char *x = sysidle_doc_element(&d), buf[256];

	ck_assert_ptr_nonnull(x);
	ck_assert_str_eq(x, "<state name='NOT' state='NOT' num='0' "
			 "since='2026-01-02T03:04:05.678Z' "
			 "since_unix_ms='1767323045678' full_idle_periods='2' "
			 "vcpus='1' full_idle_ratio_1m='1.000' "
			 "full_idle_ratio_1h='0.973' full_idle_ratio_24h='0.005' "
			 "left_full_idle_unix_ms='1767323045678' "
			 "writer_host='h' writer_pid='7' writer_start_ticks='0' "
			 "valid_until_unix_ms='9'/>");
	ck_assert_int_eq(sysidle_doc_parse(x, &back), 0);
	same_doc(&back, &d);
	free(x);
	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
		snprintf(buf, sizeof(buf), "<state num='1' since_unix_ms='5' "
			 "full_idle_ratio_1h='%s'/>", r[i].v);
		ck_assert_int_eq(sysidle_doc_parse(buf, &back),
				 r[i].ok ? 0 : -1);
		if (r[i].ok) {
			ck_assert(back.has_duty);
			ck_assert_uint_eq(back.full_idle_permille[1], r[i].p);
		}
	}
	ck_assert_int_eq(sysidle_doc_parse("<state num='1' since_unix_ms='5' "
					   "left_full_idle_unix_ms='x'/>",
					   &back), -1);
	ck_assert_int_eq(sysidle_doc_parse("<state num='1' since_unix_ms='5'/>",
					   &back), 0);
	ck_assert(!back.has_duty);
	ck_assert_uint_eq(back.left_full_idle_unix_ms, 0);
}
END_TEST

/* A leased element: the four lease attributes after the others, and read
 * back as written. */
START_TEST(test_doc_lease)
{
	struct sysidle_doc d = { .state = SYSIDLE_FULL_NOTED,
				 .since_unix_ms = 1767323045678ull,
				 .full_idle_periods = 1, .vcpus = 2,
				 .valid_until_unix_ms = 1767323075678ull,
				 .writer_pid = 4242,
				 .writer_start_ticks = 123456,
				 .writer_host = "host-1.example" };
	struct sysidle_doc back;
	char *x = sysidle_doc_element(&d);

	ck_assert_ptr_nonnull(x);
	ck_assert_str_eq(x, "<state name='FULL_NOTED' state='FULL_NOTED' "
			 "num='4' since='2026-01-02T03:04:05.678Z' "
			 "since_unix_ms='1767323045678' "
			 "full_idle_periods='1' vcpus='2' "
			 "writer_host='host-1.example' writer_pid='4242' "
			 "writer_start_ticks='123456' "
			 "valid_until_unix_ms='1767323075678'/>");
	ck_assert_int_eq(sysidle_doc_parse(x, &back), 0);
	same_doc(&back, &d);
	free(x);
	ck_assert_int_eq(sysidle_doc_parse("<state name='NOT' since_unix_ms='1' "
					   "valid_until_unix_ms='x'/>", &back),
			 -1);
}
END_TEST

START_TEST(test_doc_element)
{
	struct sysidle_doc d = { .state = SYSIDLE_FULL_NOTED,
				 .since_unix_ms = 1767323045678ull,
				 .full_idle_periods = 2, .vcpus = 3 };
	struct sysidle_doc back;
	char *x = sysidle_doc_element(&d);

	ck_assert_ptr_nonnull(x);
	ck_assert_str_eq(x, "<state name='FULL_NOTED' state='FULL_NOTED' "
			 "num='4' since='2026-01-02T03:04:05.678Z' "
			 "since_unix_ms='1767323045678' "
			 "full_idle_periods='2' vcpus='3'/>");
	ck_assert_int_eq(sysidle_doc_parse(x, &back), 0);
	same_doc(&back, &d);
	free(x);
}
END_TEST

START_TEST(test_doc_domain_xml)
{
	struct sysidle_doc d = { .state = SYSIDLE_NOT,
				 .since_unix_ms = 1767225600000ull,
				 .vcpus = 2 };
	struct hook_domain dom = { "a<b>&'\"", "u-1", 2 };
	struct sysidle_doc back;
	char *x = sysidle_doc_domain_xml(&dom, &d);

	ck_assert_ptr_nonnull(x);
	ck_assert_str_eq(x, "<domain type='kvm'><name>a&lt;b&gt;&amp;&apos;"
			 "&quot;</name><uuid>u-1</uuid><vcpu>2</vcpu>"
			 "<metadata><sysidle:state xmlns:sysidle="
			 "'urn:sysidle:1' name='NOT' state='NOT' num='0' "
			 "since='2026-01-01T00:00:00.000Z' "
			 "since_unix_ms='1767225600000' full_idle_periods='0' "
			 "vcpus='2'/></metadata></domain>\n");
	ck_assert_int_eq(sysidle_doc_parse(x, &back), 0);
	same_doc(&back, &d);
	free(x);
}
END_TEST

START_TEST(test_doc_parse_minimal)
{
	struct sysidle_doc d;

	ck_assert_int_eq(sysidle_doc_parse("<state name=\"FULL_NOTED\" "
		"num=\"4\" since_unix_ms=\"1767225600123\"/>", &d), 0);
	ck_assert_int_eq(d.state, SYSIDLE_FULL_NOTED);
	ck_assert_uint_eq(d.since_unix_ms, 1767225600123ull);
	ck_assert_uint_eq(d.full_idle_periods, 0);
	ck_assert_uint_eq(d.vcpus, 0);
	/* the older hook stdin: state=, no name= */
	ck_assert_int_eq(sysidle_doc_parse("<sysidle:state xmlns:sysidle="
		"'urn:sysidle:1' state='LONG' num='2' since='x' "
		"since_unix_ms='5'/>", &d), 0);
	ck_assert_int_eq(d.state, SYSIDLE_LONG);
	/* the sample hook's, with its event */
	ck_assert_int_eq(sysidle_doc_parse("<state name='SHORT' num='1' "
		"since_unix_ms='7' event='begin' idle_ms='-'/>", &d), 0);
	ck_assert_int_eq(d.state, SYSIDLE_SHORT);
	ck_assert_uint_eq(d.since_unix_ms, 7);
}
END_TEST

START_TEST(test_doc_parse_bad)
{
	struct sysidle_doc d;

	ck_assert_int_eq(sysidle_doc_parse("", &d), -1);
	ck_assert_int_eq(sysidle_doc_parse(NULL, &d), -1);
	ck_assert_int_eq(sysidle_doc_parse("<other name='NOT' num='0' "
					   "since_unix_ms='1'/>", &d), -1);
	/* no since_unix_ms */
	ck_assert_int_eq(sysidle_doc_parse("<state name='NOT' num='0'/>", &d),
			 -1);
	/* no state at all */
	ck_assert_int_eq(sysidle_doc_parse("<state since_unix_ms='1'/>", &d),
			 -1);
	/* name and num disagree, unknown name, num out of range */
	ck_assert_int_eq(sysidle_doc_parse("<state name='NOT' num='4' "
					   "since_unix_ms='1'/>", &d), -1);
	ck_assert_int_eq(sysidle_doc_parse("<state name='IDLE' "
					   "since_unix_ms='1'/>", &d), -1);
	ck_assert_int_eq(sysidle_doc_parse("<state num='5' "
					   "since_unix_ms='1'/>", &d), -1);
	ck_assert_int_eq(sysidle_doc_parse("<state num='4' "
					   "since_unix_ms='-1'/>", &d), -1);
	ck_assert_int_eq(sysidle_doc_parse("<state num='4' since_unix_ms='1' "
					   "vcpus='x'/>", &d), -1);
}
END_TEST

/* A text over SYSIDLE_DOC_MAX is refused even when it starts with a good
 * element; one of SYSIDLE_DOC_MAX bytes of '<' (a tag name after each) is
 * read in linear time: refused well within the test's timeout. */
START_TEST(test_doc_parse_bounds)
{
	static const char el[] = "<state name='FULL' num='3' "
				 "since_unix_ms='1'/>";
	size_t n = SYSIDLE_DOC_MAX + 1;
	char *big = malloc(n + 1);
	struct sysidle_doc d;
	struct timespec t0, t1;
	double s;

	ck_assert_ptr_nonnull(big);
	memset(big, ' ', n);
	big[n] = '\0';
	memcpy(big, el, sizeof(el) - 1);
	ck_assert_int_eq(sysidle_doc_parse(big, &d), -1);
	big[n - 1] = '\0'; /* exactly SYSIDLE_DOC_MAX bytes: read */
	ck_assert_int_eq(sysidle_doc_parse(big, &d), 0);
	ck_assert_int_eq(d.state, SYSIDLE_FULL);
	memset(big, '<', n - 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(sysidle_doc_parse(big, &d), -1);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	ck_assert_msg(s < 1.0, "1 MiB of '<' took %.2f s", s);
	free(big);
}
END_TEST

START_TEST(test_parse_timeout)
{
	uint64_t ns = 0;

	ck_assert_int_eq(hooks_parse_timeout("10", &ns), 0);
	ck_assert_uint_eq(ns, 10000000000ull);
	ck_assert_int_eq(hooks_parse_timeout("0.5", &ns), 0);
	ck_assert_uint_eq(ns, 500000000ull);
	ck_assert_int_eq(hooks_parse_timeout("86400", &ns), 0);
	ck_assert_int_eq(hooks_parse_timeout("86401", &ns), -1);
	ck_assert_int_eq(hooks_parse_timeout("0", &ns), -1);
	/* rounds to 0 ns: found by fuzz-sysidle-doc */
	ck_assert_int_eq(hooks_parse_timeout("8e-82", &ns), -1);
	ck_assert_int_eq(hooks_parse_timeout("0.0009", &ns), -1);
	ck_assert_int_eq(hooks_parse_timeout("0.001", &ns), 0);
	ck_assert_uint_eq(ns, 1000000);
	ck_assert_int_eq(hooks_parse_timeout("-1", &ns), -1);
	ck_assert_int_eq(hooks_parse_timeout("", &ns), -1);
	ck_assert_int_eq(hooks_parse_timeout("1s", &ns), -1);
	ck_assert_int_eq(hooks_parse_timeout("nan", &ns), -1);
}
END_TEST

static int warnings;

static void count_warn(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static void count_warn(const char *fmt, ...)
{
	(void)fmt;
	warnings++;
}

START_TEST(test_resolve_dir)
{
	char *d;

	warnings = 0;
	ck_assert_ptr_null(hookrun_resolve_dir(NULL, count_warn));
	ck_assert_ptr_null(hookrun_resolve_dir("/nonexistent/hooks",
					       count_warn));
	ck_assert_int_eq(warnings, 0);
	ck_assert_ptr_null(hookrun_resolve_dir("/dev/null", count_warn));
	ck_assert_int_eq(warnings, 1);
	d = hookrun_resolve_dir("/tmp/../", count_warn);
	ck_assert_str_eq(d, "/");
	free(d);
	/* SYSCONFDIR/sysidle/hooks: absolute, whatever the prefix */
	ck_assert_int_eq(DEFAULT_HOOKS_DIR[0], '/');
	ck_assert_str_eq(DEFAULT_HOOKS_DIR + strlen(DEFAULT_HOOKS_DIR) -
			 strlen("/sysidle/hooks"), "/sysidle/hooks");
}
END_TEST

START_TEST(test_socket_path)
{
	char p[16];

	ck_assert_int_eq(ctl_socket_path("/run/x", "vm", p, sizeof(p)), 0);
	ck_assert_str_eq(p, "/run/x/vm.sock");
	ck_assert_int_eq(ctl_socket_path("/run/x", "./a.sock", p, sizeof(p)),
			 0);
	ck_assert_str_eq(p, "./a.sock");
	ck_assert_int_eq(ctl_socket_path("/run/x", "longer-name", p,
					 sizeof(p)), -1);
}
END_TEST

/* A child that writes @n bytes of @c then a newline on @fd, then exits
 * (after a first line "{}"); the caller guarantees @fd is a stream. */
static pid_t send_line(int fd, char c, size_t n)
{
	pid_t pid = fork();

	if (pid == 0) {
		char *b = malloc(n + 4);

		memcpy(b, "{}\n", 3);
		memset(b + 3, c, n);
		b[n + 3] = '\n';
		for (size_t off = 0; b && off < n + 4;) {
			ssize_t w = write(fd, b + off, n + 4 - off);

			if (w <= 0)
				_exit(1);
			off += (size_t)w;
		}
		_exit(0);
	}
	return pid;
}

/* ctl_line() over a socketpair: @n bytes in the second line; returns its
 * result, the error in @err. */
static int second_line(size_t n, char *err, size_t esize)
{
	struct ctl_conn c = { .fd = -1, .path = "peer.sock" };
	int sv[2], n1, n2;
	char *line;
	pid_t pid;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ck_assert_int_eq(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0); /* ours */
	pid = send_line(sv[1], 'x', n);
	ck_assert_int_ge(pid, 0);
	close(sv[1]);
	c.fd = sv[0];
	n1 = ctl_line(&c, &line, monotonic_ms() + 10000);
	ck_assert_int_eq(n1, CTL_OK);
	ck_assert_str_eq(line, "{}");
	n2 = ctl_line(&c, &line, monotonic_ms() + 10000);
	if (n2 == CTL_OK)
		ck_assert_uint_eq(strlen(line), n);
	snprintf(err, esize, "%s", c.err);
	ctl_close(&c);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return n2;
}

/* A line of CTL_MAX_LINE bytes is read; one byte more is refused, naming
 * the line (the second) and the peer, however the bytes arrive. */
START_TEST(test_ctl_line_bound)
{
	char err[512];

	ck_assert_int_eq(second_line(CTL_MAX_LINE, err, sizeof(err)), CTL_OK);
	ck_assert_int_eq(second_line(CTL_MAX_LINE + 1, err, sizeof(err)),
			 CTL_ERR);
	ck_assert_str_eq(err, "malformed reply: line 2 from peer.sock: longer "
			 "than 1048576 bytes");
}
END_TEST

/* ---- conffile.c ---- */
static const struct option conf_opts[] = {
	{ "mem", required_argument, NULL, 'm' },
	{ "sysidle", no_argument, NULL, 'S' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "module", required_argument, NULL, 'M' },
	{ "config", required_argument, NULL, 'g' },
	{ NULL, 0, NULL, 0 },
};

/* @text as a file; its path (static). */
static const char *conf_file(const char *text, size_t len)
{
	static char path[] = "/tmp/test-conffile-XXXXXX";
	int fd;

	strcpy(path, "/tmp/test-conffile-XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
	close(fd);
	return path;
}

static int conf_build(const char *text, struct conf_args *a, int argc,
		      char **argv)
{
	const char *f = conf_file(text, strlen(text));
	char *args[8] = { "prog", "--config", (char *)f };
	int n = 3, r;

	for (int i = 0; i < argc; i++)
		args[n++] = argv[i];
	r = conf_args_build("prog", n, args, NULL, conf_opts, "kernel", a);
	unlink(f);
	return r;
}

/* Entries in order, flags bare or boolean, the positional key, origins,
 * the command line after the file's entries. */
/* The one monotonic clock in its three units: each read lies between the
 * reads around it, in every unit. */
START_TEST(test_monotonic_units)
{
	uint64_t ns0 = monotonic_ns();
	int64_t ms = monotonic_ms();
	double sec = monotonic_s();
	uint64_t ns1 = monotonic_ns();

	ck_assert_uint_le(ns0, ns1);
	ck_assert_int_ge(ms, (int64_t)(ns0 / 1000000u));
	ck_assert_int_le(ms, (int64_t)(ns1 / 1000000u));
	ck_assert(sec >= (double)ns0 / 1e9 - 1e-6);
	ck_assert(sec <= (double)ns1 / 1e9 + 1e-6);
}
END_TEST

START_TEST(test_conf_good)
{
	struct conf_args a;
	char *cli[] = { "--mem", "1G" };

	ck_assert_int_eq(conf_build("# a comment\n\n  mem = 64M  \nsysidle\n"
				    "quiet = no\nsysidle = yes\nmodule = a b\n"
				    "module=c\nkernel = k.elf\n", &a, 2, cli), 0);
	ck_assert_int_eq(a.argc, 10);
	ck_assert_int_eq(a.file_end, 6);
	ck_assert_str_eq(a.argv[1], "--mem=64M");
	ck_assert_str_eq(a.argv[2], "--sysidle");
	ck_assert_str_eq(a.argv[3], "--sysidle");
	ck_assert_str_eq(a.argv[4], "--module=a b");
	ck_assert_str_eq(a.argv[5], "--module=c");
	ck_assert_str_eq(a.argv[6], "--config");
	ck_assert_str_eq(a.argv[8], "--mem");
	ck_assert_ptr_null(a.argv[10]);
	ck_assert_str_eq(a.positional, "k.elf");
	ck_assert_ptr_nonnull(strstr(a.positional_at, ":9"));
	ck_assert_ptr_nonnull(strstr(conf_origin(&a, a.argv[4] + 9), ":7"));
	ck_assert(conf_from_file(&a, a.argv[1] + 6));
	ck_assert(!conf_from_file(&a, a.argv[9]));
	ck_assert_ptr_null(conf_origin(&a, a.argv[9]));
	ck_assert_ptr_null(conf_origin(&a, "elsewhere"));
	conf_args_free(&a);
}
END_TEST

/* Every bad line is refused (-1), and nothing is left allocated. */
START_TEST(test_conf_bad)
{
	static const char *const bad[] = {
		"bogus = 1\n", "sysidle = maybe\n", "mem =\n", "mem\n",
		"help\n", "config = x\n", "version\n", "--mem = 1\n",
		"= 5\n", "kernel =\n",
	};
	struct conf_args a;
	char line[CONF_LINE_MAX + 16];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(conf_build(bad[i], &a, 0, NULL) == -1, "%s", bad[i]);
	memset(line, 'x', sizeof(line) - 2);
	line[sizeof(line) - 2] = '\n';
	line[sizeof(line) - 1] = '\0';
	ck_assert_int_eq(conf_build(line, &a, 0, NULL), -1);
	/* exactly CONF_LINE_MAX bytes is fine */
	memcpy(line, "mem = ", 6);
	line[CONF_LINE_MAX] = '\n';
	line[CONF_LINE_MAX + 1] = '\0';
	ck_assert_int_eq(conf_build(line, &a, 0, NULL), 0);
	conf_args_free(&a);
}
END_TEST

/* Over CONF_FILE_MAX bytes of comments: refused; a missing --config file
 * is an error, a missing default file is not. */
START_TEST(test_conf_bounds)
{
	size_t n = CONF_FILE_MAX + 4096;
	char *big = malloc(n + 1), *args[] = { "prog", "--config",
					       "/nonexistent/x.conf" };
	struct conf_args a;
	const char *f;

	ck_assert_ptr_nonnull(big);
	for (size_t i = 0; i < n; i += 64) {
		memset(big + i, ' ', 64);
		big[i] = '#';
		big[i + 63] = '\n';
	}
	big[n] = '\0';
	f = conf_file(big, n);
	free(big);
	args[2] = (char *)f;
	ck_assert_int_eq(conf_args_build("prog", 3, args, NULL, conf_opts,
					 NULL, &a), -1);
	unlink(f);
	args[2] = "/nonexistent/x.conf";
	ck_assert_int_eq(conf_args_build("prog", 3, args, NULL, conf_opts,
					 NULL, &a), -1);
	ck_assert_int_eq(conf_args_build("prog", 1, args, "/nonexistent/d.conf",
					 conf_opts, NULL, &a), 0);
	ck_assert_int_eq(a.argc, 1);
	ck_assert_int_eq(a.file_end, 1);
	conf_args_free(&a);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("common");
	TCase *tc = tcase_create("common");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_doc_element);
	tcase_add_test(tc, test_doc_lease);
	tcase_add_test(tc, test_doc_duty);
	tcase_add_test(tc, test_doc_domain_xml);
	tcase_add_test(tc, test_doc_parse_minimal);
	tcase_add_test(tc, test_doc_parse_bad);
	tcase_add_test(tc, test_doc_parse_bounds);
	tcase_add_test(tc, test_parse_timeout);
	tcase_add_test(tc, test_resolve_dir);
	tcase_add_test(tc, test_socket_path);
	tcase_add_test(tc, test_ctl_line_bound);
	tcase_add_test(tc, test_monotonic_units);
	tcase_add_test(tc, test_conf_good);
	tcase_add_test(tc, test_conf_bad);
	tcase_add_test(tc, test_conf_bounds);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
