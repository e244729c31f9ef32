// SPDX-License-Identifier: GPL-2.0-only
/* QEMU's pc-testdev: its ports and iomem through the handlers pc_testdev.c
 * registers, without KVM. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "machine/bus.h"
#include "machine/devices/devices.h"
#include "machine/irq.h"
#include "machine/vm.h"

/* What pc_testdev.c calls outside its file. */
static struct {
	enum bus_space space;
	uint64_t base, len;
	bus_handler fn;
} regions[8];
static unsigned int nregions;
static int line_level[24], line_writes[24];
static uint8_t *ram; /* one page at guest address 0x5000 */

int bus_register(enum bus_space space, uint64_t base, uint64_t len,
		 bus_handler fn, void *opaque)
{
	(void)opaque;
	regions[nregions].space = space;
	regions[nregions].base = base;
	regions[nregions].len = len;
	regions[nregions++].fn = fn;
	return 0;
}

void irq_isa_set(unsigned int line, bool level)
{
	ck_assert_uint_lt(line, 24);
	line_level[line] = level;
	line_writes[line]++;
}

void *guest_ptr(struct vm *vm, uint64_t gpa, uint64_t len)
{
	(void)vm;
	return gpa == 0x5000 && len <= 0x1000 ? ram : NULL;
}

static void access(enum bus_space space, uint64_t addr, void *data,
		   unsigned int len, bool is_write)
{
	for (unsigned int i = 0; i < nregions; i++) {
		if (regions[i].space == space && addr >= regions[i].base &&
		    addr - regions[i].base < regions[i].len) {
			regions[i].fn(NULL, addr - regions[i].base, data, len,
				      is_write, NULL);
			return;
		}
	}
	ck_abort_msg("no region at %#llx", (unsigned long long)addr);
}

static uint32_t in(uint16_t port, unsigned int len)
{
	uint32_t v = 0;

	access(BUS_PIO, port, &v, len, false);
	return v;
}

static void out(uint16_t port, uint32_t v, unsigned int len)
{
	access(BUS_PIO, port, &v, len, true);
}

static void setup(void)
{
	static struct vm vm;

	nregions = 0;
	memset(line_level, 0, sizeof(line_level));
	memset(line_writes, 0, sizeof(line_writes));
	ck_assert_int_eq(pc_testdev_init(&vm), 0);
}

START_TEST(scratch_register)
{
	setup();
	out(0xe0, 0x12345678, 4);
	ck_assert_uint_eq(in(0xe0, 4), 0x12345678);
	ck_assert_uint_eq(in(0xe1, 1), 0x56);
	ck_assert_uint_eq(in(0xe2, 2), 0x1234);
	out(0xe1, 0xab, 1);
	ck_assert_uint_eq(in(0xe0, 4), 0x1234ab78);
	/* 0xe8 is the same register, byte by byte */
	ck_assert_uint_eq(in(0xe8, 4), 0x1234ab78);
	out(0xea, 0xcdef, 2);
	ck_assert_uint_eq(in(0xe0, 4), 0xcdefab78);
	/* bytes past the register's end are dropped */
	out(0xe3, 0x11223344, 4);
	ck_assert_uint_eq(in(0xe0, 4), 0x44efab78);
}
END_TEST

START_TEST(irq_lines)
{
	setup();
	out(0x2000 + 14, 1, 1);
	ck_assert_int_eq(line_level[14], 1);
	out(0x2000 + 14, 0, 1);
	ck_assert_int_eq(line_level[14], 0);
	out(0x2000 + 23, 0x80, 1);
	ck_assert_int_eq(line_level[23], 1);
	ck_assert_uint_eq(in(0x2000 + 23, 1), 0);
	/* a wider write: one byte per consecutive port */
	out(0x2000 + 11, 0x00000001, 4);
	ck_assert_int_eq(line_level[11], 1);
	ck_assert_int_eq(line_writes[12], 1);
	ck_assert_int_eq(line_level[12], 0);
	ck_assert_int_eq(line_writes[14], 3);
	ck_assert_int_eq(line_writes[15], 0);
	/* the last port: nothing past line 23 */
	out(0x2000 + 22, 0x0101, 4);
	ck_assert_int_eq(line_level[22], 1);
}
END_TEST

START_TEST(iomem)
{
	uint64_t q = 0x1122334455667788ull, r = 0;
	uint8_t b = 0;

	setup();
	access(BUS_MMIO, 0xff000000u + 0x100, &q, 8, true);
	access(BUS_MMIO, 0xff000000u + 0x100, &r, 8, false);
	ck_assert_uint_eq(r, q);
	access(BUS_MMIO, 0xff000000u + 0x101, &b, 1, false);
	ck_assert_uint_eq(b, 0x77);
	access(BUS_MMIO, 0xff000000u + 0xfffc, &q, 4, true);
	r = 0;
	access(BUS_MMIO, 0xff000000u + 0xfffc, &r, 4, false);
	ck_assert_uint_eq(r, 0x55667788u);
	/* an access past the end reads all-ones and writes nothing */
	r = 0;
	access(BUS_MMIO, 0xff000000u + 0xfffc, &r, 8, false);
	ck_assert_uint_eq(r, ~0ull);
}
END_TEST

START_TEST(flush_page)
{
	setup();
	ram = mmap(NULL, 0x1000, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert(ram != MAP_FAILED);
	ram[7] = 0x5a;
	out(0xe4, 0x5123, 4);
	ck_assert_uint_eq(ram[7], 0x5a); /* still mapped, same contents */
	ram[8] = 0xa5;
	ck_assert_uint_eq(in(0xe4, 4), 0);
	out(0xe4, 0x7000, 4); /* not guest memory: ignored */
	munmap(ram, 0x1000);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pc-testdev");
	TCase *tc = tcase_create("ports");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, scratch_register);
	tcase_add_test(tc, irq_lines);
	tcase_add_test(tc, iomem);
	tcase_add_test(tc, flush_page);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
