// SPDX-License-Identifier: GPL-2.0-only
/* key=value options from the multiboot command line (copied at boot). */
#include "rt.h"

static char cmdline[512];

void cmdline_init(const char *mb_cmdline)
{
	size_t i = 0;

	if (mb_cmdline)
		for (; i + 1 < sizeof(cmdline) && mb_cmdline[i]; i++)
			cmdline[i] = mb_cmdline[i];
	cmdline[i] = 0;
}

const char *cmdline_raw(void)
{
	return cmdline;
}

const char *cmdline_get(const char *key)
{
	size_t klen = strlen(key);
	const char *p = cmdline, *found = NULL;

	/* the last occurrence wins; the first word (QEMU passes the file name) is
	 * an ordinary word without '=' and is ignored */
	while (*p) {
		while (*p == ' ')
			p++;
		if (!strncmp(p, key, klen) && (p[klen] == '=' || p[klen] == ' ' || !p[klen]))
			found = p[klen] == '=' ? p + klen + 1 : p + klen;
		while (*p && *p != ' ')
			p++;
	}
	return found;
}

/* values are terminated by a space: parse_u64 stops at the first non-digit */
u64 cmdline_u64(const char *key, u64 dflt)
{
	return parse_u64(cmdline_get(key), dflt);
}

bool cmdline_is(const char *key, const char *value)
{
	const char *v = cmdline_get(key);
	size_t n = strlen(value);

	return v && !strncmp(v, value, n) && (v[n] == ' ' || !v[n]);
}
