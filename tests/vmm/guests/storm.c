/* A guest that misbehaves on purpose: from seed=N on its command line, a
 * pseudo-random storm of port reads and writes (all ports but the exit
 * port 0xf4 and the ACPI sleep control 0x604), MMIO reads and writes over
 * the local APIC, the IOAPIC and the unknown addresses around them, MSR
 * reads and writes (random indexes and the hypervisor range; #GP taken
 * and skipped), and fixed IPIs with random destinations, for ever, with
 * interrupts off. The VMM must neither crash nor hang, and must stop on
 * SIGTERM. A line every 65536 steps says it still runs. */
#include "gp_skip.h"
#include "guest.h"

int main(uint32_t magic, uint32_t *mbi);

static uint32_t rng;

static uint32_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	return rng;
}

static void storm_port(uint32_t r)
{
	uint16_t port = (uint16_t)(r >> 8);

	if (port == 0xf4 || port == 0xf5 || (port & ~1u) == 0x604)
		return;
	if (r & 1)
		outb(port, (uint8_t)(r >> 24));
	else
		(void)inb(port);
}

static void storm_mmio(uint32_t r)
{
	static const uint32_t base[] = { 0xfee00000u, 0xfec00000u,
					 0xfed00000u, 0xfe000000u };
	volatile uint32_t *p = (volatile uint32_t *)(uintptr_t)
		(base[r & 3] + ((r >> 4) & 0xffc));

	if (base[r & 3] == 0xfee00000u && ((r >> 4) & 0xff0) == 0x300)
		return; /* the ICR: storm_ipi's, with safe delivery modes */
	if (r & 4)
		*p = next();
	else
		(void)*p;
}

static void storm_msr(uint32_t r)
{
	uint32_t index = r & 8 ? 0x4b564d00u | (r >> 24) : next();
	uint32_t lo, hi;

	if (index == 0x1b || (index >> 16) == 0xc000)
		return; /* APIC base, EFER and friends: not the VMM's */
	if (r & 16)
		__asm__ volatile("wrmsr" : : "a"(next()), "d"(next()),
				 "c"(index));
	else
		__asm__ volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(index));
}

static void storm_ipi(uint32_t r)
{
	volatile uint32_t *icr = (volatile uint32_t *)0xfee00300u;

	icr[4] = (r & 0xff000000u);             /* destination */
	icr[0] = 0x20 + (r & 0xdf) + (r & 0x800); /* fixed, logical or not */
}

int main(uint32_t magic, uint32_t *mbi)
{
	(void)magic;
	rng = cmdline_uint(mbi, "seed", 1) * 2654435761u | 1;
	gp_skip_install();
	puts_serial("storm: started\n");
	for (uint32_t step = 1;; step++) {
		uint32_t r = next();

		switch (r & 0x3) {
		case 0: storm_port(r); break;
		case 1: storm_mmio(r >> 2); break;
		case 2: storm_msr(r >> 2); break;
		default: storm_ipi(r >> 2); break;
		}
		if (!(step & 0xffff))
			puts_serial("storm: running\n");
	}
}
