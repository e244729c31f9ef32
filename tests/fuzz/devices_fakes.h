/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What the device models call outside their files, for fuzz-devices
 * (devices_fakes.c): the port/MMIO bus table and the MSR ranges (filled
 * again by the devices' own *_init for every input), the housekeeping
 * timers (fired only when the input says so), a clock that moves only
 * when the input says so, guest RAM in a buffer, and the vCPU's side
 * (kicks, KVM's APIC base, S3).
 */
#ifndef FUZZ_DEVICES_FAKES_H
#define FUZZ_DEVICES_FAKES_H

#include <stdbool.h>
#include <stdint.h>

#include "machine/bus.h"
#include "machine/vcpu.h"

#define FAKE_RAM_SIZE (1u << 20)
#define FAKE_MAX_TIMERS 16

extern uint64_t fake_now;
extern unsigned int fake_kicks, fake_sleeps, fake_resumes;

/* Empties the bus table (but for what fake_keep kept), the MSR ranges and
 * the timer list: called before the devices' *_init run again for a new
 * input. */
void fake_reset(void);
/* The regions registered so far stay across fake_reset: the devices that
 * are set up once (their *_init is not safe to repeat). */
void fake_keep(void);
/* The registered handler for @addr in @space: true and @data filled /
 * consumed as bus_access would, false when no device claims it (a read
 * is then all-ones, as on the real bus). */
bool fake_bus_access(struct vcpu *v, enum bus_space space, uint64_t addr,
		     uint8_t *data, unsigned int len, bool is_write);
/* A registered MSR range's handler for @index, as msr.c would call it:
 * 0, or -1 for #GP; 1 when no range holds @index. */
int fake_msr_access(struct vcpu *v, uint32_t index, uint64_t *val,
		    bool is_write);
/* Fires, earliest first, every armed timer whose deadline is at or before
 * fake_now (a timer a fire re-arms in the past fires again, up to a
 * bound). Returns how many fired. */
unsigned int fake_timers_run(void);
/* The earliest armed deadline, or UINT64_MAX when none is armed. */
uint64_t fake_timers_next(void);
/* The reset hook pvtick registered (vcpu_set_reset_hook), or NULL. */
void (*fake_reset_hook(void))(struct vcpu *v);

#endif
