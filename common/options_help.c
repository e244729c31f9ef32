// SPDX-License-Identifier: GPL-2.0-only
/* --help, --list-options and the errors' "expected ..." of a program's
 * option table (options_table.h). */
#include <inttypes.h>
#include <string.h>

#include "options_table.h"

#define HELP_COLUMN 21   /* where the help texts start */
#define HELP_SAME_LINE 31 /* a longer option line: its text on the next */

/* Whether @e takes an argument; mirrors options_table.c. */
static bool help_takes_arg(const struct opt_entry *e)
{
	return e->type != OPT_FLAG && e->type != OPT_HELP &&
	       e->type != OPT_VERSION && e->type != OPT_LIST_OPTIONS;
}

/* A byte count as the shortest of NG, NM, NK or N (whole units). */
static void print_size(uint64_t v, FILE *out)
{
	if (v && !(v % (1ull << 30)))
		fprintf(out, "%" PRIu64 "G", v >> 30);
	else if (v && !(v % (1ull << 20)))
		fprintf(out, "%" PRIu64 "M", v >> 20);
	else if (v && !(v % (1ull << 10)))
		fprintf(out, "%" PRIu64 "K", v >> 10);
	else
		fprintf(out, "%" PRIu64, v);
}

/* @e's value @v (default, min or max) as --help and the errors show it. */
static void print_value(const struct opt_entry *e, uint64_t v, FILE *out)
{
	if (e->type == OPT_SIZE)
		print_size(v, out);
	else
		fprintf(out, "%" PRIu64, v);
}

/* @e's default as text. */
static void print_default(const struct opt_entry *e, FILE *out)
{
	switch (e->type) {
	case OPT_UINT:
	case OPT_SIZE:
		print_value(e, e->def, out);
		break;
	case OPT_ENUM:
		fputs(e->names[e->def], out);
		break;
	default:
		fputs(e->def_str ? e->def_str : "none", out);
		break;
	}
}

/* @text with the placeholders of @e, @arg and @bad (NULL: not replaced)
 * replaced; each newline followed by @indent spaces. */
static void expand(const struct opt_entry *e, const char *text,
		   const char *arg, const char *bad, int indent, FILE *out)
{
	for (const char *s = text; *s; s++) {
		if (!strncmp(s, "{default}", 9)) {
			print_default(e, out);
			s += 8;
		} else if (!strncmp(s, "{min}", 5)) {
			print_value(e, e->min, out);
			s += 4;
		} else if (!strncmp(s, "{max}", 5)) {
			print_value(e, e->max, out);
			s += 4;
		} else if (arg && !strncmp(s, "{arg}", 5)) {
			fputs(arg, out);
			s += 4;
		} else if (bad && !strncmp(s, "{bad}", 5)) {
			fputs(bad, out);
			s += 4;
		} else {
			fputc(*s, out);
			if (*s == '\n' && s[1])
				fprintf(out, "%*s", indent, "");
		}
	}
}

void opt_print_text(const struct opt_entry *e, const char *text, FILE *out)
{
	expand(e, text, NULL, NULL, 0, out);
}

void opt_print_expect(const struct opt_entry *e, const char *arg,
		      const char *bad, FILE *out)
{
	const char *expect = e->expect ? e->expect : "a bad value";

	fprintf(out, "--%s", e->name);
	if (*expect != ':' && *expect != ' ')
		fprintf(out, " '%s': ", arg);
	expand(e, expect, arg, bad, 0, out);
}

/* @e's argument in --help: its metavar, or an enum's names. */
static void print_metavar(const struct opt_entry *e, FILE *out)
{
	if (e->metavar || e->type != OPT_ENUM) {
		fputs(e->metavar ? e->metavar : "VALUE", out);
		return;
	}
	for (size_t i = 0; e->names[i]; i++)
		fprintf(out, "%s%s", i ? "|" : "", e->names[i]);
}

/* One entry's lines of --help. */
static void print_entry(const struct opt_entry *e, FILE *out)
{
	char head[160];
	FILE *h = fmemopen(head, sizeof(head), "w");
	long len;

	if (!h)
		return;
	fputs("  ", h);
	if (e->short_name)
		fprintf(h, "-%c, ", e->short_name);
	fprintf(h, "--%s", e->name);
	if (help_takes_arg(e)) {
		fputc(' ', h);
		print_metavar(e, h);
	}
	len = ftell(h);
	fclose(h);
	head[sizeof(head) - 1] = '\0';
	fputs(head, out);
	if (len <= HELP_COLUMN - 1)
		fprintf(out, "%*s", (int)(HELP_COLUMN - len), "");
	else if (len <= HELP_SAME_LINE)
		fputs("  ", out);
	else
		fprintf(out, "\n%*s", HELP_COLUMN, "");
	expand(e, e->help ? e->help : "", NULL, NULL, HELP_COLUMN, out);
	fputc('\n', out);
	if (e->help_more)
		e->help_more(out);
}

void opt_print_options(const struct opt_program *prog, FILE *out)
{
	for (size_t i = 0; i < prog->nentries; i++)
		if (!(prog->entries[i].flags & OPT_HIDDEN))
			print_entry(&prog->entries[i], out);
}

void opt_print_help(const struct opt_program *prog, FILE *out)
{
	fputs(prog->usage_head, out);
	opt_print_options(prog, out);
	fputs(prog->usage_tail, out);
}

void opt_print_list(const struct opt_program *prog, FILE *out)
{
	for (size_t i = 0; i < prog->nentries; i++) {
		const struct opt_entry *e = &prog->entries[i];

		if (e->flags & OPT_HIDDEN)
			continue;
		fprintf(out, "--%s ", e->name);
		if (help_takes_arg(e))
			print_metavar(e, out);
		else
			fputc('-', out);
		for (size_t k = 0; e->type == OPT_ENUM && e->names[k]; k++)
			fprintf(out, " %s", e->names[k]);
		if (e->values) {
			fputc(' ', out);
			e->values(out);
		}
		fputc('\n', out);
	}
}
