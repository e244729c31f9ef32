/* The paravirtual tick through its MSRs alone (include/sysidle/guest_abi.h),
 * independent of guest-tools: checks the CPUID bit, enables the tick at
 * hz= (default 1000) on vector 0x30, keeps jiffies as 1 + MISSED per tick
 * taken, and compares them with the TSC (must agree within 1 tick).
 *   default: waits in HLT for ticks= ticks (default 100);
 *   sleep=MS: waits in HLT on a one-shot LAPIC timer instead (under
 *     --sysidle the VM goes fully idle meanwhile and the tick stops);
 *   spin=MS: then spins with interrupts off for MS ms (the tick stays
 *     pending in the IRR, later ones count as missed) and takes one tick.
 * Prints "pvtick: ticks=T missed=M jiffies=J expected=E" and "pvtick ok"
 * (exit 0) or "pvtick off" (exit 1); exit 2 without the pv tick. */
#include "guest.h"

#define MSR_HZ 0x53490000u
#define MSR_VECTOR 0x53490001u
#define MSR_MISSED 0x53490002u
#define VEC_TICK 0x30
#define VEC_TIMER 0x31

int main(uint32_t magic, uint32_t *mbi);
void tick_entry(void);
void timer_entry(void);

volatile uint32_t ticks, missed, timer_hits;

/* Handlers return without iret (see serialirq.c): popfl; ret. */
#define IRQ_RETURN \
	"	movl 4(%esp), %eax\n" \
	"	xchgl %eax, 12(%esp)\n" \
	"	movl %eax, 8(%esp)\n" \
	"	popl %eax\n" \
	"	addl $4, %esp\n" \
	"	popfl\n" \
	"	ret\n"
__asm__(".globl tick_entry\n"
	"tick_entry:\n"
	"	pushl %eax\n"
	"	pushl %ecx\n"
	"	pushl %edx\n"
	"	movl $0x53490002, %ecx\n"
	"	rdmsr\n"
	"	addl %eax, missed\n"
	"	incl ticks\n"
	"	movl $0, 0xfee000b0\n"
	"	popl %edx\n"
	"	popl %ecx\n"
	IRQ_RETURN
	".globl timer_entry\n"
	"timer_entry:\n"
	"	pushl %eax\n"
	"	incl timer_hits\n"
	"	movl $0, 0xfee000b0\n"
	IRQ_RETURN);

static uint64_t idt[0x40];

static void mmio_write(uint32_t addr, uint32_t val)
{
	*(volatile uint32_t *)(uintptr_t)addr = val;
}

static void cpuid(uint32_t leaf, uint32_t *a, uint32_t *b, uint32_t *c,
		  uint32_t *d)
{
	__asm__ volatile("cpuid" : "=a"(*a), "=b"(*b), "=c"(*c), "=d"(*d)
			 : "a"(leaf), "c"(0));
}

static uint64_t rdmsr(uint32_t msr)
{
	uint32_t lo, hi;

	__asm__ volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(msr));
	return ((uint64_t)hi << 32) | lo;
}

static void wrmsr(uint32_t msr, uint64_t v)
{
	__asm__ volatile("wrmsr" : : "c"(msr), "a"((uint32_t)v),
			 "d"((uint32_t)(v >> 32)));
}

static uint64_t rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}

/* 64 / 32 -> 32 when the quotient fits (no libgcc here). */
static uint32_t div_u64_u32(uint64_t n, uint32_t d)
{
	uint32_t q, r;

	__asm__("divl %4" : "=a"(q), "=d"(r)
		: "a"((uint32_t)n), "d"((uint32_t)(n >> 32)), "rm"(d));
	return q;
}

static void put_u32(uint32_t v)
{
	char buf[12];
	int i = 11;

	buf[i] = 0;
	do {
		buf[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	puts_serial(buf + i);
}

static void set_gate(int vec, void (*fn)(void))
{
	uint32_t h = (uint32_t)(uintptr_t)fn;

	idt[vec] = (h & 0xffff) | (0x08u << 16) |
		   ((uint64_t)(0x8e00u | (h & 0xffff0000u)) << 32);
}

int main(uint32_t magic, uint32_t *mbi)
{
	struct { uint16_t limit; uint32_t base; } __attribute__((packed))
		idtr = { sizeof(idt) - 1, (uint32_t)(uintptr_t)idt };
	unsigned int hz = cmdline_uint(mbi, "hz", 1000);
	unsigned int want = cmdline_uint(mbi, "ticks", 100);
	unsigned int sleep_ms = cmdline_uint(mbi, "sleep", 0);
	unsigned int spin_ms = cmdline_uint(mbi, "spin", 0);
	uint32_t a, b, c, d, tsc_khz, per_tick, expected, jiffies, t;
	uint64_t t0, end;

	(void)magic;
	cpuid(0x40000000, &a, &b, &c, &d);
	if (b != 0x49737953u || a < 0x40000010u) {
		puts_serial("pvtick: not this VMM\n");
		return 2;
	}
	cpuid(0x40000001, &a, &b, &c, &d);
	if (!(a & 1)) {
		puts_serial("pvtick: no pv tick in CPUID\n");
		return 2;
	}
	cpuid(0x40000010, &tsc_khz, &b, &c, &d);
	per_tick = div_u64_u32((uint64_t)tsc_khz * 1000u, hz);
	set_gate(VEC_TICK, tick_entry);
	set_gate(VEC_TIMER, timer_entry);
	__asm__ volatile("lidt %0" : : "m"(idtr));
	mmio_write(0xfee000f0, 0x1ff); /* SVR: enable */

	wrmsr(MSR_VECTOR, VEC_TICK);
	t0 = rdtsc();
	wrmsr(MSR_HZ, hz);
	if (rdmsr(MSR_VECTOR) != VEC_TICK || rdmsr(MSR_HZ) != hz) {
		puts_serial("pvtick: MSR read-back wrong\n");
		return 1;
	}
	if (sleep_ms) {
		mmio_write(0xfee003e0, 0xb);           /* divide by 1 */
		mmio_write(0xfee00320, VEC_TIMER);     /* one-shot */
		mmio_write(0xfee00380, sleep_ms * 1000000u);
		while (!timer_hits)
			__asm__ volatile("sti; hlt; cli" ::: "memory");
	} else {
		while (ticks < want)
			__asm__ volatile("sti; hlt; cli" ::: "memory");
	}
	if (spin_ms) {
		end = rdtsc() + (uint64_t)tsc_khz * spin_ms;
		while (rdtsc() < end)
			;
		t = ticks;
		while (ticks == t)
			__asm__ volatile("sti; hlt; cli" ::: "memory");
	}
	missed += (uint32_t)rdmsr(MSR_MISSED);
	expected = div_u64_u32(rdtsc() - t0, per_tick);
	jiffies = ticks + missed;
	wrmsr(MSR_HZ, 0);
	puts_serial("pvtick: ticks=");
	put_u32(ticks);
	puts_serial(" missed=");
	put_u32(missed);
	puts_serial(" jiffies=");
	put_u32(jiffies);
	puts_serial(" expected=");
	put_u32(expected);
	puts_serial("\n");
	if (rdmsr(MSR_HZ) != 0 || rdmsr(MSR_MISSED) != 0) {
		puts_serial("pvtick: not stopped by hz=0\n");
		return 1;
	}
	if (jiffies + 1 >= expected && jiffies <= expected + 1) {
		puts_serial("pvtick ok\n");
		return 0;
	}
	puts_serial("pvtick off\n");
	return 1;
}
