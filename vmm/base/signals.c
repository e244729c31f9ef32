/* SPDX-License-Identifier: GPL-2.0-only */
/* The stop signals (signals.h). */
#include <signal.h>
#include <time.h>

#include "base/signals.h"

void vm_stop_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
}

int vm_stop_signal_take(void)
{
	static const struct timespec now;
	sigset_t set;
	int sig;

	vm_stop_signals(&set);
	sig = sigtimedwait(&set, NULL, &now);
	return sig > 0 ? sig : 0;
}
