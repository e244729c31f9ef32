/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The VMM's options: one table (vmm_options[]) from which common's
 * options library parses the --config file and the command line into
 * vm_options and writes --help and the errors; the opt-in devices come
 * from the machine's device table. Also the defaults that depend on the
 * kernel's name and the PID, and a bare kernel name looked for among the
 * installed guests.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/sched.h"
#include "base/uuid.h"
#include "machine/cpuid.h"
#include "machine/devices/device_table.h"
#include "machine/vm.h"
#include "options.h"
#include "hookrun.h" /* DEFAULT_HOOKS_DIR, --hook-timeout */
#include "options_table.h"

#define VMM_STR_(x) #x
#define VMM_STR(x) VMM_STR_(x)

static const char usage_head[] =
"Usage: sysidle-vmm [OPTION]... KERNEL\n"
"Run a Multiboot v1 ELF32 KERNEL on KVM with a userspace interrupt controller.\n"
"KERNEL given by a bare file name that is not in the current directory is\n"
"looked for in " SYSIDLE_GUESTDIR " (the guests installed\n"
"with the program: idle.elf, selftest.elf, burst.elf, pingpong.elf).\n"
"\n"
"Options:\n"
;

static const char usage_tail[] =
"\n"
"Signals: SIGUSR2 ends a full-idle period from outside (the tick restarts).\n"
"\n"
"Serial output: the guest's UART output goes to stdout through a 64 KiB\n"
"buffer and never holds the guest back: while stdout is not read (a paused\n"
"pager, a stuck pipe) what does not fit is dropped, counted on stderr at exit\n"
"and in --stats-json; at exit, buffered output gets at most 0.5 s.\n"
"\n"
"Devices: 16550 UART at 0x3f8 (stdout/stdin, IRQ 4), isa-debug-exit at 0xf4,\n"
"fw_cfg at 0x510/0x511, 8259A PIC pair at 0x20/0xa0 (ELCR 0x4d0/0x4d1; INTR\n"
"to vCPU 0's LINT0, ExtINT at start), IOAPIC at 0xfec00000, local APIC\n"
"(xAPIC at 0xfee00000 and x2APIC MSRs), CMOS RTC at 0x70/0x71 (IRQ 8),\n"
"ACPI PM registers at 0x600 (SCI: IRQ 9) with S3 and S5, ACPI tables at\n"
"0xe0000, PCI configuration mechanism #1 at 0xcf8 with a host bridge at\n"
"00:00.0, PIT ports ignored.\n"
"\n"
"Exit status:\n"
"  V          the guest wrote V to port 0xf4 (V & 0xff as is; 0 = success);\n"
"             a guest's code is never ambiguous below 110 and from 120 to\n"
"             123 (124..127 are also timeout(1)'s and the shell's own)\n"
"  0          also: the guest powered off through ACPI (S5)\n"
"  110        bad option or missing kernel; a bad --config file; a\n"
"             --sysidle-log or --metrics-file that cannot be written (a\n"
"             directory, a missing directory, a FIFO with no reader);\n"
"             --control PATH that exists and is not a socket (left as it\n"
"             is), is in use or has no directory\n"
"  111        kernel or module missing, unreadable or not a regular file\n"
"             (a FIFO, device or directory is refused), not a\n"
"             little-endian ELF32 i386 executable, no multiboot header in\n"
"             the first 8 KiB, a multiboot header requiring what the loader\n"
"             does not provide (flags 2-15, or the a.out kludge), or RAM\n"
"             too small for the image or module\n"
"  112        KVM unavailable or failing, or more vCPUs than KVM allows\n"
"  113        the guest triple-faulted (KVM_EXIT_SHUTDOWN)\n"
"  114        emulation failure, failed VM entry or unknown exit reason\n"
"  115        the --stats-json file cannot be written: at start (a\n"
"             directory, a missing directory), or at exit (a FIFO with no\n"
"             reader, a reader that took less than all of it in 1 s)\n"
"  116-119    reserved for the VMM\n"
"  128+SIG    stopped by SIGINT, SIGTERM or SIGHUP (130, 143, 129),\n"
"             also while loading\n";

