// SPDX-License-Identifier: GPL-2.0-only
#include "stats.h"

static void sift(u64 *a, u32 root, u32 n)
{
	for (;;) {
		u32 c = 2 * root + 1;

		if (c >= n)
			return;
		if (c + 1 < n && a[c + 1] > a[c])
			c++;
		if (a[root] >= a[c])
			return;
		u64 t = a[root];
		a[root] = a[c];
		a[c] = t;
		root = c;
	}
}

void stats_sort(u64 *a, u32 n)
{
	for (u32 i = n / 2; i-- > 0;)
		sift(a, i, n);
	for (u32 i = n; i-- > 1;) {
		u64 t = a[0];
		a[0] = a[i];
		a[i] = t;
		sift(a, 0, i);
	}
}

void stats_print(const char *label, u64 *d, u32 n)
{
	if (!n) {
		printf("%s: no samples\n", label);
		return;
	}
	stats_sort(d, n);
	printf("%s: rounds=%u min=%llu median=%llu max=%llu ns\n", label, n,
	       (unsigned long long)tsc_to_ns(d[0]), (unsigned long long)tsc_to_ns(d[n / 2]),
	       (unsigned long long)tsc_to_ns(d[n - 1]));
}
