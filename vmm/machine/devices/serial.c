/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * 16550 UART at 0x3f8: output to stdout through a bounded buffer that
 * never blocks the vCPU (serial_out.c), input from stdin (a reader thread)
 * raising ISA IRQ 4 (PIC and IOAPIC); MCR loopback (bit 4) sends output
 * back to the receiver instead. The transmitter is always empty: the
 * guest sees each byte sent at once.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <sysidle/guest_abi.h>

#include "base/error.h"
#include "machine/bus.h"
#include "machine/devices/devices.h"
#include "machine/irq.h"
#include "machine/pause.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

#define UART_RX_SIZE 4096
#define IER_RDI 0x01
#define IER_THRI 0x02
#define LCR_DLAB 0x80
#define MCR_LOOP 0x10
#define LSR_DR 0x01
#define LSR_THRE 0x20
#define LSR_TEMT 0x40

static struct uart {
	pthread_mutex_t lock;
	pthread_cond_t room;
	uint8_t ier, lcr, mcr, scr, fcr, dll, dlm;
	bool thr_ipending;
	bool irq_level;
	uint8_t rx[UART_RX_SIZE];
	unsigned int rx_head, rx_count;
} uart = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.room = PTHREAD_COND_INITIALIZER,
	.dll = 1,
};

static pthread_t input_thread;
static bool input_started;
static int input_stop_fd = -1;

/* Caller holds uart.lock (lock order: uart, ioapic, vCPU). */
static void uart_update_irq(void)
{
	bool level = ((uart.ier & IER_RDI) && uart.rx_count) ||
		     ((uart.ier & IER_THRI) && uart.thr_ipending);

	if (level != uart.irq_level) {
		uart.irq_level = level;
		irq_isa_set(GUEST_IRQ_COM1, level);
	}
}

static void uart_rx_push(uint8_t c)
{
	if (uart.rx_count < UART_RX_SIZE) {
		uart.rx[(uart.rx_head + uart.rx_count) % UART_RX_SIZE] = c;
		uart.rx_count++;
	}
}

static uint8_t uart_rx_pop(void)
{
	uint8_t c = 0;

	if (uart.rx_count) {
		c = uart.rx[uart.rx_head];
		uart.rx_head = (uart.rx_head + 1) % UART_RX_SIZE;
		uart.rx_count--;
		pthread_cond_signal(&uart.room);
	}
	return c;
}

static uint8_t uart_iir(void)
{
	uint8_t fifo = (uart.fcr & 1) ? 0xc0 : 0;

	if ((uart.ier & IER_RDI) && uart.rx_count)
		return fifo | 0x04;
	if ((uart.ier & IER_THRI) && uart.thr_ipending) {
		uart.thr_ipending = false; /* reading IIR clears THRE */
		return fifo | 0x02;
	}
	return fifo | 0x01;
}

/* Register reads and writes: caller holds uart.lock, then calls
 * uart_update_irq(). */
static uint8_t uart_read(unsigned int reg)
{
	switch (reg) {
	case 0:
		return (uart.lcr & LCR_DLAB) ? uart.dll : uart_rx_pop();
	case 1:
		return (uart.lcr & LCR_DLAB) ? uart.dlm : uart.ier;
	case 2:
		return uart_iir();
	case 3:
		return uart.lcr;
	case 4:
		return uart.mcr;
	case 5:
		return (uart.rx_count ? LSR_DR : 0) | LSR_THRE | LSR_TEMT;
	case 6:
		if (uart.mcr & MCR_LOOP) /* DTR,RTS,OUT1,OUT2 -> DSR,CTS,RI,DCD */
			return (uint8_t)(((uart.mcr & 1) << 5) |
					 ((uart.mcr & 2) << 3) |
					 ((uart.mcr & 4) << 4) |
					 ((uart.mcr & 8) << 4));
		return 0xb0; /* DCD, DSR, CTS */
	default:
		return uart.scr;
	}
}