/* --cpu FLAGS: the features turned off. */
static int parse_cpu(void *opts, const char *arg, char *bad, size_t badlen)
{
	struct vm_options *o = opts;

	return cpu_features_parse(arg, &o->machine.cpu_features_off, bad,
				  badlen);
}

/* --device NAME: one of the device table's opt-in devices; else -1 with
 * their names in @bad. */
static int parse_device(void *opts, const char *arg, char *bad, size_t badlen)
{
	struct vm_options *o = opts;
	int i = device_optional_index(arg);
	const struct device_desc *d;
	size_t n, len = 0;

	if (i >= 0) {
		o->devices_on |= 1u << i;
		/* the ACPI tables describe it (a DMAR) */
		if (!strcmp(arg, "intel-iommu"))
			o->machine.intel_iommu = true;
		return 0;
	}
	d = device_table(&n);
	for (size_t k = 0; k < n && len < badlen; k++)
		if (d[k].optional)
			len += (size_t)snprintf(bad + len, badlen - len, "%s%s",
						len ? ", " : "", d[k].name);
	return -1;
}

/* The command line's first --device: the file's are dropped. */
static void reset_devices(void *opts)
{
	struct vm_options *o = opts;

	o->devices_on = 0;
	o->machine.intel_iommu = false;
}

/* --help's list of the opt-in devices, from the device table. */
static void print_devices(FILE *out)
{
	size_t n;
	const struct device_desc *d = device_table(&n);

	for (size_t k = 0; k < n; k++) {
		if (!d[k].optional)
			continue;
		fprintf(out, "                     %s  ", d[k].name);
		for (const char *s = d[k].help; *s; s++) {
			fputc(*s, out);
			if (*s == '\n')
				fputs("                     ", out);
		}
		fputc('\n', out);
	}
}

/* --list-options: the opt-in devices' names. */
static void print_device_names(FILE *out)
{
	size_t n;
	const struct device_desc *d = device_table(&n);
	bool first = true;

	for (size_t k = 0; k < n; k++) {
		if (!d[k].optional)
			continue;
		fprintf(out, "%s%s", first ? "" : " ", d[k].name);
		first = false;
	}
}

/* --lapic-tick-max-hold SECONDS, 0.01 to 3600. */
static int parse_max_hold(void *opts, const char *arg, char *bad,
			  size_t badlen)
{
	struct vm_options *o = opts;
	char *end;
	double sec;

	(void)bad, (void)badlen;
	errno = 0;
	sec = strtod(arg, &end);
	if (errno || *end || end == arg || !(sec >= 0.01) || sec > 3600)
		return -1;
	o->idle.max_hold_ns = (uint64_t)(sec * 1e9);
	return 0;
}

/* --name NAME. */
static int parse_name(void *opts, const char *arg, char *bad, size_t badlen)
{
	struct vm_options *o = opts;

	(void)bad, (void)badlen;
	if (vm_name_check(arg))
		return -1;
	o->export.name = arg;
	return 0;
}

/* --uuid UUID, kept lowercase. */
static int parse_uuid(void *opts, const char *arg, char *bad, size_t badlen)
{
	static char uuid[UUID_STR_LEN];
	struct vm_options *o = opts;

	(void)bad, (void)badlen;
	if (uuid_parse(arg, uuid))
		return -1;
	o->export.uuid = uuid;
	return 0;
}

/* --control PATH|none. */
static int parse_control(void *opts, const char *arg, char *bad,
			 size_t badlen)
{
	struct vm_options *o = opts;

	(void)bad, (void)badlen;
	if (!*arg || strlen(arg) >= CONTROL_PATH_MAX)
		return -1;
	o->export.control = strcmp(arg, "none") ? arg : NULL;
	o->export.control_explicit = true;
	return 0;
}

/* --hook-timeout SECONDS. */
static int parse_hook_timeout(void *opts, const char *arg, char *bad,
			      size_t badlen)
{
	struct vm_options *o = opts;

	(void)bad, (void)badlen;
	return hooks_parse_timeout(arg, &o->export.hook_timeout_ns);
}

