// SPDX-License-Identifier: GPL-2.0-only
/* The parse of a program's option table (options_table.h); --help and
 * --list-options are options_help.c's. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "options_table.h"
#include "version.h"

#define OPT_LONG_VAL 256 /* getopt_long's value of entry i: this + i */

/* Where @p's errors go; p->prog set. */
static FILE *err_stream(const struct opt_parser *p)
{
	return p->err ? p->err : stderr;
}

/* "NAME: [FILE:LINE: ]": the start of every error of @p. */
static void error_begin(const struct opt_parser *p, const char *at)
{
	const char *origin = at ? conf_origin(&p->conf, at) : NULL;

	fprintf(err_stream(p), "%s: ", p->prog->name);
	if (origin)
		fprintf(err_stream(p), "%s: ", origin);
}

/* The end of an error error_begin() started: the hint. Returns -1. */
static int error_end(const struct opt_parser *p)
{
	fprintf(err_stream(p), p->prog->hint, p->prog->name);
	return -1;
}

int opt_error(const struct opt_parser *p, const char *at, const char *fmt, ...)
{
	va_list ap;

	error_begin(p, at);
	va_start(ap, fmt);
	vfprintf(err_stream(p), fmt, ap);
	va_end(ap);
	return error_end(p);
}

/* @e's bad value @arg; @bad: what a custom parse said about it, or "". */
static int bad_value(const struct opt_parser *p, const struct opt_entry *e,
		     const char *arg, const char *bad)
{
	error_begin(p, arg);
	opt_print_expect(e, arg, bad, err_stream(p));
	return error_end(p);
}

/* Whether @e takes an argument. */
static bool takes_arg(const struct opt_entry *e)
{
	return e->type != OPT_FLAG && e->type != OPT_HELP &&
	       e->type != OPT_VERSION && e->type != OPT_LIST_OPTIONS;
}

/* @v into the unsigned field of @size bytes at @dst (a too small field:
 * the table's range must fit it). */
static void store_uint(void *dst, size_t size, uint64_t v)
{
	uint8_t u8 = (uint8_t)v;
	uint16_t u16 = (uint16_t)v;
	uint32_t u32 = (uint32_t)v;

	switch (size) {
	case 1: memcpy(dst, &u8, 1); break;
	case 2: memcpy(dst, &u16, 2); break;
	case 4: memcpy(dst, &u32, 4); break;
	default: memcpy(dst, &v, sizeof(v)); break;
	}
}

/* A decimal number at the start of @s (leading blanks and '+' taken, as
 * strtoull; '-' refused); @end after it. */
static int parse_number(const char *s, uint64_t *n, char **end)
{
	unsigned long long x;

	while (isspace((unsigned char)*s))
		s++;
	if (*s == '-')
		return -1;
	errno = 0;
	x = strtoull(s, end, 10);
	if (errno || *end == s)
		return -1;
	*n = x;
	return 0;
}

/* OPT_SIZE: NUMBER[K|M|G][B|iB] (no suffix: MiB) as bytes, in range. */
static int parse_size(const struct opt_entry *e, const char *s, uint64_t *out)
{
	uint64_t n, mult = 1ull << 20;
	char *end;

	if (parse_number(s, &n, &end))
		return -1;
	switch (*end) {
	case 'k': case 'K': mult = 1ull << 10; end++; break;
	case 'm': case 'M': mult = 1ull << 20; end++; break;
	case 'g': case 'G': mult = 1ull << 30; end++; break;
	case '\0': break;
	default: return -1;
	}
	if (*end == 'i' && end[1] == 'B')
		end += 2;
	else if (*end == 'B')
		end++;
	if (*end || n > e->max / mult || n * mult < e->min)
		return -1;
	*out = n * mult;
	return 0;
}

/* OPT_UINT: a number from min to max, times the scale. */
static int parse_uint(const struct opt_entry *e, const char *s, uint64_t *out)
{
	uint64_t n, scale = e->scale ? e->scale : 1;
	char *end;

	if (parse_number(s, &n, &end) || *end || n < e->min || n > e->max ||
	    n > UINT64_MAX / scale)
		return -1;
	*out = n * scale;
	return 0;
}

