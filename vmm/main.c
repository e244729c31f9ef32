/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The VM's lifetime: the only file that wires the layers together
 * (base, machine, idle, export; see vmm/README.md), and the signals. The
 * options are options.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "base/error.h"
#include "base/housekeeping.h"
#include "base/sched.h"
#include "base/signals.h"
#include "base/time.h"
#include "export/export.h"
#include "idle/idle.h"
#include "machine/devices/devices.h"
#include "machine/devices/device_table.h"
#include "machine/kvm_vm.h"
#include "machine/loader.h"
#include "machine/msr.h"
#include "machine/pause.h"
#include "machine/vcpu.h"
#include "machine/vm.h"
#include "options.h"

/* Sleeps until the VM stops by itself or a stop signal arrives. */
static void wait_for_stop(int sig_fd)
{
	struct pollfd fds[2] = {
		{ .fd = vm_stop_fd(), .events = POLLIN },
		{ .fd = sig_fd, .events = POLLIN },
	};
	struct signalfd_siginfo si;

	while (!vm_stopping()) {
		if (poll(fds, 2, -1) < 0 && errno != EINTR)
			break;
		if ((fds[1].revents & POLLIN) &&
		    read(sig_fd, &si, sizeof(si)) == sizeof(si)) {
			if (si.ssi_signo == SIGUSR2)
				idle_external_kick();
			else
				vm_stop(VMM_EXIT_SIGNAL_BASE +
					(int)si.ssi_signo);
		}
	}
}

int main(int argc, char **argv)
{
	static struct vm vm;
	struct vm_options opts = { 0 };
	sigset_t stop_sigs;
	int sig_fd, status;

	/* stdout's FILE carries --help only: the guest's output goes to fd 1
	 * from its own thread (serial_out.c), so that nothing on the exit
	 * path flushes a stdout that may be blocked for good. */
	status = parse_options(argc, argv, &opts);
	if (status) {
		free(opts.machine.modules);
		return status;
	}

	vmm_stderr_init();
	/* Stop signals go to the signalfd; every thread inherits the mask. */
	vm_stop_signals(&stop_sigs);
	sigaddset(&stop_sigs, SIGUSR2); /* not a stop: ends full idle */
	pthread_sigmask(SIG_BLOCK, &stop_sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	sig_fd = signalfd(-1, &stop_sigs, SFD_CLOEXEC);
	if (vm_stop_init() < 0 || sig_fd < 0)
		return vmm_fail(VMM_EXIT_KVM, "eventfd/signalfd: %s",
				strerror(errno)), vm_status();

	time_init(); /* the VM's uptime counts from here */
	/* an --idle-memory pass shows in the metrics file, in full idle too */
	idle_memory_set_notify(export_counters_changed);
	sched_slice_configure(opts.sched_slice_ns); /* before any thread */
	if ((opts.stats_json && stats_check(opts.stats_json)) ||
	    kvm_vm_create(&vm, &opts.machine) ||
	    loader_load(&vm, &opts.machine) ||
	    devices_init(&vm, opts.devices_on) || msr_vm_setup(&vm) || vcpus_create(&vm) ||
	    idle_init(&vm, &opts.idle) || pause_init(&vm) ||
	    /* per vCPU: the LAPIC timer and the pv tick; the idle layer's
	     * tick, its kick and hold backstops and --idle-memory's timer;
	     * the RTC (hk_timer_arm drops a timer when full) */
	    housekeeping_start(2 * vm.ncpus + 5) || serial_output_start() ||
	    serial_input_start() ||
	    export_start(&vm, &opts.export) || vcpus_start(&vm)) {
		vm_stop(VMM_EXIT_KVM); /* no-op when a message set the status */
	} else {
		wait_for_stop(sig_fd);
	}

	vcpus_stop(&vm);
	vcpus_join(&vm);
	idle_memory_stop(); /* before the threads it wakes stop */
	housekeeping_stop();
	serial_input_stop();
	serial_output_stop(); /* bounded: stdout may be blocked for good */
	idle_flush(); /* the last log lines; wake the event readers */
	export_stop();
	status = vm_status();
	if (opts.stats_json && vm.vcpus &&
	    stats_write(&vm, opts.stats_json, status))
		status = VMM_EXIT_STATS;
	idle_fini();
	kvm_vm_destroy(&vm);
	if (vmm_stderr_dropped())
		vmm_warn("%" PRIu64 " lines to stderr dropped: it was not "
			 "being read", vmm_stderr_dropped());
	free(opts.machine.modules);
	return status;
}