/* --sched-slice-us US|off. */
static int parse_sched_slice(void *opts, const char *arg, char *bad,
			     size_t badlen)
{
	struct vm_options *o = opts;

	(void)bad, (void)badlen;
	return sched_slice_parse(arg, &o->sched_slice_ns);
}

#define AT(f) OPT_FIELD(struct vm_options, f)

static const char *const tick_policies[] = { "honour", "catchup", "discard",
					     NULL };
static const char *const vcpu_timers[] = { "self", "housekeeping", NULL };
static const char *const injections[] = { "kvm-run", "ioctl", NULL };
static const char *const idle_memory_modes[] = { "off", "cold", "pageout",
						 NULL };

/* The VMM's options, in --help's order. */
static const struct opt_entry vmm_options[] = {
	{ .name = "config", .type = OPT_CONFIG, .flags = OPT_CLI_ONLY,
	  .metavar = "FILE",
	  .help = "read options from FILE first, one \"key = value\" per\n"
		  "line (a long option name as the key, \"kernel = FILE\"\n"
		  "for KERNEL; sysidle.conf(5)); the command line wins,\n"
		  "and its --module and --device replace the file's" },
	{ .name = "mem", .type = OPT_SIZE, AT(machine.mem_size), .min = 1,
	  .max = 1ull << 40, .def = 256ull << 20, .metavar = "SIZE",
	  .expect = "expected a size such as 256M or 1G",
	  .help = "guest RAM (default {default}); SIZE is a number with an\n"
		  "optional K, M or G suffix (no suffix: MiB); at most\n"
		  "this host's RAM and swap together" },
	{ .name = "cpus", .type = OPT_UINT, AT(machine.ncpus), .min = 1,
	  .max = VMM_MAX_CPUS, .def = 1, .metavar = "N",
	  .expect = "expected a number from {min} to {max}",
	  .help = "number of vCPUs, {min}..{max} (and at most what this host's\n"
		  "KVM allows); each is a host thread (default {default}); more\n"
		  "than 8 per host CPU runs, with a warning. vCPU i has APIC\n"
		  "ID i, in the MADT's x2APIC entries from 255 on: more than\n"
		  "255 need x2APIC (--cpu -x2apic is then refused)" },
	{ .name = "append", .type = OPT_STRING, AT(machine.append),
	  .def_str = "", .metavar = "CMDLINE",
	  .help = "kernel command line (multiboot cmdline is\n"
		  "\"KERNEL CMDLINE\", as QEMU and GRUB pass it)" },
	{ .name = "module", .type = OPT_LIST, .flags = OPT_REPLACE,
	  AT(machine.modules),
	  .count_offset = offsetof(struct vm_options, machine.nmodules),
	  .metavar = "FILE",
	  .help = "load FILE as a multiboot module (repeatable)" },
	{ .name = "cpu", .type = OPT_CUSTOM, .parse = parse_cpu,
	  .metavar = "FLAGS",
	  .expect = ": '{bad}': expected +FEATURE or -FEATURE, FEATURE x2apic, "
		    "tsc-deadline or pv-eoi",
	  .help = "CPU features the guest sees: comma-separated +FEATURE\n"
		  "or -FEATURE, FEATURE x2apic, tsc-deadline (both on by\n"
		  "default) or pv-eoi (off by default). -x2apic:\n"
		  "CPUID.1:ECX.x2APIC clear and IA32_APIC_BASE.EXTD\n"
		  "reserved (#GP); -tsc-deadline: CPUID.1:ECX.TSC_DEADLINE\n"
		  "clear, no TSC-deadline timer mode, IA32_TSC_DEADLINE\n"
		  "#GP; +pv-eoi: KVM's signature at CPUID 0x40000100\n"
		  "with its PV EOI (MSR 0x4b564d04): a guest that uses it\n"
		  "ends an interrupt without an exit (less host CPU per\n"
		  "interrupt; measured on a nested host, a wake from full\n"
		  "idle by IPI a few percent slower with the leaves\n"
		  "there)" },
	{ .name = "device", .type = OPT_CUSTOM, .flags = OPT_REPLACE,
	  .parse = parse_device, .reset = reset_devices,
	  .help_more = print_devices, .values = print_device_names,
	  .metavar = "NAME",
	  .expect = " '{arg}': expected one of: {bad}",
	  .help = "add an opt-in device (repeatable); NAME is one of:" },
	{ .name = "stats-json", .type = OPT_STRING, AT(stats_json),
	  .metavar = "FILE",
	  .help = "write per-vCPU exit counts, HLT exits, interrupts\n"
		  "injected, time halted, the housekeeping thread's\n"
		  "host wake-ups, the pause counters and the bytes of\n"
		  "guest serial output dropped to FILE at exit; FILE is\n"
		  "checked at start (exit 115); a FIFO needs a reader at\n"
		  "exit, which gets 1 s to take it all" },
	{ .name = "sysidle", .type = OPT_FLAG, AT(idle.sysidle),
	  .help = "detect the fully idle guest (all vCPUs halted, the\n"
		  "timekeeper taking only its tick) and then stop its\n"
		  "paravirtual tick and the VMM's own periodic work;\n"
		  "guest LAPIC timers are honoured (the timekeeper's\n"
		  "periodic one: see --lapic-tick-policy)" },
	{ .name = "sysidle-log", .type = OPT_STRING, AT(idle.log),
	  .metavar = "FILE",
	  .help = "one line per idle state change and tick stop/restart\n"
		  "(\"-\": stderr); needs --sysidle. A FIFO needs its\n"
		  "reader at start; lines it does not take at once are\n"
		  "dropped and counted (stderr at exit, --stats-json)" },
	{ .name = "timekeeper", .type = OPT_UINT, AT(idle.timekeeper),
	  .max = VMM_MAX_CPUS - 1, .metavar = "N",
	  .expect = "expected a vCPU number",
	  .help = "the timekeeper vCPU (default {default}; below --cpus)" },
	{ .name = "lapic-tick-policy", .type = OPT_ENUM,
	  AT(machine.lapic_tick_policy), .names = tick_policies,
	  .expect = "expected honour, catchup or discard",
	  .help = "what becomes of a guest's periodic LAPIC timer ticks\n"
		  "not taken when due (as libvirt's tickpolicy):\n"
		  "honour (default): never held back; late ones\n"
		  "coalesce into one, as on hardware. catchup: with\n"
		  "--sysidle the timekeeper's tick is held back in full\n"
		  "idle; every tick due is delivered afterwards, the\n"
		  "next one at the guest's EOI of the last. discard:\n"
		  "held back too; one tick for the whole held time\n"
		  "(merge).\n"
		  "Under both, a guest that sleeps on that tick alone\n"
		  "wakes late, by up to --lapic-tick-max-hold" },
	{ .name = "lapic-tick-max-hold", .type = OPT_CUSTOM,
	  .parse = parse_max_hold, .metavar = "SECONDS",
	  .expect = "expected seconds from 0.01 to 3600",
	  .help = "hold the tick back at most this long\n"
		  "(default 2; 0.01 to 3600; needs catchup or discard)" },
	{ .name = "idle-memory", .type = OPT_ENUM, AT(idle.idle_memory),
	  .names = idle_memory_modes, .expect = "expected cold, pageout or off",
	  .help = "with --sysidle: once the VM has been fully idle for\n"
		  "--idle-memory-delay, advise its guest RAM's resident\n"
		  "pages to the host kernel, once per full-idle period:\n"
		  "cold (MADV_COLD: reclaimed first under memory\n"
		  "pressure) or pageout (MADV_PAGEOUT: written to swap\n"
		  "now, freed at the first pressure); the guest's memory\n"
		  "is kept (faulted back in when touched). Anonymous\n"
		  "memory goes only to swap: on a host without swap\n"
		  "nothing is given back (warned at start).\n"
		  "Default off" },
	{ .name = "idle-memory-delay", .type = OPT_UINT,
	  AT(idle.idle_memory_delay_ns), .min = 1,
	  .max = IDLE_MEMORY_DELAY_MAX_S, .scale = 1000000000,
	  .def = IDLE_MEMORY_DELAY_DEFAULT_S, .metavar = "SECONDS",
	  .expect = "expected seconds from {min} to {max}",
	  .help = "the time fully idle before the\n"
		  "guest RAM is advised (default {default}; {min} to\n"
		  "{max}; needs --idle-memory cold or pageout)" },
	{ .name = "housekeeping-cpu", .type = OPT_UINT,
	  .flags = OPT_NO_DEFAULT, AT(idle.housekeeping_cpu), .max = 1023,
	  .metavar = "N", .expect = "expected a host CPU number",
	  .help = "pin the housekeeping thread to host CPU N, {min}\n"
		  "to {max} (with --sysidle: only while the guest is not\n"
		  "fully idle)" },
	{ .name = "name", .type = OPT_CUSTOM, .parse = parse_name,
	  .metavar = "NAME",
	  .expect = "expected 1 to 80 bytes, no '/' and no control characters",
	  .help = "the VM's name in the control socket, metrics and\n"
		  "hooks (default: the kernel file's stem and the PID,\n"
		  "e.g. idle-4242); any characters but '/' and control\n"
		  "characters, at most 80 bytes" },
	{ .name = "uuid", .type = OPT_CUSTOM, .parse = parse_uuid,
	  .metavar = "UUID",
	  .expect = "expected a uuid of 32 hex digits as 8-4-4-4-12, e.g. "
		    "0f4c1a2b-3c4d-5e6f-8a9b-0123456789ab",
	  .help = "the VM's uuid in the control socket, metrics and\n"
		  "hooks: 32 hex digits as 8-4-4-4-12 (either case;\n"
		  "shown lowercase). Default: the version-5 uuid\n"
		  "(SHA-1) of the name's bytes in the namespace\n"
		  VMM_UUID_NAMESPACE ", so\n"
		  "the same --name keeps its uuid across runs" },
	{ .name = "control", .type = OPT_CUSTOM, .parse = parse_control,
	  .metavar = "PATH",
	  .expect = "expected a socket path of at most 107 bytes, or none",
	  .help = "the control socket (default /run/sysidle/NAME.sock,\n"
		  "its directory created mode 0700; \"none\": no socket);\n"
		  "see vmm/export/README.md for the protocol,\n"
		  "build/sysidlectl for a client" },
	{ .name = "metrics-file", .type = OPT_STRING, .flags = OPT_NONEMPTY,
	  AT(export.metrics_file), .metavar = "PATH",
	  .expect = ": expected a path",
	  .help = "write the idle state in Prometheus text format to\n"
		  "PATH (atomically) at each state change and at most\n"
		  "once a second while the VM is not fully idle (not\n"
		  "periodically while it stays fully idle: its samples\n"
		  "say how to extrapolate)" },
	{ .name = "hooks", .type = OPT_STRING, .flags = OPT_NONEMPTY,
	  AT(export.hooks_dir), .def_str = DEFAULT_HOOKS_DIR, .metavar = "DIR",
	  .expect = ": expected a directory",
	  .help = "run DIR/vm and DIR/vm.d/* on start, stop and each\n"
		  "change of full idle, as libvirt runs its hooks\n"
		  "(default {default};\n"
		  "absent: no hooks)" },
	{ .name = "hook-timeout", .type = OPT_CUSTOM,
	  .parse = parse_hook_timeout, .def_str = "10", .metavar = "SECONDS",
	  .expect = HOOKS_TIMEOUT_USAGE,
	  .help = "kill a hook still running after SECONDS\n"
		  "(default {default}); at exit, the hook running and then the\n"
		  "last hooks get one SECONDS each in all" },
	{ .name = "halt-poll-ns", .type = OPT_UINT,
	  AT(machine.halt_poll_max_ns), .max = 10000000,
	  .def = HALT_POLL_DEFAULT_NS, .metavar = "NS",
	  .expect = "expected ns from {min} to {max}",
	  .help = "a halted vCPU watches for its next interrupt for up\n"
		  "to NS ns before it blocks (0: never), the window\n"
		  "adapting as KVM's halt_poll_ns: grown while wake-ups\n"
		  "come just after it, shrunk when the halt outlasts NS.\n"
		  "Never with --sysidle while the VM is heading into\n"
		  "full idle: an idle VM still costs nothing.\n"
		  "Default {default}; {min} to {max}" },
	{ .name = "timer-advance-ns", .type = OPT_UINT,
	  AT(machine.timer_advance_max_ns), .max = 10000000,
	  .def = TIMER_ADVANCE_DEFAULT_NS, .metavar = "NS",
	  .expect = "expected ns from {min} to {max}",
	  .help = "a halted vCPU wakes up to NS ns before its LAPIC\n"
		  "timer deadline and spins to it, the lead tuned to how\n"
		  "late its wake-ups come (as KVM's\n"
		  "lapic_timer_advance_ns), learned apart for each\n"
		  "decade of the sleep (<0.1, <1, <10, >=10 ms: a wake\n"
		  "from full idle needs a longer lead than one from a\n"
		  "short sleep); never delivered early; 0:\n"
		  "none. Default {default}; {min} to {max}" },
	{ .name = "vcpu-timers", .type = OPT_ENUM,
	  AT(machine.timers_on_housekeeping), .names = vcpu_timers,
	  .expect = "expected self or housekeeping",
	  .help = "self (default): a halted vCPU's LAPIC timer is the\n"
		  "timeout of its own wait, no other thread on its wake\n"
		  "path; housekeeping: every guest timer is served by\n"
		  "the housekeeping thread, which wakes the vCPU" },
	{ .name = "sched-slice-us", .type = OPT_CUSTOM,
	  .parse = parse_sched_slice, .def_str = VMM_STR(SCHED_SLICE_DEFAULT_US),
	  .metavar = "US|off",
	  .expect = "expected us from 100 to 100000, or off",
	  .help = "the vCPU and housekeeping threads ask the\n"
		  "kernel for a US us scheduler slice (sched_setattr\n"
		  "sched_runtime; Linux 6.12 or later, 100 to 100000),\n"
		  "so that a woken one preempts a busy task sooner;\n"
		  "older kernels ignore it. Default {default}; off: the\n"
		  "kernel's own" },
	{ .name = "interrupt-injection", .type = OPT_ENUM,
	  AT(machine.inject_by_ioctl), .names = injections,
	  .expect = "expected kvm-run or ioctl",
	  .help = "kvm-run (default, where KVM offers KVM_CAP_SYNC_REGS\n"
		  "with the vCPU events): an interrupt goes in with the\n"
		  "KVM_RUN that delivers it; ioctl: a KVM_INTERRUPT call\n"
		  "of its own before it" },
	{ .name = "version", .type = OPT_VERSION, .flags = OPT_CLI_ONLY,
	  .help = "print the version and exit 0" },
	{ .name = "help", .short_name = 'h', .type = OPT_HELP,
	  .flags = OPT_CLI_ONLY, .help = "print this help and exit 0" },
	{ .name = "list-options", .type = OPT_LIST_OPTIONS,
	  .flags = OPT_CLI_ONLY | OPT_HIDDEN },
};

