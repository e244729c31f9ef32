/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * S3, suspend to RAM: every vCPU is put back in its INIT state and waits,
 * blocked, as for SIPI; RAM stays. The resume is a platform reset but for
 * RAM: the boot vCPU starts where the FACS firmware waking vector points,
 * as firmware would jump there (ACPI 6.x, 7.4.2 and 16.3), the others
 * wait for the OS's SIPI.
 */
#include <pthread.h>
#include <string.h>

#include "base/error.h"
#include "machine/acpi.h"
#include "machine/devices/devices.h"
#include "machine/pause.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

/* See acpi.h. The local APICs also leave x2APIC mode (a platform reset,
 * not only INIT); the reset itself is done by each vCPU's thread. */
void sleep_enter(struct vm *vm)
{
	for (unsigned int i = 0; i < vm->ncpus; i++) {
		struct vcpu *v = &vm->vcpus[i];

		pthread_mutex_lock(&v->lock);
		v->init_pending = true;
		v->sipi_pending = false;
		v->resume_pending = false;
		v->nmi_pending = false;
		v->lapic.base_msr = 0;
		vcpu_kick(v);
		pthread_mutex_unlock(&v->lock);
	}
}

static struct vmm_warn_limit vector_warn =
	VMM_WARN_LIMIT("S3 waking vectors above 4 GiB");

/* See acpi.h. A non-zero X_Firmware_Waking_Vector wins (32-bit protected
 * mode), else the real-mode Firmware_Waking_Vector. */
void sleep_resume(struct vm *vm)
{
	const uint8_t *facs = guest_ptr(vm, ACPI_FACS_ADDR, 64);
	struct vcpu *v = &vm->vcpus[0];
	uint32_t vec = 0;
	uint64_t xvec = 0;

	if (facs) {
		memcpy(&vec, facs + ACPI_FACS_WAKING_VECTOR, 4);
		memcpy(&xvec, facs + ACPI_FACS_X_WAKING_VECTOR, 8);
	}
	if (xvec >> 32) {
		vmm_warn_limited(&vector_warn, "S3 resume: "
				 "X_Firmware_Waking_Vector %#llx is above "
				 "4 GiB; using Firmware_Waking_Vector",
				 (unsigned long long)xvec);
		xvec = 0;
	}
	ioapic_reset();
	pthread_mutex_lock(&v->lock);
	v->resume_pending = true;
	v->resume_protected = xvec != 0;
	v->resume_addr = xvec ? (uint32_t)xvec : vec;
	vcpu_kick_for(v, PAUSE_REASON_TIMER); /* the RTC alarm woke it */
	pthread_mutex_unlock(&v->lock);
}
