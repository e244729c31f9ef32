// SPDX-License-Identifier: GPL-2.0-only
/*
 * A region of RAM filled with a known pattern and checked again later
 * (idle.elf fill=): whether a hypervisor that gave the guest's memory back
 * to its host (swapped out, faulted back in) kept it unchanged.
 *
 * The region starts at MEMFILL_BASE (64 MiB), above the image and the AP
 * stacks (STACK_REGION + MAX_CPUS * STACK_SIZE: 20 MiB for 256 CPUs, 32
 * MiB for 1024), and ends below the first hole of RAM (multiboot
 * mem_upper, else fw_cfg's RAM size) and below 3 GiB (the top GiB of the
 * identity map is the APICs'). Every 8-byte word of the 4 KiB page at
 * address A holds memfill_value(A, seed): splitmix64's finaliser of
 * A ^ seed * 2^64/phi, a bijection, so no two pages of a fill are alike (a
 * page put back at the wrong place, zeroed or stale is seen, and none is
 * merged with another by the host) while a page, the unit a host swaps,
 * is one value.
 *
 * Fill: one rep stosq per page; check: one repe scasq per page against
 * its value. String instructions because ring-0 guest code may be
 * interpreted on a nested host (about 1 us an instruction): a loop over
 * 128 MiB a word at a time takes minutes there, a string instruction a
 * page at a time some seconds.
 *
 * The checksum folds (FNV-1a's multiply), page by page in address order,
 * the first word of the page as read and, for a page with a word that is
 * not its value, the index and the contents of the first such word. The
 * fill's checksum folds the values alone (the memory as it must be read),
 * so a check of unchanged memory gives the same number and any changed
 * word changes it.
 */
#include "rt.h"

#define PAGE 4096ul
#define WORDS (PAGE / 8)
#define FOLD_PRIME 0x100000001b3ull
#define FOLD_BASIS 0xcbf29ce484222325ull
#define IDENTITY_END 0xc0000000ull /* 3 GiB: the top GiB is uncached MMIO */

_Static_assert(MEMFILL_BASE >= STACK_REGION + (u64)MAX_CPUS * STACK_SIZE,
	       "the fill region is above the AP stacks");

static u64 memfill_value(u64 addr, u64 seed)
{
	u64 z = addr ^ (seed * 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static u64 fold(u64 h, u64 v)
{
	return (h ^ v) * FOLD_PRIME;
}

u64 memfill_ram_end(void)
{
	u64 ram = 0;

	if (mb_mem_upper_kb)
		ram = ((u64)mb_mem_upper_kb + 1024) << 10;
	else
		fwcfg_read(FW_CFG_RAM_SIZE, &ram, 8);
	return ram < IDENTITY_END ? ram : IDENTITY_END;
}

bool memfill_fill(struct memfill *m, u64 mib, u64 seed)
{
	u64 h = FOLD_BASIS;

	m->base = MEMFILL_BASE;
	m->seed = seed;
	m->bytes = 0;
	if (!mib || mib > (IDENTITY_END >> 20) ||
	    MEMFILL_BASE + (mib << 20) > memfill_ram_end())
		return false;
	m->bytes = mib << 20;
	for (u64 a = m->base; a < m->base + m->bytes; a += PAGE) {
		u64 *d = (u64 *)(uintptr_t)a, n = WORDS, v = memfill_value(a, seed);

		__asm__ volatile("rep stosq" : "+D"(d), "+c"(n) : "a"(v) : "memory");
		h = fold(h, v);
	}
	m->checksum = h;
	return true;
}

u64 memfill_check(const struct memfill *m, u64 *bad_pages, u64 *first_bad)
{
	u64 h = FOLD_BASIS;

	*bad_pages = 0;
	*first_bad = 0;
	for (u64 a = m->base; a < m->base + m->bytes; a += PAGE) {
		u64 *d = (u64 *)(uintptr_t)a, n = WORDS, v = memfill_value(a, m->seed);
		bool differs;

		h = fold(h, READ_ONCE(*(u64 *)(uintptr_t)a));
		/* stops after the first word that differs, ZF clear */
		__asm__ volatile("repe scasq" : "+D"(d), "+c"(n), "=@ccnz"(differs)
				 : "a"(v) : "memory");
		if (!differs)
			continue;
		/* d is one word past it, n the words left after it */
		h = fold(fold(h, WORDS - n - 1), d[-1]);
		if (!(*bad_pages)++)
			*first_bad = (u64)(uintptr_t)(d - 1);
	}
	return h;
}
