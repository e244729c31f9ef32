/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The devices fuzz target: what fuzz_devices.c (the input, its steps,
 * the VM of each input, the entry point) and fuzz_devices_access.c (the
 * accesses and the checks on them, the invariants on state) share.
 */
#ifndef FUZZ_DEVICES_H
#define FUZZ_DEVICES_H

#include <stdbool.h>
#include <stdint.h>

#include "machine/vcpu.h"
#include "machine/vm.h"

#define NCPUS_MAX 2
#define IOAPIC_PINS 24
#define RTE_RO_LOW (APIC_SEND_PENDING | APIC_REMOTE_IRR)

/* The VM of the current input (fuzz_devices.c). */
extern struct machine_config cfg;
extern struct vm vm;

/* What the harness remembers of what the guest wrote. */
struct fuzz_shadow {
	uint32_t ioapic_regsel;
	uint32_t rte[IOAPIC_PINS][2];
	uint16_t fw_key;
	uint32_t fw_offset;
	uint8_t rtc_index, rtc_nmi;
	uint64_t pvt_delivered0[NCPUS_MAX], pvt_missed_read[NCPUS_MAX];
	uint8_t pic_base[2]; /* ICW2 as written, per chip */
	uint8_t pic_icw_next[2];
};
extern struct fuzz_shadow sh;

/* fuzz_devices_access.c: an I/O port access (@len 1, 2 or 4), an MMIO
 * access (@len 1..8; @v's local APIC first, then the bus), an
 * RDMSR/WRMSR; @val's low @len bytes are written. Each checks what it
 * reads. */
void pio(struct vcpu *v, uint16_t port, unsigned int len, bool is_write,
	 uint64_t val);
void mmio(struct vcpu *v, uint64_t addr, unsigned int len, bool is_write,
	  uint64_t val);
void msr(struct vcpu *v, uint32_t index, bool is_write, uint64_t val);
/* After every step: the state invariants of every vCPU. */
void check_all(void);

#endif
