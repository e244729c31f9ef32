/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Runs a fuzz target's LLVMFuzzerTestOneInput on every file named on the
 * command line, and on every file of every directory named there: the
 * corpus replay that the gcc builds (plain and ASan+UBSan) run in `meson
 * test`, so that an input that once crashed a target keeps being tried
 * without clang. Prints one TAP line per file.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

#define REPLAY_MAX_BYTES (16u << 20) /* a corpus file larger is an error */

static unsigned int ran;

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One file: read whole (at most REPLAY_MAX_BYTES), run once. */
static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = malloc(REPLAY_MAX_BYTES + 1);
	size_t n;

	if (!f || !buf) {
		printf("not ok %u - %s: %s\n", ++ran, path, strerror(errno));
		if (f)
			fclose(f);
		free(buf);
		return 1;
	}
	n = fread(buf, 1, REPLAY_MAX_BYTES + 1, f);
	fclose(f);
	if (n > REPLAY_MAX_BYTES) {
		printf("not ok %u - %s: larger than %u bytes\n", ++ran, path,
		       REPLAY_MAX_BYTES);
		free(buf);
		return 1;
	}
	/* A copy of exactly n bytes, so ASan sees a read past the input. */
	uint8_t *in = malloc(n ? n : 1);

	memcpy(in, buf, n);
	free(buf);
	LLVMFuzzerTestOneInput(in, n);
	free(in);
	printf("ok %u - %s (%zu bytes)\n", ++ran, path, n);
	fflush(stdout);
	return 0;
}

/* Every regular file of @dir, in name order. */
static int replay_dir(const char *dir)
{
	struct dirent **ents;
	int n = scandir(dir, &ents, NULL, NULL), bad = 0;
	char **names;
	int nn = 0;

	if (n < 0) {
		printf("not ok %u - %s: %s\n", ++ran, dir, strerror(errno));
		return 1;
	}
	names = calloc((size_t)n + 1, sizeof(*names));
	for (int i = 0; i < n; i++) {
		if (ents[i]->d_name[0] != '.' && names &&
		    asprintf(&names[nn], "%s/%s", dir, ents[i]->d_name) >= 0)
			nn++;
		free(ents[i]);
	}
	free(ents);
	if (!names)
		return 1;
	qsort(names, (size_t)nn, sizeof(*names), cmp_names);
	for (int i = 0; i < nn; i++) {
		struct stat st;

		if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode))
			bad |= replay_file(names[i]);
		free(names[i]);
	}
	free(names);
	return bad;
}

int main(int argc, char **argv)
{
	int bad = 0;

	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode))
			bad |= replay_dir(argv[i]);
		else
			bad |= replay_file(argv[i]);
	}
	if (!ran)
		printf("not ok 1 - no corpus file given\n"), ran = 1, bad = 1;
	printf("1..%u\n", ran);
	return bad;
}
