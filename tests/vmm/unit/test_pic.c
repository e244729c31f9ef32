// SPDX-License-Identifier: GPL-2.0-only
/* The 8259A pair's registers, through pic.c's functions, without KVM. */
#include <check.h>
#include <stdlib.h>

#include "machine/bus.h"
#include "machine/devices/devices.h"
#include "machine/devices/pic.h"
#include "machine/irq.h"
#include "machine/vm.h"

/* What pic.c calls outside its file. */
static int kicks;

int bus_register(enum bus_space space, uint64_t base, uint64_t len,
		 bus_handler fn, void *opaque)
{
	(void)space; (void)base; (void)len; (void)fn; (void)opaque;
	return 0;
}

void irq_extint_kick(struct vm *vm)
{
	(void)vm;
	kicks++;
}

static struct pic_pair p;

static void fw(void)
{
	pic_pair_firmware_state(&p);
}

/* ICWs with vector bases @m/@s, the slave on IR2, ICW4 @icw4, no masks. */
static void init_pair(uint8_t m, uint8_t s, uint8_t icw4)
{
	pic_pair_reset(&p);
	pic_pair_write(&p, 0x20, 0x11);
	pic_pair_write(&p, 0x21, m);
	pic_pair_write(&p, 0x21, 0x04);
	pic_pair_write(&p, 0x21, icw4);
	pic_pair_write(&p, 0xa0, 0x11);
	pic_pair_write(&p, 0xa1, s);
	pic_pair_write(&p, 0xa1, 0x02);
	pic_pair_write(&p, 0xa1, icw4);
}

static void pulse(unsigned int irq)
{
	pic_pair_set_irq(&p, irq, true);
	pic_pair_set_irq(&p, irq, false);
}

START_TEST(firmware_state)
{
	fw();
	ck_assert_uint_eq(pic_pair_read(&p, 0x21), 0x10);
	ck_assert_uint_eq(pic_pair_read(&p, 0xa1), 0x03);
	ck_assert_uint_eq(pic_pair_read(&p, 0x4d0), 0);
	ck_assert_uint_eq(pic_pair_read(&p, 0x4d1), 0);
	ck_assert(!pic_pair_intr(&p));
	pulse(3);
	ck_assert(pic_pair_intr(&p));
	ck_assert_uint_eq(pic_pair_intack(&p), 0x0b);
	pulse(11);
	/* the cascade's IR2 is higher than IR3 in service */
	ck_assert(pic_pair_intr(&p));
	ck_assert_uint_eq(pic_pair_intack(&p), 0x73);
	/* the lines of the machine's own devices are masked */
	pulse(4);
	pulse(8);
	pulse(9);
	pic_pair_write(&p, 0xa0, 0x20);
	pic_pair_write(&p, 0x20, 0x20);
	pic_pair_write(&p, 0x20, 0x20);
	ck_assert(!pic_pair_intr(&p));
}
END_TEST

START_TEST(icw_bases_and_masks)
{
	init_pair(0x20, 0x28, 0x01);
	ck_assert_uint_eq(pic_pair_read(&p, 0x21), 0); /* ICW1 clears IMR */
	pic_pair_write(&p, 0x21, 0x02);
	pulse(1);
	ck_assert(!pic_pair_intr(&p));
	ck_assert_uint_eq(pic_pair_read(&p, 0x20), 0x02); /* IRR: latched */
	pic_pair_write(&p, 0x21, 0x00);
	ck_assert(pic_pair_intr(&p));
	ck_assert_uint_eq(pic_pair_intack(&p), 0x21);
	pic_pair_write(&p, 0x20, 0x20);
	pic_pair_write(&p, 0xa1, 0x40);
	pulse(14);
	ck_assert(!pic_pair_intr(&p));
	pic_pair_write(&p, 0xa1, 0x00);
	ck_assert_uint_eq(pic_pair_intack(&p), 0x2e);
	/* ICW1 again: edge latches and masks reset */
	pulse(5);
	pic_pair_write(&p, 0x21, 0xff);
	pic_pair_write(&p, 0x20, 0x11);
	pic_pair_write(&p, 0x21, 0x40);
	pic_pair_write(&p, 0x21, 0x04);
	pic_pair_write(&p, 0x21, 0x01);
	ck_assert_uint_eq(pic_pair_read(&p, 0x21), 0);
	ck_assert_uint_eq(pic_pair_read(&p, 0x20) & 0x20, 0);
}
END_TEST

