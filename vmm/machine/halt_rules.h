/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The adaptive rules of a vCPU's HLT wait (vcpu_halt.c), as pure
 * functions: the halt-polling window after a halt, as KVM's halt_poll_ns
 * moves (virt/kvm/kvm_main.c, grow_halt_poll_ns / shrink_halt_poll_ns:
 * grow 2 from 10 us, shrink 2), and the timer advance after a timed wake,
 * as KVM's lapic_timer_advance_ns (an eighth of the error, kept within
 * 0..max here), one per decade of the sleep (timer_advance_class).
 * Checked against KVM's rule by halt-rules-unit.
 */
#ifndef VMM_MACHINE_HALT_RULES_H
#define VMM_MACHINE_HALT_RULES_H

#include <stdbool.h>
#include <stdint.h>

#define HALT_POLL_GROW_START_NS 10000ull /* KVM's halt_poll_ns_grow_start */
#define ADVANCE_ADJUST_STEP 8 /* KVM's LAPIC_TIMER_ADVANCE_ADJUST_STEP */

/*
 * The window after a halt of @halt_ns, from @cur, with --halt-poll-ns
 * @max (0: polling off, the window stays as it is). @valid: the wake-up
 * was an interrupt (not a pause or a stop). A wake-up within the window:
 * as it is. An invalid wake-up, or a window that was open and a halt that
 * outlasted @max: halved (to 0 below the start). A halt shorter than @max
 * that the window missed: doubled (from 10 us), at most @max.
 */
static inline uint64_t halt_poll_next(uint64_t cur, uint64_t halt_ns,
				      uint64_t max, bool valid)
{
	if (!max)
		return cur;
	if (!valid || (cur && halt_ns > max)) {
		cur /= 2;
		return cur < HALT_POLL_GROW_START_NS ? 0 : cur;
	}
	if (halt_ns > cur && halt_ns < max && cur < max) {
		cur = cur ? cur * 2 : HALT_POLL_GROW_START_NS;
		return cur > max ? max : cur;
	}
	return cur;
}

/*
 * The timer advance is learned apart for each decade of the sleep it
 * ends: how late a host wakes a thread grows with how long its CPU slept
 * (a deeper idle state; a hypervisor below that stopped polling for it),
 * on these hosts from about 25 us after 0.2 ms to about 75 us after 10 ms.
 * One lead for all would be too long for the short sleeps of a busy VM
 * (CPU spun for nothing) and too short for a wake from full idle, which
 * comes only after the VM has been idle for milliseconds (the last two
 * classes). A class is picked by the sleep ahead when the wait begins
 * (its deadline - now) and learns from the wakes of that class only.
 */
#define TIMER_ADVANCE_CLASSES 4
#define TIMER_ADVANCE_CLASS0_NS 100000ull /* class 0: sleeps below this */

static inline unsigned int timer_advance_class(uint64_t sleep_ns)
{
	unsigned int c = 0;

	for (uint64_t b = TIMER_ADVANCE_CLASS0_NS;
	     c < TIMER_ADVANCE_CLASSES - 1 && sleep_ns >= b; b *= 10)
		c++;
	return c;
}

/* The lead after a wake that came @err_ns after the deadline (< 0:
 * before): moved by an eighth of the error, within 0..@max. */
static inline uint64_t timer_advance_next(uint64_t cur, int64_t err_ns,
					  uint64_t max)
{
	int64_t step = err_ns / ADVANCE_ADJUST_STEP;

	if (step >= 0)
		return cur + (uint64_t)step > max ? max : cur + (uint64_t)step;
	return (uint64_t)-step > cur ? 0 : cur - (uint64_t)-step;
}

#endif
