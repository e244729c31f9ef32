/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The hooks thread (hooks.c): a reader of the event queue that runs the
 * VM's libvirt-style hooks (common/hookrun.h) for its start, each change
 * of full idle and its stop. Pending idle changes are coalesced: the
 * latest state wins, and an idle hook that would repeat the last one run
 * is dropped (counted), so the hooks see "idle begin" and "idle end"
 * alternate, between "started" first and "stopped" last.
 */
#ifndef VMM_EXPORT_HOOKS_H
#define VMM_EXPORT_HOOKS_H

#include <stdint.h>

#include "export/export.h"

/* Main thread, after status_init and before the vCPUs start: run
 * "started", then follow the event queue. A --hooks DIR that is not a
 * readable directory: one warning and no hooks (returns 0). */
int hooks_start(struct vm *vm, const struct export_config *cfg);
/* Main thread, after the vCPUs and the housekeeping thread have stopped:
 * the last changes' hooks, "idle end" if the VM was fully idle, then
 * "stopped"; returns once they have run (each bounded by its timeout). */
void hooks_stop(void);
/* Any thread. */
void hooks_counts(uint64_t *run, uint64_t *failed, uint64_t *dropped);

#endif