START_TEST(priorities_and_eoi)
{
	init_pair(0x08, 0x70, 0x01);
	pulse(5);
	pulse(3);
	ck_assert_uint_eq(pic_pair_intack(&p), 0x0b);
	/* IR5 waits behind IR3 in service; IR1 is higher and gets in */
	ck_assert(!pic_pair_intr(&p));
	pulse(1);
	ck_assert(pic_pair_intr(&p));
	ck_assert_uint_eq(pic_pair_intack(&p), 0x09);
	pic_pair_write(&p, 0x20, 0x0b); /* OCW3: read ISR */
	ck_assert_uint_eq(pic_pair_read(&p, 0x20), 0x0a);
	pic_pair_write(&p, 0x20, 0x20); /* non-specific: IR1, the highest */
	ck_assert_uint_eq(pic_pair_read(&p, 0x20), 0x08);
	ck_assert(!pic_pair_intr(&p));
	pic_pair_write(&p, 0x20, 0x63); /* specific EOI of IR3 */
	ck_assert_uint_eq(pic_pair_read(&p, 0x20), 0x00);
	pic_pair_write(&p, 0x20, 0x0a); /* OCW3: read IRR */
	ck_assert_uint_eq(pic_pair_read(&p, 0x20), 0x20);
	ck_assert_uint_eq(pic_pair_intack(&p), 0x0d);
	pic_pair_write(&p, 0x20, 0x20);
	/* set priority: IR4 lowest, so IR5 is the highest; then IR3 */
	pic_pair_write(&p, 0x20, 0xc4);
	pulse(3);
	pulse(5);
	ck_assert_uint_eq(pic_pair_intack(&p), 0x0d);
	/* IR3 is lower than IR5 in service now */
	ck_assert(!pic_pair_intr(&p));
	/* rotate on non-specific EOI: IR5 becomes the lowest */
	pic_pair_write(&p, 0x20, 0xa0);
	ck_assert_uint_eq(pic_pair_intack(&p), 0x0b);
	pulse(5);
	pulse(6);
	pic_pair_write(&p, 0x20, 0xe3); /* rotate on specific EOI of IR3 */
	ck_assert_uint_eq(pic_pair_intack(&p), 0x0d); /* IR4, IR5 first */
}
END_TEST

START_TEST(elcr_edge_and_level)
{
	fw();
	pic_pair_write(&p, 0x4d0, 0xff);
	pic_pair_write(&p, 0x4d1, 0xff);
	ck_assert_uint_eq(pic_pair_read(&p, 0x4d0), 0xf8);
	ck_assert_uint_eq(pic_pair_read(&p, 0x4d1), 0xde);
	pic_pair_write(&p, 0x4d0, 0x00);
	pic_pair_write(&p, 0x4d1, 0x08); /* IRQ 11 level */
	pulse(11);
	ck_assert(!pic_pair_intr(&p)); /* a level request goes with its line */
	pic_pair_set_irq(&p, 11, true);
	ck_assert(pic_pair_intr(&p));
	ck_assert_uint_eq(pic_pair_intack(&p), 0x73);
	pic_pair_write(&p, 0xa0, 0x20);
	pic_pair_write(&p, 0x20, 0x20);
	/* still high after the EOIs: requested again */
	ck_assert(pic_pair_intr(&p));
	/* withdrawn before INTA: gone from the master's IR2 too */
	pic_pair_set_irq(&p, 11, false);
	ck_assert(!pic_pair_intr(&p));
	/* an edge line stays latched; a held line needs a new edge */
	pulse(3);
	ck_assert(pic_pair_intr(&p));
	ck_assert_uint_eq(pic_pair_intack(&p), 0x0b);
	pic_pair_write(&p, 0x20, 0x20);
	pic_pair_set_irq(&p, 6, true);
	ck_assert_uint_eq(pic_pair_intack(&p), 0x0e);
	pic_pair_write(&p, 0x20, 0x20);
	pic_pair_set_irq(&p, 6, true);
	ck_assert(!pic_pair_intr(&p));
}
END_TEST

START_TEST(poll_mode)
{
	init_pair(0x08, 0x70, 0x01);
	pic_pair_write(&p, 0x20, 0x0c);
	ck_assert_uint_eq(pic_pair_read(&p, 0x20), 0x00); /* nothing */
	pulse(6);
	pic_pair_write(&p, 0x20, 0x0c);
	ck_assert_uint_eq(pic_pair_read(&p, 0x21), 0x86);
	pic_pair_write(&p, 0x20, 0x0b);
	ck_assert_uint_eq(pic_pair_read(&p, 0x20), 0x40); /* in service */
	ck_assert_uint_eq(pic_pair_read(&p, 0x21), 0x00); /* IMR again */
}
END_TEST

START_TEST(spurious)
{
	init_pair(0x08, 0x70, 0x01);
	ck_assert_uint_eq(pic_pair_intack(&p), 0x0f); /* no request: IR7 */
	pic_pair_write(&p, 0x20, 0x0b);
	ck_assert_uint_eq(pic_pair_read(&p, 0x20), 0x00); /* no ISR bit */
	/* the master's IR2 with no slave request: the slave's IR7 */
	pic_pair_set_irq(&p, 2, true);
	ck_assert_uint_eq(pic_pair_intack(&p), 0x77);
	pic_pair_write(&p, 0xa0, 0x0b);
	ck_assert_uint_eq(pic_pair_read(&p, 0xa0), 0x00);
}
END_TEST

