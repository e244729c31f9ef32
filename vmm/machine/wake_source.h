/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What wakes a vCPU from HLT (wake_source.c): the first event posted for
 * it while it was halted, by its source, counted per vCPU with a rate over
 * the last minute. The poster names the source as it kicks
 * (vcpu_kick_from); the vCPU's thread counts it as it leaves HLT, under
 * its lock, with a few stores: nothing more on the wake path.
 */
#ifndef VMM_MACHINE_WAKE_SOURCE_H
#define VMM_MACHINE_WAKE_SOURCE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/rate_window.h"

/* The detail each source carries (wake_tally.detail). */
enum wake_source {
	WAKE_SRC_LAPIC_TIMER,  /* its LAPIC timer; detail: the LVT timer
				* mode, 0 one-shot, 1 periodic, 2 TSC-deadline */
	WAKE_SRC_PVTICK,       /* its paravirtual tick; detail: the vector */
	WAKE_SRC_IPI,          /* an IPI; detail: the sending vCPU */
	WAKE_SRC_DEVICE,       /* a device interrupt (IOAPIC, MSI, the PIC's
				* ExtINT); detail: the vector, 256: ExtINT */
	WAKE_SRC_SERIAL,       /* serial input raised the UART's interrupt */
	WAKE_SRC_KICK,         /* the control socket's "kick" */
	WAKE_SRC_SIGNAL,       /* SIGUSR2 from the outside world */
	WAKE_SRC_OTHER,        /* NMI, INIT, SIPI, a resume, S3's alarm */
	WAKE_SOURCES
};
#define WAKE_DETAIL_EXTINT 256

/* "lapic-timer", "pv-tick", "ipi", "device", "serial-input", "kick",
 * "signal", "other"; NULL for no source. */
const char *wake_source_name(int s);
/* "SOURCE[ DETAIL]" into @buf (@n bytes): "lapic-timer periodic",
 * "ipi from vcpu 3", "device vector 0x31", "device extint", "pv-tick",
 * "serial-input", "kick", "signal", "other". */
void wake_source_describe(int s, uint32_t detail, char *buf, size_t n);
/* The LAPIC timer modes' names, by detail: "one-shot", "periodic",
 * "tsc-deadline". */
const char *wake_timer_mode_name(uint32_t mode);

/* One vCPU's wake-ups by source. Its own thread writes, under its lock;
 * any thread reads (relaxed atomics: a snapshot may mix the values just
 * before and just after a wake-up). The last minute's: base/rate_window. */
struct wake_tally {
	_Atomic uint64_t total[WAKE_SOURCES];
	_Atomic uint32_t detail[WAKE_SOURCES]; /* the last wake-up's */
	_Atomic uint32_t epoch[RATE_BUCKETS];
	_Atomic uint32_t count[RATE_BUCKETS][WAKE_SOURCES];
};

/* The vCPU's thread: one wake-up from @s at @now. */
void wake_tally_add(struct wake_tally *t, int s, uint32_t detail,
		    uint64_t now);
/* Any thread: wake-ups from @s in the last minute at @now, and the span
 * they were counted over (*@span_ns, the current bucket's part in). */
uint64_t wake_tally_recent(const struct wake_tally *t, int s, uint64_t now,
			   uint64_t *span_ns);

#endif