/* OPT_ENUM: the index of @s in the names. */
static int parse_enum(const struct opt_entry *e, const char *s, uint64_t *out)
{
	for (uint64_t i = 0; e->names[i]; i++)
		if (!strcmp(s, e->names[i])) {
			*out = i;
			return 0;
		}
	return -1;
}

/* A value of @e that goes to a field: UINT, SIZE, ENUM, STRING, FLAG,
 * LIST, CUSTOM. 0 or -1 after the message. */
static int store_value(struct opt_parser *p, const struct opt_entry *e,
		       const char *arg, void *opts)
{
	char *field = (char *)opts + e->offset, bad[128] = "";
	uint64_t v = 0;
	const char ***list;
	unsigned int *count;

	switch (e->type) {
	case OPT_FLAG:
		*(bool *)field = true;
		return 0;
	case OPT_STRING:
		if ((e->flags & OPT_NONEMPTY) && !*arg)
			return bad_value(p, e, arg, "");
		*(const char **)field = arg;
		return 0;
	case OPT_LIST:
		list = (const char ***)field;
		count = (unsigned int *)((char *)opts + e->count_offset);
		(*list)[(*count)++] = arg;
		return 0;
	case OPT_CUSTOM:
		if (e->parse(opts, arg, bad, sizeof(bad)))
			return bad_value(p, e, arg, bad);
		return 0;
	case OPT_UINT:
	case OPT_SIZE:
	case OPT_ENUM:
		if ((e->type == OPT_UINT ? parse_uint(e, arg, &v) :
		     e->type == OPT_SIZE ? parse_size(e, arg, &v) :
		     parse_enum(e, arg, &v)))
			return bad_value(p, e, arg, "");
		store_uint(field, e->size, v);
		return 0;
	default:
		return 0;
	}
}

/* Before the command line's first @e of OPT_REPLACE: drop the file's. */
static void replace_file_values(struct opt_parser *p, size_t i,
				const char *arg, void *opts)
{
	const struct opt_entry *e = &p->prog->entries[i];

	if (!(e->flags & OPT_REPLACE) || p->cli_seen[i] ||
	    conf_from_file(&p->conf, arg))
		return;
	p->cli_seen[i] = true;
	if (e->type == OPT_LIST)
		*(unsigned int *)((char *)opts + e->count_offset) = 0;
	else if (e->reset)
		e->reset(opts);
}

/* Entry @i given with @arg (NULL: none): 0, 1 (printed, exit 0) or -1. */
static int apply(struct opt_parser *p, size_t i, const char *arg, void *opts)
{
	const struct opt_entry *e = &p->prog->entries[i];
	FILE *out = p->out ? p->out : stdout;

	p->given[i] = true;
	switch (e->type) {
	case OPT_CONFIG: /* read by conf_args_build */
		return 0;
	case OPT_HELP:
		opt_print_help(p->prog, out);
		return 1;
	case OPT_VERSION:
		sysidle_version_print(out, p->prog->version_name);
		return 1;
	case OPT_LIST_OPTIONS:
		opt_print_list(p->prog, out);
		return 1;
	default:
		replace_file_values(p, i, arg, opts);
		return store_value(p, e, arg, opts);
	}
}

/* The defaults of @prog's entries into @opts; the lists get room for
 * @nargs values. 0, or -1 after the message. */
static int apply_defaults(struct opt_parser *p, int nargs, void *opts)
{
	for (size_t i = 0; i < p->prog->nentries; i++) {
		const struct opt_entry *e = &p->prog->entries[i];
		char *field = (char *)opts + e->offset, bad[128] = "";

		if (e->flags & OPT_NO_DEFAULT)
			continue;
		switch (e->type) {
		case OPT_UINT:
			store_uint(field, e->size,
				   e->def * (e->scale ? e->scale : 1));
			break;
		case OPT_SIZE:
		case OPT_ENUM:
			store_uint(field, e->size, e->def);
			break;
		case OPT_STRING:
			*(const char **)field = e->def_str;
			break;
		case OPT_LIST:
			*(const char ***)field = calloc((size_t)nargs + 1,
							sizeof(char *));
			if (!*(const char ***)field)
				return opt_error(p, NULL, "out of memory");
			*(unsigned int *)((char *)opts + e->count_offset) = 0;
			break;
		case OPT_CUSTOM:
			if (e->def_str && e->parse(opts, e->def_str, bad,
						   sizeof(bad)))
				return bad_value(p, e, e->def_str, bad);
			break;
		default:
			break;
		}
	}
	return 0;
}

