/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * One option table per program: each entry says an option's long name,
 * short letter, type, range, default, where its value goes, whether the
 * --config file may give it (its key is then the long name) and its help.
 * From the table come the command line's and the --config file's parse
 * (common/conffile.c: the file's options first, so the command line
 * wins), the errors ("PROG: [FILE:LINE: ]--opt 'VALUE': expected ..."),
 * --help, and --list-options (hidden: the options and the values of each
 * enum, one line each, for bash completion).
 *
 * The library knows nothing of the programs: a value goes to an offset in
 * the program's own options struct; odd options have a callback.
 *
 * In help and error texts, "{default}", "{min}" and "{max}" stand for the
 * entry's default and range (a size as 256M, 1G).
 */
#ifndef SYSIDLE_COMMON_OPTIONS_TABLE_H
#define SYSIDLE_COMMON_OPTIONS_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "conffile.h"

#define OPT_MAX_ENTRIES 48

enum opt_type {
	OPT_FLAG,      /* no argument: the bool at offset becomes true */
	OPT_STRING,    /* the const char * at offset; OPT_NONEMPTY: not "" */
	OPT_UINT,      /* a decimal number from min to max, times scale, into
			* an unsigned field of 1, 2, 4 or 8 bytes */
	OPT_SIZE,      /* a number with an optional K, M or G suffix (none:
			* MiB, an optional "B" or "iB"), bytes from min to max */
	OPT_ENUM,      /* one of names[]: its index into the field */
	OPT_LIST,      /* repeatable: const char *[] at offset, its count (an
			* unsigned int) at count_offset */
	OPT_CUSTOM,    /* the entry's parse callback */
	OPT_CONFIG,    /* --config FILE: read by conffile.c before the parse */
	OPT_HELP,      /* print --help; opt_parse returns 1 */
	OPT_VERSION,   /* print the version; opt_parse returns 1 */
	OPT_LIST_OPTIONS, /* print the options for completion; returns 1 */
};

/* Where an entry's value goes: the field @f of the program's struct @T. */
#define OPT_FIELD(T, f) .offset = offsetof(T, f), .size = sizeof(((T *)0)->f)

/* Entry flags. */
#define OPT_CLI_ONLY (1u << 0) /* not a --config file key */
#define OPT_NONEMPTY (1u << 1) /* OPT_STRING: "" is refused */
#define OPT_REPLACE  (1u << 2) /* repeatable: the command line's first
				* one drops the file's values and the
				* default (reset, or the list emptied) */
#define OPT_HIDDEN   (1u << 3) /* not in --help nor --list-options */
#define OPT_NO_DEFAULT (1u << 4) /* the field keeps the caller's value
				  * until given (def is not applied) */

/*
 * A custom option's value: 0, or -1, having written what the error's
 * {bad} shows into @bad (@badlen bytes; may stay empty). @opts is the
 * program's options struct.
 */
typedef int (*opt_parse_fn)(void *opts, const char *arg, char *bad,
			    size_t badlen);
/* Before the command line's first one of an OPT_REPLACE custom option:
 * forget what the --config file gave. */
typedef void (*opt_reset_fn)(void *opts);
/* Extra --help lines after the entry's own (e.g. a list of names). */
typedef void (*opt_help_fn)(FILE *out);

