// SPDX-License-Identifier: GPL-2.0-only
/* Configuration files as argv entries (conffile.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "conffile.h"

static const char *const reserved_keys[] = { "config", "help", "version", NULL };

static void conf_error(const char *prog, const char *file, unsigned int line,
		       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void conf_error(const char *prog, const char *file, unsigned int line,
		       const char *fmt, ...)
{
	va_list ap;

	if (line)
		fprintf(stderr, "%s: %s:%u: ", prog, file, line);
	else
		fprintf(stderr, "%s: %s: ", prog, file);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

const char *conf_file_arg(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (!strcmp(argv[i], "--config"))
			return i + 1 < argc ? argv[i + 1] : NULL;
		if (!strncmp(argv[i], "--config=", 9))
			return argv[i] + 9;
	}
	return NULL;
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

static const struct option *find_key(const struct option *o, const char *key)
{
	for (; o->name; o++)
		if (!strcmp(o->name, key))
			return o;
	return NULL;
}

static int push(struct conf_args *a, char *entry, char *origin)
{
	char **argv = realloc(a->argv, (size_t)(a->argc + 2) * sizeof(*argv));
	char **org;

	if (argv)
		a->argv = argv;
	org = argv ? realloc(a->origin, (size_t)(a->argc + 2) * sizeof(*org)) : NULL;
	if (!org) {
		free(entry);
		free(origin);
		return -1;
	}
	a->origin = org;
	a->argv[a->argc] = entry;
	a->origin[a->argc] = origin;
	a->argc++;
	a->argv[a->argc] = NULL;
	a->origin[a->argc] = NULL;
	return 0;
}

/* One "key = value" line of @file; 0, 1 (nothing to add) or -1. */
static int conf_line(const char *prog, const char *file, unsigned int ln,
		     char *text, const struct option *longopts,
		     const char *positional_key, struct conf_args *a)
{
	char *eq = strchr(text, '='), *key, *val = NULL, *entry, *origin;
	const struct option *o;
	size_t klen;

	if (eq) {
		*eq = '\0';
		val = trim(eq + 1);
	}
	key = trim(text);
	if (!*key) {
		conf_error(prog, file, ln, "a value without a key");
		return -1;
	}
	if (!strncmp(key, "--", 2)) {
		conf_error(prog, file, ln, "key '%s': write it without '--'", key);
		return -1;
	}
	for (const char *const *r = reserved_keys; *r; r++)
		if (!strcmp(key, *r)) {
			conf_error(prog, file, ln, "key '%s' is not allowed in a "
				   "configuration file", key);
			return -1;
		}
	if (asprintf(&origin, "%s:%u", file, ln) < 0)
		return -1;
	if (positional_key && !strcmp(key, positional_key)) {
		if (!val || !*val) {
			conf_error(prog, file, ln, "key '%s' needs a value", key);
			free(origin);
			return -1;
		}
		free(a->positional);
		free(a->positional_at);
		a->positional = strdup(val);
		a->positional_at = origin;
		return a->positional ? 1 : -1;
	}
	o = find_key(longopts, key);
	if (!o) {
		conf_error(prog, file, ln, "unknown key '%s'", key);
		free(origin);
		return -1;
	}
	klen = strlen(key);
	if (o->has_arg == no_argument) {
		if (val && (!strcmp(val, "false") || !strcmp(val, "no"))) {
			free(origin);
			return 1;
		}
		if (val && strcmp(val, "true") && strcmp(val, "yes")) {
			conf_error(prog, file, ln, "key '%s' takes no value (or true, "
				   "false, yes, no), not '%s'", key, val);
			free(origin);
			return -1;
		}
		entry = malloc(klen + 3);
		if (entry)
			sprintf(entry, "--%s", key);
	} else {
		if (!val || (!*val && o->has_arg == required_argument)) {
			conf_error(prog, file, ln, "key '%s' needs a value", key);
			free(origin);
			return -1;
		}
		entry = malloc(klen + strlen(val) + 4);
		if (entry)
			sprintf(entry, "--%s=%s", key, val);
	}
	if (!entry) {
		free(origin);
		return -1;
	}
	return push(a, entry, origin);
}

