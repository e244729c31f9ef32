/* SPDX-License-Identifier: GPL-2.0-only */
/* Unit tests of common/options_table.c and options_help.c: each entry
 * type and its range, the errors (unknown option, missing argument, bad
 * value, FILE:LINE), the --config file against the command line, and the
 * generated --help and --list-options. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "options_table.h"

struct test_opts {
	bool flag;
	const char *str;
	const char *path;
	unsigned int count;
	uint64_t ns;
	uint64_t bytes;
	int level;
	const char **files;
	unsigned int nfiles;
	unsigned int colours;     /* custom, OPT_REPLACE: a bit per colour */
	int keep;                 /* OPT_NO_DEFAULT */
};

static const char *const levels[] = { "low", "medium", "high", "extreme",
				      NULL };
static const char *const colours[] = { "red", "green", "blue", NULL };

/* --colour NAME: one of colours[]; else -1, "red, green, blue" in @bad. */
static int parse_colour(void *opts, const char *arg, char *bad, size_t len)
{
	struct test_opts *o = opts;

	for (unsigned int i = 0; colours[i]; i++)
		if (!strcmp(arg, colours[i])) {
			o->colours |= 1u << i;
			return 0;
		}
	snprintf(bad, len, "red, green, blue");
	return -1;
}

/* --list-options: the values of --colour. */
static void print_colours(FILE *out)
{
	fputs("red green blue", out);
}

/* The command line's first --colour: no colour but its own. */
static void reset_colours(void *opts)
{
	((struct test_opts *)opts)->colours = 0;
}

#define AT(f) OPT_FIELD(struct test_opts, f)

static const struct opt_entry entries[] = {
	{ .name = "config", .type = OPT_CONFIG, .flags = OPT_CLI_ONLY,
	  .metavar = "FILE", .help = "read FILE first" },
	{ .name = "flag", .short_name = 'f', .type = OPT_FLAG, AT(flag),
	  .help = "a flag" },
	{ .name = "str", .type = OPT_STRING, AT(str), .def_str = "dflt",
	  .metavar = "S", .help = "a string (default {default})" },
	{ .name = "path", .type = OPT_STRING, .flags = OPT_NONEMPTY, AT(path),
	  .metavar = "P", .expect = ": expected a path", .help = "a path" },
	{ .name = "count", .short_name = 'c', .type = OPT_UINT, AT(count),
	  .min = 2, .max = 9, .def = 3, .metavar = "N",
	  .expect = "expected {min} to {max}",
	  .help = "a count, {min} to {max}\n(default {default})" },
	{ .name = "timeout", .type = OPT_UINT, AT(ns), .max = 3600,
	  .scale = 1000000000, .def = 30, .metavar = "SECONDS",
	  .flags = OPT_CLI_ONLY, .expect = "expected seconds",
	  .help = "a time in seconds (command line only)" },
	{ .name = "mem", .type = OPT_SIZE, AT(bytes), .min = 1,
	  .max = 1ull << 30, .def = 256ull << 20, .metavar = "SIZE",
	  .expect = "expected a size up to {max}",
	  .help = "a size (default {default})" },
	{ .name = "level", .type = OPT_ENUM, AT(level), .names = levels,
	  .def = 1, .expect = "expected low, medium, high or extreme",
	  .help = "a level (default {default})" },
	{ .name = "file", .type = OPT_LIST, .flags = OPT_REPLACE, AT(files),
	  .count_offset = offsetof(struct test_opts, nfiles),
	  .metavar = "F", .help = "a file (repeatable)" },
	{ .name = "colour", .type = OPT_CUSTOM, .flags = OPT_REPLACE,
	  .parse = parse_colour, .reset = reset_colours, .def_str = "red",
	  .values = print_colours,
	  .metavar = "NAME", .expect = " '{arg}': expected one of: {bad}",
	  .help = "a colour" },
	{ .name = "keep", .type = OPT_UINT, .flags = OPT_NO_DEFAULT, AT(keep),
	  .max = 7, .metavar = "K", .help = "kept until given" },
	{ .name = "a-rather-long-option-name", .type = OPT_FLAG,
	  .flags = OPT_CLI_ONLY | OPT_HIDDEN, .help = "hidden" },
	{ .name = "help", .short_name = 'h', .type = OPT_HELP,
	  .flags = OPT_CLI_ONLY, .help = "this help" },
	{ .name = "list-options", .type = OPT_LIST_OPTIONS,
	  .flags = OPT_CLI_ONLY | OPT_HIDDEN },
};

