/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The VMM's command line and --config file: what they say for each
 * layer (vm_options), --help, --version, from one option table
 * (options.c, on common/options_table.h). Used by main.c only.
 */
#ifndef VMM_OPTIONS_H
#define VMM_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "export/export.h"
#include "idle/idle.h"
#include "machine/vm.h"

/* Latency defaults (bench/latency.py, bench/vmm-rtt.py). */
#define HALT_POLL_DEFAULT_NS 200000
#define TIMER_ADVANCE_DEFAULT_NS 50000
#define SCHED_SLICE_DEFAULT_US 100

/* Everything the command line says, for each layer. */
struct vm_options {
	uint32_t devices_on; /* --device: bit (1 << index in device_table()) */
	struct machine_config machine;
	struct idle_config idle;
	struct export_config export;
	const char *stats_json;
	uint64_t sched_slice_ns; /* --sched-slice-us, 0: off */
};

/*
 * Fills @o from the --config file, if any, and @argv (the command line
 * wins). Returns 0, or the exit status after one message on stderr;
 * --help and --version print and exit 0. The strings @o points to live as
 * long as the process.
 */
int parse_options(int argc, char **argv, struct vm_options *o);

#endif