/* getopt_long's tables of @prog: @all for the command line, @keys (the
 * --config file's keys) and the short options. */
static void build_getopt(const struct opt_program *prog, struct option *all,
			 struct option *keys, char *shortopts)
{
	size_t nkeys = 0, ns = 0;

	shortopts[ns++] = ':';
	for (size_t i = 0; i < prog->nentries; i++) {
		const struct opt_entry *e = &prog->entries[i];
		int val = e->short_name ? e->short_name :
			  OPT_LONG_VAL + (int)i;

		all[i] = (struct option){ e->name, takes_arg(e) ?
			required_argument : no_argument, NULL, val };
		if (!(e->flags & OPT_CLI_ONLY))
			keys[nkeys++] = all[i];
		if (e->short_name) {
			shortopts[ns++] = e->short_name;
			if (takes_arg(e))
				shortopts[ns++] = ':';
		}
	}
	all[prog->nentries] = (struct option){ 0 };
	keys[nkeys] = (struct option){ 0 };
	shortopts[ns] = '\0';
}

/* getopt_long's value @c as the index of its entry, or -1. */
static int entry_of(const struct opt_program *prog, int c)
{
	if (c >= OPT_LONG_VAL)
		return c - OPT_LONG_VAL < (int)prog->nentries ?
		       c - OPT_LONG_VAL : -1;
	for (size_t i = 0; i < prog->nentries; i++)
		if (prog->entries[i].short_name == c)
			return (int)i;
	return -1;
}

/* An option getopt_long refused: unknown, or a value it cannot take. */
static int unknown_option(const struct opt_parser *p, const char *given)
{
	char shortname[3] = { '-', (char)optopt, '\0' };

	if (strncmp(given, "--", 2) && optopt > 0 && optopt < OPT_LONG_VAL)
		given = shortname;
	return opt_error(p, given, p->prog->unknown, given);
}

int opt_parse(struct opt_parser *p, const struct opt_program *prog,
	      int argc, char **argv, void *opts)
{
	struct option all[OPT_MAX_ENTRIES + 1], keys[OPT_MAX_ENTRIES + 1];
	char shortopts[2 * OPT_MAX_ENTRIES + 2];
	int c, i, r;

	p->prog = prog;
	if (prog->nentries > OPT_MAX_ENTRIES)
		return opt_error(p, NULL, "%zu options: at most %d",
				 prog->nentries, OPT_MAX_ENTRIES);
	build_getopt(prog, all, keys, shortopts);
	if (conf_args_build(prog->name, argc, argv, prog->default_config, keys,
			    prog->positional_key, &p->conf))
		return -1;
	if (apply_defaults(p, p->conf.argc, opts))
		return -1;
	argc = p->conf.argc;
	argv = p->conf.argv;
	opterr = 0;
	optind = 0; /* a fresh parse */
	while ((c = getopt_long(argc, argv, shortopts, all, NULL)) != -1) {
		if (c == ':')
			return opt_error(p, argv[optind - 1], prog->missing,
					 argv[optind - 1]);
		i = entry_of(prog, c);
		if (c == '?' || i < 0)
			return unknown_option(p, argv[optind - 1]);
		r = apply(p, (size_t)i, optarg, opts);
		if (r)
			return r;
	}
	p->first_positional = optind;
	p->npositional = argc - optind;
	if (p->npositional > (int)prog->max_positional)
		return opt_error(p, argv[optind + prog->max_positional],
				 "unexpected argument '%s'",
				 argv[optind + prog->max_positional]);
	return 0;
}

void opt_parser_free(struct opt_parser *p)
{
	conf_args_free(&p->conf);
}

const char *opt_positional(const struct opt_parser *p, int i)
{
	if (i < p->npositional)
		return p->conf.argv[p->first_positional + i];
	return i == 0 ? p->conf.positional : NULL;
}

bool opt_given(const struct opt_parser *p, const char *name)
{
	for (size_t i = 0; i < p->prog->nentries; i++)
		if (!strcmp(p->prog->entries[i].name, name))
			return p->given[i];
	return false;
}
