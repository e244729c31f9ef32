/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The one error pattern, and the VM's stop. Every failure goes through
 * vmm_fail(), which prints one "PROGRAM: <message>" line on stderr (the
 * first failure only; PROGRAM is the name it was run by: vmm in the build
 * tree), records the exit status and stops the VM; it returns -1 so that
 * callers can `return vmm_fail(...)`. Any thread, any time.
 */
#ifndef VMM_BASE_ERROR_H
#define VMM_BASE_ERROR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * Exit status of the process. A guest's write of V to the debug-exit port
 * makes the VMM exit with V & 0xff, as is; the VMM's own failures use
 * 110..115 (110..119 are reserved for them) and a stop by signal 128 +
 * the signal number, so a guest's code below 110 or from 120 to 123 is
 * never ambiguous. Nothing of the VMM's own is 124..127: those are
 * timeout(1)'s and the shell's.
 */
enum vmm_status {
	VMM_EXIT_USAGE = 110,        /* bad option, missing kernel */
	VMM_EXIT_IMAGE = 111,        /* unreadable/bad ELF, no multiboot header,
				      * RAM too small for the image */
	VMM_EXIT_KVM = 112,          /* no /dev/kvm, missing capability, too
				      * many vCPUs, a KVM ioctl failed */
	VMM_EXIT_TRIPLE_FAULT = 113, /* KVM_EXIT_SHUTDOWN */
	VMM_EXIT_INTERNAL = 114,     /* emulation failure, failed entry,
				      * unknown exit reason */
	VMM_EXIT_STATS = 115,        /* --stats-json could not be written */
	VMM_EXIT_SIGNAL_BASE = 128,  /* + SIGINT/SIGTERM/SIGHUP */
};

int vmm_fail(int status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void vmm_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Warnings a guest can trigger at will (unknown ports, MSRs, bad DMA) come
 * from a budget per kind: the first VMM_WARN_BURST lines are printed, then
 * one "further <what> not logged" line, then nothing, so that a guest
 * touching every port cannot flood the log. One static budget per call
 * site, VMM_WARN_LIMIT("..."); any thread.
 */
#define VMM_WARN_BURST 16
struct vmm_warn_limit {
	atomic_uint count; /* lines asked for so far */
	const char *what;  /* "unknown ports", in the last line */
};
#define VMM_WARN_LIMIT(what) { 0, what }
void vmm_warn_limited(struct vmm_warn_limit *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The main thread, before any other thread starts: the VMM's lines on
 * stderr (vmm_fail, vmm_warn) will never block; those stderr does not
 * take at once are dropped and counted (vmm_stderr_dropped). */
void vmm_stderr_init(void);
uint64_t vmm_stderr_dropped(void); /* any thread */
/* Where those lines go, for a writer of its own that must not block
 * either (--sysidle-log -): non-blocking unless a regular file. */
int vmm_stderr_fd(void);
/* "PROGRAM: " and the message, without stopping anything (once the VM has
 * stopped, where vmm_fail() says nothing more). */
void vmm_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The main thread, before any other thread starts: the eventfd that
 * becomes readable once the VM stops (vm_stop_fd). -1 with errno set. */
int vm_stop_init(void);
int vm_stop_fd(void);
void vm_stop(int status); /* first caller's status wins */
bool vm_stopping(void);
int vm_status(void);

#endif
