// SPDX-License-Identifier: GPL-2.0-only
/* The 16550 UART at GUEST_PORT_COM1: polled output, one lock for all CPUs. */
#include "rt.h"

#define UART_THR 0
#define UART_IER 1
#define UART_FCR 2
#define UART_LCR 3
#define UART_MCR 4
#define UART_LSR 5
#define LSR_THRE 0x20

static volatile u32 console_lock_word;

void console_init(void)
{
	outb(GUEST_PORT_COM1 + UART_IER, 0x00);
	outb(GUEST_PORT_COM1 + UART_LCR, 0x03); /* 8N1, DLAB off */
	outb(GUEST_PORT_COM1 + UART_MCR, 0x0b); /* DTR | RTS | OUT2 */
}

static void putc_raw(char c)
{
	/* bounded: a missing or stuck THRE must not hang the guest */
	for (int i = 0; i < 10000; i++)
		if (inb(GUEST_PORT_COM1 + UART_LSR) & LSR_THRE)
			break;
	outb(GUEST_PORT_COM1 + UART_THR, (u8)c);
}

void console_write_unlocked(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\n')
			putc_raw('\r');
		putc_raw(s[i]);
	}
}

bool console_trylock(u64 spins)
{
	do {
		if (!__atomic_exchange_n(&console_lock_word, 1, __ATOMIC_ACQUIRE))
			return true;
		cpu_relax();
	} while (spins--);
	return false;
}

void console_lock(void)
{
	while (!console_trylock(~0ull))
		;
}

void console_unlock(void)
{
	__atomic_store_n(&console_lock_word, 0, __ATOMIC_RELEASE);
}

void console_write(const char *s, size_t n)
{
	u64 flags;

	/* no interrupt handler may interleave its output with ours */
	__asm__ volatile("pushfq; popq %0; cli" : "=r"(flags) : : "memory");
	console_lock();
	console_write_unlocked(s, n);
	console_unlock();
	if (flags & 0x200)
		irq_enable();
}