struct opt_entry {
	const char *name;        /* long name, without "--" */
	char short_name;         /* 0: none */
	enum opt_type type;
	unsigned int flags;      /* OPT_CLI_ONLY, ... */
	size_t offset;           /* where the value goes in the options */
	size_t size;             /* its size (OPT_UINT, OPT_SIZE, OPT_ENUM) */
	size_t count_offset;     /* OPT_LIST: the unsigned int count */
	uint64_t min, max;       /* OPT_UINT, OPT_SIZE: the range */
	uint64_t scale;          /* OPT_UINT: stored value = number * scale
				  * (0: 1) */
	uint64_t def;            /* OPT_UINT, OPT_SIZE, OPT_ENUM: default */
	const char *def_str;     /* OPT_STRING, OPT_CUSTOM: default (custom:
				  * parsed at start), NULL: none */
	const char *const *names; /* OPT_ENUM: the values, NULL-terminated */
	opt_parse_fn parse;      /* OPT_CUSTOM */
	opt_reset_fn reset;      /* OPT_CUSTOM with OPT_REPLACE */
	opt_help_fn help_more;
	opt_help_fn values;      /* --list-options: the values it takes,
				  * space-separated (an enum: its names) */
	const char *metavar;     /* the argument's name in --help; NULL for
				  * an enum: its names joined by '|' */
	const char *expect;      /* a bad value: "expected ...", shown as
				  * "--NAME 'VALUE': EXPECT"; one that starts
				  * with ':' or ' ' as "--NAME" EXPECT, where
				  * {arg} is the value and {bad} what a
				  * custom parse said */
	const char *help;        /* --help text, lines after the first
				  * indented by the library */
};

/* What a program's parse says around the entries. */
struct opt_program {
	const char *name;        /* in messages: "NAME: ..." */
	const char *version_name; /* in --version */
	const char *usage_head;  /* --help before the options */
	const char *usage_tail;  /* --help after the options */
	const char *hint;        /* after every error, one "%s": NAME */
	const char *missing;     /* no argument, one "%s": the option */
	const char *unknown;     /* unknown option, one "%s": as given */
	const char *default_config; /* read when no --config, if it exists */
	const char *positional_key; /* config key of the positional argument */
	unsigned int max_positional; /* arguments allowed after the options */
	const struct opt_entry *entries;
	size_t nentries;
};

/* One parse: the arguments (the file's, then the command line's) stay
 * here; the parsed strings point into them. */
struct opt_parser {
	const struct opt_program *prog;
	struct conf_args conf;
	FILE *out, *err;         /* NULL: stdout, stderr (a bad --config
				  * file: conffile.c's message on stderr) */
	bool cli_seen[OPT_MAX_ENTRIES]; /* an OPT_REPLACE one given on the
					 * command line */
	bool given[OPT_MAX_ENTRIES];    /* given at all */
	int first_positional;    /* index in conf.argv */
	int npositional;
};

/*
 * Fills @opts from @prog's defaults, the --config file and @argv, into
 * @p (which the caller zeroed and keeps while @opts's strings are used).
 * Returns 0; 1 when --help, --version or --list-options printed (exit 0);
 * -1 after one error message (the caller's usage exit status).
 */
int opt_parse(struct opt_parser *p, const struct opt_program *prog,
	      int argc, char **argv, void *opts);

/* Frees what @p holds: the strings parsed from it are gone. */
void opt_parser_free(struct opt_parser *p);

/* The @i-th positional argument (conf.argv after the options) or the
 * --config file's positional key when there is none; NULL if neither. */
const char *opt_positional(const struct opt_parser *p, int i);

/* Whether the option named @name was given (file or command line). */
bool opt_given(const struct opt_parser *p, const char *name);

/*
 * Prints "NAME: [FILE:LINE: ]" then @fmt with its arguments, then the
 * program's hint, on p->err. FILE:LINE is @at's when @at points into an
 * argument that came from the --config file. Returns -1.
 */
int opt_error(const struct opt_parser *p, const char *at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* options_help.c: --help of @prog on @out; the option lines only by
 * opt_print_options (for tests). */
void opt_print_help(const struct opt_program *prog, FILE *out);
void opt_print_options(const struct opt_program *prog, FILE *out);
/* --list-options: "--NAME ARG|- [VALUE]..." per visible option: its
 * metavar, or "-" for none, then the values it takes, if a fixed set. */
void opt_print_list(const struct opt_program *prog, FILE *out);
/* @text with {default}, {min} and {max} of @e replaced, on @out. */
void opt_print_text(const struct opt_entry *e, const char *text, FILE *out);
/* @e's error for the bad value @arg ("--NAME 'ARG': EXPECT", see
 * opt_entry.expect) on @out; @bad: what a custom parse said, or "". */
void opt_print_expect(const struct opt_entry *e, const char *arg,
		      const char *bad, FILE *out);

#endif