static void uart_write(unsigned int reg, uint8_t val)
{
	switch (reg) {
	case 0:
		if (uart.lcr & LCR_DLAB) {
			uart.dll = val;
		} else if (uart.mcr & MCR_LOOP) {
			uart_rx_push(val);
			uart.thr_ipending = true;
		} else {
			serial_output_put(val);
			uart.thr_ipending = true;
		}
		break;
	case 1:
		if (uart.lcr & LCR_DLAB) {
			uart.dlm = val;
		} else {
			/* Enabling THRI with an empty THR raises it at once. */
			if ((val & IER_THRI) && !(uart.ier & IER_THRI))
				uart.thr_ipending = true;
			uart.ier = val & 0x0f;
		}
		break;
	case 2:
		uart.fcr = val;
		if (val & 2) { /* clear the receive FIFO */
			uart.rx_count = 0;
			pthread_cond_signal(&uart.room);
		}
		break;
	case 3:
		uart.lcr = val;
		break;
	case 4:
		uart.mcr = val & 0x1f;
		break;
	case 7:
		uart.scr = val;
		break;
	default:
		break;
	}
}

static void serial_io(struct vcpu *v, uint64_t off, uint8_t *data,
		      unsigned int len, bool is_write, void *opaque)
{
	(void)v; (void)opaque;
	pthread_mutex_lock(&uart.lock);
	if (is_write)
		uart_write((unsigned int)off, data[0]);
	else
		data[0] = uart_read((unsigned int)off);
	if (len > 1 && !is_write)
		memset(data + 1, 0, len - 1);
	uart_update_irq();
	pthread_mutex_unlock(&uart.lock);
}

int serial_init(struct vm *vm)
{
	(void)vm;
	return bus_register(BUS_PIO, GUEST_PORT_COM1, 8, serial_io, NULL);
}

/* Reads stdin into the receiver until EOF or stop; blocks, never polls
 * on a timer. */
static void *serial_input_thread(void *arg)
{
	struct pollfd fds[2] = {
		{ .fd = STDIN_FILENO, .events = POLLIN },
		{ .fd = input_stop_fd, .events = POLLIN },
	};
	uint8_t buf[256];
	ssize_t n;

	pthread_setname_np(pthread_self(), "vmm-serial");
	/* the IRQ it raises resumes a paused VM: "input" */
	pause_set_thread_reason(PAUSE_REASON_INPUT);
	(void)arg;
	for (;;) {
		if (poll(fds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (fds[1].revents)
			break;
		n = read(STDIN_FILENO, buf, sizeof(buf));
		if (n <= 0)
			break;
		pthread_mutex_lock(&uart.lock);
		for (ssize_t i = 0; i < n && !vm_stopping(); i++) {
			while (uart.rx_count == UART_RX_SIZE && !vm_stopping())
				pthread_cond_wait(&uart.room, &uart.lock);
			uart_rx_push(buf[i]);
		}
		uart_update_irq();
		pthread_mutex_unlock(&uart.lock);
	}
	return NULL;
}

int serial_input_start(void)
{
	input_stop_fd = eventfd(0, EFD_CLOEXEC);
	if (input_stop_fd < 0)
		return vmm_fail(VMM_EXIT_KVM, "eventfd: %s", strerror(errno));
	input_started = !pthread_create(&input_thread, NULL,
					serial_input_thread, NULL);
	return 0;
}

/* Caller: vm_stop() was called. */
void serial_input_stop(void)
{
	uint64_t one = 1;

	if (!input_started)
		return;
	if (write(input_stop_fd, &one, sizeof(one)) < 0)
		vmm_warn("cannot stop the stdin reader");
	pthread_mutex_lock(&uart.lock);
	pthread_cond_broadcast(&uart.room);
	pthread_mutex_unlock(&uart.lock);
	pthread_join(input_thread, NULL);
}
