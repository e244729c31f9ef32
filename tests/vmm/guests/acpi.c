/* Finds the FADT from the RSDP and sleeps through the PM1a control block.
 * sleep=3: S3, woken by the RTC alarm (all don't care, RTC_EN); the
 * real-mode waking vector exits with the byte it reads from RAM (51, as
 * stored before sleeping). sleep=4: S3 with no wake source. sleep=5: S5.
 * Exit 90: no RSDP or a bad checksum; 91: no FADT; 77: the vCPU ran on
 * after SLP_EN. */
#include "guest.h"

#define WAKE_ADDR 0x1008u /* CS 0x100, IP 8 */
#define MARK_ADDR 0x500u

int main(uint32_t magic, uint32_t *mbi);

static inline void outw(uint16_t port, uint16_t v)
{
	__asm__ volatile("outw %0, %1" : : "a"(v), "Nd"(port) : "memory");
}

static uint8_t rtc_in(uint8_t reg)
{
	outb(0x70, reg);
	return inb(0x71);
}

static void rtc_out(uint8_t reg, uint8_t v)
{
	outb(0x70, reg);
	outb(0x71, v);
}

/* A low address the compiler may not reason about (it takes those as
 * null-pointer arithmetic). */
static volatile uint8_t *low(uint32_t addr)
{
	__asm__("" : "+r"(addr));
	return (volatile uint8_t *)addr;
}

static uint8_t sum(const uint8_t *p, uint32_t n)
{
	uint8_t s = 0;

	while (n--)
		s = (uint8_t)(s + *p++);
	return s;
}

/* xor ax,ax; mov ds,ax; mov al,[0x500]; out 0xf4,al; hlt; jmp $-1 */
static const uint8_t wake_code[] = { 0x31, 0xc0, 0x8e, 0xd8, 0xa0, 0x00,
				     0x05, 0xe6, 0xf4, 0xf4, 0xeb, 0xfd };

int main(uint32_t magic, uint32_t *mbi)
{
	unsigned int mode = cmdline_uint(mbi, "sleep", 3);
	const uint8_t *rsdp = 0, *rsdt, *fadt = 0;
	uint32_t evt, cnt;

	if (magic != 0x2BADB002)
		return 99;
	for (uint32_t a = 0xe0000; a < 0x100000 && !rsdp; a += 16)
		if (*(volatile uint32_t *)a == 0x20445352 &&
		    *(volatile uint32_t *)(a + 4) == 0x20525450)
			rsdp = (const uint8_t *)a;
	if (!rsdp || sum(rsdp, 20) || sum(rsdp, 36))
		return 90;
	rsdt = (const uint8_t *)*(const uint32_t *)(rsdp + 16);
	for (uint32_t i = 36; i < *(const uint32_t *)(rsdt + 4); i += 4) {
		const uint8_t *t = (const uint8_t *)*(const uint32_t *)(rsdt + i);

		if (*(const uint32_t *)t == 0x50434146) /* "FACP" */
			fadt = t;
	}
	if (!fadt || sum(fadt, *(const uint32_t *)(fadt + 4)))
		return 91;
	evt = *(const uint32_t *)(fadt + 56);
	cnt = *(const uint32_t *)(fadt + 64);

	if (mode == 5) {
		puts_serial("powering off\n");
		outw((uint16_t)cnt, (0 << 10) | (1 << 13));
		for (;;)
			;
	}
	for (uint32_t i = 0; i < sizeof(wake_code); i++)
		low(WAKE_ADDR)[i] = wake_code[i];
	/* FACS Firmware_Waking_Vector */
	*(volatile uint32_t *)(*(const uint32_t *)(fadt + 36) + 12) = WAKE_ADDR;
	*low(MARK_ADDR) = 51;
	if (mode == 3) {
		outw((uint16_t)(evt + 2), 1 << 10); /* RTC_EN */
		while (!(rtc_in(0x0a) & 0x80))
			;
		while (rtc_in(0x0a) & 0x80)
			;
		rtc_in(0x0c);
		rtc_out(0x01, 0xc0);
		rtc_out(0x03, 0xc0);
		rtc_out(0x05, 0xc0);
		rtc_out(0x0b, rtc_in(0x0b) | 0x20); /* AIE */
	}
	puts_serial("sleeping\n");
	outw((uint16_t)cnt, (1 << 10) | (1 << 13)); /* S3 */
	for (;;)
		*low(MARK_ADDR) = 77;
}