static const struct opt_program prog = {
	.name = "prog", .version_name = "prog",
	.usage_head = "Usage: prog [OPTION]... [ARG]\n",
	.usage_tail = "Tail.\n",
	.hint = " (see %s --help)\n",
	.missing = "option '%s' needs an argument",
	.unknown = "unknown option '%s'",
	.positional_key = "arg",
	.max_positional = 1,
	.entries = entries,
	.nentries = sizeof(entries) / sizeof(entries[0]),
};

/* One parse of the NULL-terminated @args (after "prog"); its return, the
 * error output in @err and the standard output in @out (both malloc'd,
 * may be NULL). */
static int parse(struct test_opts *o, struct opt_parser *p, char **out,
		 char **err, const char *const *args)
{
	char *argv[32] = { "prog" };
	size_t outlen, errlen;
	int argc = 1, r;

	while (*args)
		argv[argc++] = (char *)*args++;
	memset(o, 0, sizeof(*o));
	o->keep = -5;
	memset(p, 0, sizeof(*p));
	p->out = open_memstream(out, &outlen);
	p->err = open_memstream(err, &errlen);
	r = opt_parse(p, &prog, argc, argv, o);
	fclose(p->out);
	fclose(p->err);
	return r;
}

#define PARSE(o, p, out, err, ...) \
	parse(o, p, out, err, (const char *const[]){ __VA_ARGS__, NULL })

/* A parse that fails with exactly @msg on stderr. */
static void parse_fails(const char *msg, const char *const *args)
{
	struct test_opts o;
	struct opt_parser p;
	char *out, *err;

	ck_assert_int_eq(parse(&o, &p, &out, &err, args), -1);
	ck_assert_str_eq(err, msg);
	ck_assert_str_eq(out, "");
	opt_parser_free(&p);
	free(out);
	free(err);
	free(o.files);
}

#define FAILS(msg, ...) parse_fails(msg, (const char *const[]){ __VA_ARGS__, NULL })

START_TEST(test_defaults)
{
	struct test_opts o;
	struct opt_parser p;
	char *out, *err;

	ck_assert_int_eq(PARSE(&o, &p, &out, &err, "arg1"), 0);
	ck_assert(!o.flag);
	ck_assert_str_eq(o.str, "dflt");
	ck_assert_ptr_null(o.path);
	ck_assert_uint_eq(o.count, 3);
	ck_assert_uint_eq(o.ns, 30000000000ull);
	ck_assert_uint_eq(o.bytes, 256ull << 20);
	ck_assert_int_eq(o.level, 1);
	ck_assert_uint_eq(o.nfiles, 0);
	ck_assert_uint_eq(o.colours, 1);
	ck_assert_int_eq(o.keep, -5);
	ck_assert_str_eq(opt_positional(&p, 0), "arg1");
	ck_assert_ptr_null(opt_positional(&p, 1));
	ck_assert(!opt_given(&p, "count"));
	ck_assert_str_eq(err, "");
	opt_parser_free(&p);
	free(out);
	free(err);
	free(o.files);
}
END_TEST

