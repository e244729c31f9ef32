/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Configuration files: a program's long options as "key = value" lines
 * (sysidle.conf(5)). The file's options become argv entries put before
 * the command line's, so the command line wins for single-valued options;
 * each entry remembers the FILE:LINE it came from for error messages.
 *
 * Format: one "key = value" per line; '#' starts a comment line; blank
 * lines are ignored; a key is a long option name without "--"; an option
 * without argument is the bare key or "key = true|false|yes|no" (false and
 * no: not given); whitespace around key and value is trimmed; no quoting.
 * A line is at most CONF_LINE_MAX bytes, a file at most CONF_FILE_MAX.
 */
#ifndef SYSIDLE_COMMON_CONFFILE_H
#define SYSIDLE_COMMON_CONFFILE_H

#include <getopt.h>
#include <stdbool.h>

#define CONF_LINE_MAX 4096
#define CONF_FILE_MAX (1u << 20)

struct conf_args {
	int argc;
	char **argv;         /* argv[0], the file's entries, the command line's */
	int file_end;        /* index of the first command-line entry */
	char **origin;       /* per entry: "FILE:LINE" (file entries) or NULL */
	char *positional;    /* the file's value of the caller's positional key */
	char *positional_at; /* its FILE:LINE */
};

/*
 * Builds @out from @argv: when argv names "--config FILE" (or
 * "--config=FILE"), that file, which must exist; else @default_file when
 * it is non-NULL and exists. @longopts is the program's getopt_long
 * table (the keys allowed, with their has_arg); @positional_key, if not
 * NULL, is a key that gives the program's positional argument. On an
 * error prints "PROG: FILE:LINE: message" and returns -1. Caller owns
 * @out (conf_args_free) on success.
 */
int conf_args_build(const char *prog, int argc, char **argv,
		    const char *default_file, const struct option *longopts,
		    const char *positional_key, struct conf_args *out);
void conf_args_free(struct conf_args *a);

/* "FILE:LINE" when @p points into an entry of @a that came from a file
 * (an optarg of getopt_long on a->argv), else NULL. */
const char *conf_origin(const struct conf_args *a, const char *p);

/* Whether the options' parse has reached the command line's entries:
 * @p is an optarg, or argv[optind - 1]. */
bool conf_from_file(const struct conf_args *a, const char *p);

/* The file named by --config in @argv, or NULL. */
const char *conf_file_arg(int argc, char **argv);

#endif