/* The options being parsed: the --config file's, then the command
 * line's; the parsed strings point into it for the process's life. */
static struct opt_parser parser;

/* The cross-option checks and the KERNEL, after the table's parse. */
static int check_options(struct vm_options *o)
{
	if (o->idle.log && !o->idle.sysidle)
		return opt_error(&parser, NULL, "--sysidle-log needs --sysidle");
	if (o->idle.max_hold_ns && (!o->idle.sysidle ||
	    o->machine.lapic_tick_policy == LAPIC_TICK_HONOUR))
		return opt_error(&parser, NULL, "--lapic-tick-max-hold needs "
				 "--sysidle and --lapic-tick-policy catchup "
				 "or discard");
	if (o->machine.ncpus > 255 && (o->machine.cpu_features_off & CPU_F_X2APIC))
		return opt_error(&parser, NULL, "--cpus %u needs x2APIC (APIC "
				 "IDs of 255 and up cannot be addressed in xAPIC "
				 "mode): drop -x2apic from --cpu",
				 o->machine.ncpus);
	if (o->idle.idle_memory != IDLE_MEMORY_OFF && !o->idle.sysidle)
		return opt_error(&parser, NULL, "--idle-memory needs --sysidle");
	if (opt_given(&parser, "idle-memory-delay") &&
	    o->idle.idle_memory == IDLE_MEMORY_OFF)
		return opt_error(&parser, NULL, "--idle-memory-delay needs "
				 "--idle-memory cold or pageout");
	o->machine.kernel = opt_positional(&parser, 0);
	if (!o->machine.kernel)
		return opt_error(&parser, NULL, "missing KERNEL");
	return 0;
}

