/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The stop signals: SIGINT, SIGTERM and SIGHUP end the VM with status
 * 128 + the signal. The main thread blocks them before any other thread
 * starts and reads them from a signalfd once the VM runs; before that, a
 * long phase of the start (loading) takes them with vm_stop_signal_take.
 */
#ifndef VMM_BASE_SIGNALS_H
#define VMM_BASE_SIGNALS_H

#include <signal.h>

/* The stop signals into @set (emptied first). */
void vm_stop_signals(sigset_t *set);

/* Main thread, with the stop signals blocked and before anything waits
 * for them: takes a pending stop signal and returns its number, or
 * returns 0 at once. */
int vm_stop_signal_take(void);

#endif