START_TEST(test_each_type)
{
	struct test_opts o;
	struct opt_parser p;
	char *out, *err;

	ck_assert_int_eq(PARSE(&o, &p, &out, &err, "-f", "--str=x", "--path",
			       "/p", "-c", "9", "--timeout", "2", "--mem", "1G",
			       "--level", "high", "--file", "a", "--file", "b",
			       "--colour", "blue", "--colour", "green",
			       "--keep", "7"), 0);
	ck_assert(o.flag);
	ck_assert_str_eq(o.str, "x");
	ck_assert_str_eq(o.path, "/p");
	ck_assert_uint_eq(o.count, 9);
	ck_assert_uint_eq(o.ns, 2000000000ull);
	ck_assert_uint_eq(o.bytes, 1ull << 30);
	ck_assert_int_eq(o.level, 2);
	ck_assert_uint_eq(o.nfiles, 2);
	ck_assert_str_eq(o.files[0], "a");
	ck_assert_str_eq(o.files[1], "b");
	/* the command line's first --colour drops the default red too */
	ck_assert_uint_eq(o.colours, 4u | 2u);
	ck_assert_int_eq(o.keep, 7);
	ck_assert(opt_given(&p, "count"));
	ck_assert(!opt_given(&p, "no-such-option"));
	opt_parser_free(&p);
	free(out);
	free(err);
	free(o.files);
	/* sizes: suffixes, no suffix is MiB, B and iB */
	ck_assert_int_eq(PARSE(&o, &p, &out, &err, "--mem", "16"), 0);
	ck_assert_uint_eq(o.bytes, 16ull << 20);
	opt_parser_free(&p);
	free(o.files);
	free(out);
	free(err);
	ck_assert_int_eq(PARSE(&o, &p, &out, &err, "--mem", "4KiB"), 0);
	ck_assert_uint_eq(o.bytes, 4096);
	opt_parser_free(&p);
	free(o.files);
	free(out);
	free(err);
	ck_assert_int_eq(PARSE(&o, &p, &out, &err, "--mem=2MB", "-c", "+4"), 0);
	ck_assert_uint_eq(o.bytes, 2ull << 20);
	ck_assert_uint_eq(o.count, 4);
	opt_parser_free(&p);
	free(o.files);
	free(out);
	free(err);
}
END_TEST

START_TEST(test_ranges)
{
	FAILS("prog: --count '1': expected 2 to 9 (see prog --help)\n",
	      "--count", "1");
	FAILS("prog: --count '10': expected 2 to 9 (see prog --help)\n",
	      "-c", "10");
	FAILS("prog: --count '-3': expected 2 to 9 (see prog --help)\n",
	      "--count", "-3");
	FAILS("prog: --count '3x': expected 2 to 9 (see prog --help)\n",
	      "--count", "3x");
	FAILS("prog: --count '': expected 2 to 9 (see prog --help)\n",
	      "--count", "");
	FAILS("prog: --count '99999999999999999999': expected 2 to 9 "
	      "(see prog --help)\n", "--count", "99999999999999999999");
	FAILS("prog: --timeout '3601': expected seconds (see prog --help)\n",
	      "--timeout", "3601");
	FAILS("prog: --mem '2G': expected a size up to 1G (see prog --help)\n",
	      "--mem", "2G");
	FAILS("prog: --mem '0': expected a size up to 1G (see prog --help)\n",
	      "--mem", "0");
	FAILS("prog: --mem '1T': expected a size up to 1G (see prog --help)\n",
	      "--mem", "1T");
	FAILS("prog: --level 'top': expected low, medium, high or extreme "
	      "(see prog --help)\n", "--level", "top");
	FAILS("prog: --path: expected a path (see prog --help)\n",
	      "--path", "");
	FAILS("prog: --colour 'pink': expected one of: red, green, blue "
	      "(see prog --help)\n", "--colour", "pink");
	FAILS("prog: --keep '8': a bad value (see prog --help)\n",
	      "--keep", "8");
}
END_TEST

START_TEST(test_errors)
{
	FAILS("prog: unknown option '--bogus' (see prog --help)\n", "--bogus");
	FAILS("prog: unknown option '-z' (see prog --help)\n", "-z");
	FAILS("prog: unknown option '--flag=1' (see prog --help)\n",
	      "--flag=1");
	FAILS("prog: option '--count' needs an argument (see prog --help)\n",
	      "--count");
	FAILS("prog: option '-c' needs an argument (see prog --help)\n", "-c");
	FAILS("prog: unexpected argument 'two' (see prog --help)\n",
	      "one", "two");
}
END_TEST