/* A KERNEL given by a bare file name that is not in the current
 * directory: the installed guest of that name, if there is one. */
static int find_guest(struct vm_options *o)
{
	static char path[PATH_MAX];
	const char *k = o->machine.kernel;

	if (strchr(k, '/') || access(k, F_OK) == 0 || errno != ENOENT)
		return 0;
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", SYSIDLE_GUESTDIR, k) <
	    sizeof(path) && access(path, F_OK) == 0) {
		o->machine.kernel = path;
		return 0;
	}
	fprintf(stderr, "%s: kernel '%s': no such file in the current "
		"directory nor in %s\n", program_invocation_short_name, k,
		SYSIDLE_GUESTDIR);
	return -1;
}

/* The defaults that depend on the kernel and the PID: --name and
 * --control. The strings live as long as the process. */
static int default_names(struct vm_options *o)
{
	static char name[96], path[CONTROL_PATH_MAX + 32];
	const char *base = strrchr(o->machine.kernel, '/');
	size_t len;

	if (!o->export.name) {
		base = base ? base + 1 : o->machine.kernel;
		len = strcspn(base, ".");
		if (len == 0 || len > 60)
			len = len ? 60 : strlen(base);
		snprintf(name, sizeof(name), "%.*s-%d", (int)len, base,
			 (int)getpid());
		if (vm_name_check(name))
			snprintf(name, sizeof(name), "vm-%d", (int)getpid());
		o->export.name = name;
	}
	if (!o->export.control_explicit) {
		snprintf(path, sizeof(path), "%s/%s.sock", DEFAULT_CONTROL_DIR,
			 o->export.name);
		if (strlen(path) >= CONTROL_PATH_MAX)
			return opt_error(&parser, o->export.name, "--name '%s': "
					 "too long for a control socket path; "
					 "give --control", o->export.name) ?
			       VMM_EXIT_USAGE : 0;
		o->export.control = path;
	}
	return 0;
}

/* Fills @o from argv; returns 0, or the exit status after a message. */
int parse_options(int argc, char **argv, struct vm_options *o)
{
	static struct opt_program prog = {
		.version_name = "sysidle-vmm",
		.usage_head = usage_head,
		.usage_tail = usage_tail,
		.hint = " (see %s --help)\n",
		.missing = "option '%s' needs an argument",
		.unknown = "unknown option '%s'",
		.positional_key = "kernel",
		.max_positional = 1,
		.entries = vmm_options,
		.nentries = sizeof(vmm_options) / sizeof(vmm_options[0]),
	};
	int r;

	prog.name = program_invocation_short_name;
	o->machine.cpu_features_off = CPU_F_PV_EOI; /* opt-in: +pv-eoi */
	o->idle.housekeeping_cpu = -1;
	r = opt_parse(&parser, &prog, argc, argv, o);
	if (r > 0) { /* --help, --version */
		free(o->machine.modules);
		exit(0);
	}
	if (r < 0 || check_options(o))
		return VMM_EXIT_USAGE;
	if (find_guest(o))
		return VMM_EXIT_IMAGE;
	return default_names(o);
}