static int conf_read(const char *prog, const char *file, FILE *f,
		     const struct option *longopts, const char *positional_key,
		     struct conf_args *a)
{
	char buf[CONF_LINE_MAX + 2];
	unsigned int ln = 0;
	size_t total = 0;

	while (fgets(buf, sizeof(buf), f)) {
		size_t len = strlen(buf);
		char *s;
		int r;

		ln++;
		total += len;
		if (total > CONF_FILE_MAX) {
			conf_error(prog, file, ln, "the file is longer than %u bytes",
				   CONF_FILE_MAX);
			return -1;
		}
		if (len && buf[len - 1] == '\n')
			buf[--len] = '\0';
		else if (!feof(f)) {
			conf_error(prog, file, ln, "a line longer than %d bytes",
				   CONF_LINE_MAX);
			return -1;
		}
		if (len > CONF_LINE_MAX) {
			conf_error(prog, file, ln, "a line longer than %d bytes",
				   CONF_LINE_MAX);
			return -1;
		}
		if (memchr(buf, '\0', len) != NULL) {
			conf_error(prog, file, ln, "a NUL byte");
			return -1;
		}
		s = trim(buf);
		if (!*s || *s == '#')
			continue;
		r = conf_line(prog, file, ln, s, longopts, positional_key, a);
		if (r < 0)
			return -1;
	}
	if (ferror(f)) {
		conf_error(prog, file, 0, "%s", strerror(errno));
		return -1;
	}
	return 0;
}

int conf_args_build(const char *prog, int argc, char **argv,
		    const char *default_file, const struct option *longopts,
		    const char *positional_key, struct conf_args *out)
{
	const char *file = conf_file_arg(argc, argv);
	bool must = file != NULL;
	struct stat st;
	FILE *f = NULL;
	int err = 0;

	memset(out, 0, sizeof(*out));
	if (push(out, strdup(argv[0]), NULL) < 0 || !out->argv[0])
		goto oom;
	if (!file)
		file = default_file;
	if (file) {
		f = fopen(file, "r");
		if (!f && (must || errno != ENOENT)) {
			conf_error(prog, file, 0, "%s", strerror(errno));
			goto fail;
		}
	}
	if (f) {
		if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
			conf_error(prog, file, 0, "is a directory");
			err = -1;
		} else {
			err = conf_read(prog, file, f, longopts, positional_key, out);
		}
		fclose(f);
		if (err)
			goto fail;
	}
	out->file_end = out->argc;
	for (int i = 1; i < argc; i++) {
		char *s = strdup(argv[i]);

		if (!s || push(out, s, NULL) < 0)
			goto oom;
	}
	return 0;
oom:
	fprintf(stderr, "%s: out of memory\n", prog);
fail:
	conf_args_free(out);
	return -1;
}

void conf_args_free(struct conf_args *a)
{
	for (int i = 0; i < a->argc; i++) {
		free(a->argv[i]);
		free(a->origin[i]);
	}
	free(a->argv);
	free(a->origin);
	free(a->positional);
	free(a->positional_at);
	memset(a, 0, sizeof(*a));
}

static int conf_entry_of(const struct conf_args *a, const char *p)
{
	for (int i = 1; p && i < a->argc; i++) {
		const char *s = a->argv[i];

		if (p >= s && p <= s + strlen(s))
			return i;
	}
	return -1;
}

const char *conf_origin(const struct conf_args *a, const char *p)
{
	int i = conf_entry_of(a, p);

	return i > 0 ? a->origin[i] : NULL;
}

bool conf_from_file(const struct conf_args *a, const char *p)
{
	int i = conf_entry_of(a, p);

	return i > 0 && i < a->file_end;
}