START_TEST(cascade)
{
	init_pair(0x08, 0x70, 0x01);
	pulse(10);
	ck_assert(pic_pair_intr(&p));
	ck_assert_uint_eq(pic_pair_intack(&p), 0x72);
	pic_pair_write(&p, 0x20, 0x0b);
	pic_pair_write(&p, 0xa0, 0x0b);
	ck_assert_uint_eq(pic_pair_read(&p, 0x20), 0x04);
	ck_assert_uint_eq(pic_pair_read(&p, 0xa0), 0x04);
	/* a higher slave request waits for the master's IR2 (not SFNM) */
	pulse(9);
	ck_assert(!pic_pair_intr(&p));
	pic_pair_write(&p, 0xa0, 0x20);
	pic_pair_write(&p, 0x20, 0x20);
	ck_assert_uint_eq(pic_pair_intack(&p), 0x71);
	/* IMR of the cascade input masks the whole slave */
	pic_pair_write(&p, 0xa0, 0x20);
	pic_pair_write(&p, 0x20, 0x20);
	pic_pair_write(&p, 0x21, 0x04);
	pulse(12);
	ck_assert(!pic_pair_intr(&p));
	pic_pair_write(&p, 0x21, 0x00);
	ck_assert_uint_eq(pic_pair_intack(&p), 0x74);
}
END_TEST

START_TEST(fully_nested)
{
	init_pair(0x08, 0x70, 0x11); /* SFNM */
	pulse(10);
	ck_assert_uint_eq(pic_pair_intack(&p), 0x72);
	pulse(9); /* higher, from the same slave: let through */
	ck_assert(pic_pair_intr(&p));
	ck_assert_uint_eq(pic_pair_intack(&p), 0x71);
}
END_TEST

START_TEST(auto_eoi)
{
	init_pair(0x08, 0x70, 0x03);
	pulse(4);
	ck_assert_uint_eq(pic_pair_intack(&p), 0x0c);
	pic_pair_write(&p, 0x20, 0x0b);
	ck_assert_uint_eq(pic_pair_read(&p, 0x20), 0x00);
	pulse(5); /* nothing in service: taken at once */
	ck_assert(pic_pair_intr(&p));
	/* rotate in auto-EOI mode: IR5 becomes the lowest */
	pic_pair_write(&p, 0x20, 0x80);
	ck_assert_uint_eq(pic_pair_intack(&p), 0x0d);
	pulse(5);
	pulse(6);
	ck_assert_uint_eq(pic_pair_intack(&p), 0x0e);
}
END_TEST

START_TEST(special_mask)
{
	init_pair(0x08, 0x70, 0x01);
	pulse(3);
	ck_assert_uint_eq(pic_pair_intack(&p), 0x0b);
	pulse(6);
	ck_assert(!pic_pair_intr(&p));
	pic_pair_write(&p, 0x21, 0x08);
	pic_pair_write(&p, 0x20, 0x68); /* OCW3: set special mask */
	ck_assert(pic_pair_intr(&p));
	ck_assert_uint_eq(pic_pair_intack(&p), 0x0e);
	pic_pair_write(&p, 0x20, 0x48); /* reset special mask */
	pic_pair_write(&p, 0x21, 0x00);
	pulse(7);
	ck_assert(!pic_pair_intr(&p));
}
END_TEST

START_TEST(vm_pair_kicks)
{
	static struct vm vm;

	kicks = 0;
	ck_assert_int_eq(pic_init(&vm), 0);
	ck_assert(!pic_intr());
	pic_set_irq(11, true);
	ck_assert(pic_intr());
	ck_assert_int_eq(kicks, 1);
	pic_set_irq(11, false);
	ck_assert(pic_intr()); /* edge: latched */
	ck_assert_uint_eq(pic_intack(), 0x73);
	ck_assert(!pic_intr());
	pic_set_irq(4, true); /* masked */
	ck_assert(!pic_intr());
	ck_assert_int_eq(kicks, 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pic");
	TCase *tc = tcase_create("regs");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, firmware_state);
	tcase_add_test(tc, icw_bases_and_masks);
	tcase_add_test(tc, priorities_and_eoi);
	tcase_add_test(tc, elcr_edge_and_level);
	tcase_add_test(tc, poll_mode);
	tcase_add_test(tc, spurious);
	tcase_add_test(tc, cascade);
	tcase_add_test(tc, fully_nested);
	tcase_add_test(tc, auto_eoi);
	tcase_add_test(tc, special_mask);
	tcase_add_test(tc, vm_pair_kicks);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