/* A --config file holding @text; its path in @path (PATH_MAX bytes). */
static void write_conf(char *path, const char *text)
{
	int fd;

	strcpy(path, "/tmp/test-options-XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

START_TEST(test_config_precedence)
{
	struct test_opts o;
	struct opt_parser p;
	char path[64], *out, *err;

	write_conf(path, "count = 4\nstr = fromfile\nflag\nfile = f1\n"
		   "file = f2\ncolour = green\narg = conffile-arg\n");
	/* the file alone */
	ck_assert_int_eq(PARSE(&o, &p, &out, &err, "--config", path), 0);
	ck_assert_uint_eq(o.count, 4);
	ck_assert_str_eq(o.str, "fromfile");
	ck_assert(o.flag);
	ck_assert_uint_eq(o.nfiles, 2);
	ck_assert_uint_eq(o.colours, 1u | 2u);
	ck_assert_str_eq(opt_positional(&p, 0), "conffile-arg");
	opt_parser_free(&p);
	free(o.files);
	free(out);
	free(err);
	/* the command line wins; its lists replace the file's */
	ck_assert_int_eq(PARSE(&o, &p, &out, &err, "--count", "5",
			       "--config", path, "--file", "c1", "--colour",
			       "blue", "cli-arg"), 0);
	ck_assert_uint_eq(o.count, 5);
	ck_assert_str_eq(o.str, "fromfile");
	ck_assert_uint_eq(o.nfiles, 1);
	ck_assert_str_eq(o.files[0], "c1");
	ck_assert_uint_eq(o.colours, 4u);
	ck_assert_str_eq(opt_positional(&p, 0), "cli-arg");
	opt_parser_free(&p);
	free(o.files);
	free(out);
	free(err);
	unlink(path);
	/* a bad value in the file: its FILE:LINE */
	write_conf(path, "# comment\ncount = 12\n");
	ck_assert_int_eq(PARSE(&o, &p, &out, &err, "--config", path), -1);
	ck_assert_ptr_nonnull(strstr(err, ":2: --count '12': expected 2 to 9"));
	ck_assert(!strncmp(err, "prog: /tmp/test-options-", 24));
	opt_parser_free(&p);
	free(o.files);
	free(out);
	free(err);
	unlink(path);
	/* a command-line-only option is no key (conffile.c says so) */
	write_conf(path, "timeout = 5\n");
	ck_assert_int_eq(PARSE(&o, &p, &out, &err, "--config", path), -1);
	ck_assert_str_eq(err, "");
	opt_parser_free(&p);
	free(o.files);
	free(out);
	free(err);
	unlink(path);
}
END_TEST

START_TEST(test_help)
{
	struct test_opts o;
	struct opt_parser p;
	char *out, *err;

	ck_assert_int_eq(PARSE(&o, &p, &out, &err, "--help"), 1);
	ck_assert_str_eq(out,
		"Usage: prog [OPTION]... [ARG]\n"
		"  --config FILE      read FILE first\n"
		"  -f, --flag         a flag\n"
		"  --str S            a string (default dflt)\n"
		"  --path P           a path\n"
		"  -c, --count N      a count, 2 to 9\n"
		"                     (default 3)\n"
		"  --timeout SECONDS  a time in seconds (command line only)\n"
		"  --mem SIZE         a size (default 256M)\n"
		"  --level low|medium|high|extreme\n"
		"                     a level (default medium)\n"
		"  --file F           a file (repeatable)\n"
		"  --colour NAME      a colour\n"
		"  --keep K           kept until given\n"
		"  -h, --help         this help\n"
		"Tail.\n");
	ck_assert_str_eq(err, "");
	opt_parser_free(&p);
	free(o.files);
	free(out);
	free(err);
	ck_assert_int_eq(PARSE(&o, &p, &out, &err, "-h"), 1);
	ck_assert(!strncmp(out, "Usage: prog", 11));
	opt_parser_free(&p);
	free(o.files);
	free(out);
	free(err);
}
END_TEST

START_TEST(test_list_options)
{
	struct test_opts o;
	struct opt_parser p;
	char *out, *err;

	ck_assert_int_eq(PARSE(&o, &p, &out, &err, "--list-options"), 1);
	ck_assert_str_eq(out,
		"--config FILE\n--flag -\n--str S\n--path P\n--count N\n"
		"--timeout SECONDS\n--mem SIZE\n"
		"--level low|medium|high|extreme low medium high extreme\n--file F\n"
		"--colour NAME red green blue\n"
		"--keep K\n--help -\n");
	opt_parser_free(&p);
	free(o.files);
	free(out);
	free(err);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("options_table");
	TCase *tc = tcase_create("options_table");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_each_type);
	tcase_add_test(tc, test_ranges);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_config_precedence);
	tcase_add_test(tc, test_help);
	tcase_add_test(tc, test_list_options);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
