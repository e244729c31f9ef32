/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The VMM's options: the --config file (common/conffile.c) and the
 * command line into vm_options, --help, --version, the defaults that
 * depend on the kernel's name and the PID, and a bare kernel name looked
 * for among the installed guests.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/uuid.h"
#include "machine/devices/devices.h"
#include "machine/cpuid.h"
#include "machine/vm.h"
#include "options.h"
#include "conffile.h"
#include "hookrun.h" /* DEFAULT_HOOKS_DIR, --hook-timeout */
#include "version.h"

#define VMM_STR_(x) #x
#define VMM_STR(x) VMM_STR_(x)

/* The opt-in devices of --device NAME, by their index in
 * vm_options.devices. */
const struct optional_device optional_devices[NR_OPTIONAL_DEVICES] = {
	{ "pc-testdev", pc_testdev_init },
	{ "intel-iommu", intel_iommu_init }, /* before edu: its remapper */
	{ "edu", edu_init },
};

static const char usage_text[] =
"Usage: sysidle-vmm [OPTION]... KERNEL\n"
"Run a Multiboot v1 ELF32 KERNEL on KVM with a userspace interrupt controller.\n"
"KERNEL given by a bare file name that is not in the current directory is\n"
"looked for in " SYSIDLE_GUESTDIR " (the guests installed\n"
"with the program: idle.elf, selftest.elf, burst.elf, pingpong.elf).\n"
"\n"
"Options:\n"
"  --config FILE      read options from FILE first, one \"key = value\" per\n"
"                     line (a long option name as the key, \"kernel = FILE\"\n"
"                     for KERNEL; sysidle.conf(5)); the command line wins,\n"
"                     and its --module and --device replace the file's\n"
"  --mem SIZE         guest RAM (default 256M); SIZE is a number with an\n"
"                     optional K, M or G suffix (no suffix: MiB); at most\n"
"                     this host's RAM and swap together\n"
"  --cpus N           number of vCPUs, 1..1024 (and at most what this host's\n"
"                     KVM allows); each is a host thread (default 1); more\n"
"                     than 8 per host CPU runs, with a warning\n"
"  --append CMDLINE   kernel command line (multiboot cmdline is\n"
"                     \"KERNEL CMDLINE\", as QEMU and GRUB pass it)\n"
"  --module FILE      load FILE as a multiboot module (repeatable)\n"
"  --cpu FLAGS        CPU features the guest sees: comma-separated +FEATURE\n"
"                     or -FEATURE, FEATURE x2apic, tsc-deadline (both on by\n"
"                     default) or pv-eoi (off by default). -x2apic:\n"
"                     CPUID.1:ECX.x2APIC clear and IA32_APIC_BASE.EXTD\n"
"                     reserved (#GP); -tsc-deadline: CPUID.1:ECX.TSC_DEADLINE\n"
"                     clear, no TSC-deadline timer mode, IA32_TSC_DEADLINE\n"
"                     #GP; +pv-eoi: KVM's signature at CPUID 0x40000100\n"
"                     with its PV EOI (MSR 0x4b564d04): a guest that uses it\n"
"                     ends an interrupt without an exit (less host CPU per\n"
"                     interrupt; measured on a nested host, a wake from full\n"
"                     idle by IPI a few percent slower with the leaves\n"
"                     there)\n"
"  --device NAME      add an opt-in device (repeatable); NAME is one of:\n"
"                     pc-testdev  QEMU's test device for kvm-unit-tests:\n"
"                     scratch ports 0xe0 and 0xe8, page flush 0xe4, ISA\n"
"                     IRQ lines 0..23 at ports 0x2000-0x2017, 64 KiB of\n"
"                     memory behind MMIO at 0xff000000\n"
"                     intel-iommu  VT-d at 0xfed90000: DMA remapping and\n"
"                     interrupt remapping in xAPIC mode\n"
"                     edu  QEMU's edu PCI device (DMA, MSI)\n"
"  --stats-json FILE  write per-vCPU exit counts, HLT exits, interrupts\n"
"                     injected, time halted, the housekeeping thread's\n"
"                     host wake-ups, the pause counters and the bytes of\n"
"                     guest serial output dropped to FILE at exit; FILE is\n"
"                     checked at start (exit 115); a FIFO needs a reader at\n"
"                     exit, which gets 1 s to take it all\n"
"  --sysidle          detect the fully idle guest (all vCPUs halted, the\n"
"                     timekeeper taking only its tick) and then stop its\n"
"                     paravirtual tick and the VMM's own periodic work;\n"
"                     guest LAPIC timers are honoured (the timekeeper's\n"
"                     periodic one: see --lapic-tick-policy)\n"
"  --sysidle-log FILE one line per idle state change and tick stop/restart\n"
"                     (\"-\": stderr); needs --sysidle. A FIFO needs its\n"
"                     reader at start; lines it does not take at once are\n"
"                     dropped and counted (stderr at exit, --stats-json)\n"
"  --timekeeper N     the timekeeper vCPU (default 0)\n"
"  --lapic-tick-policy honour|catchup|discard\n"
"                     what becomes of a guest's periodic LAPIC timer ticks\n"
"                     not taken when due (as libvirt's tickpolicy):\n"
"                     honour (default): never held back; late ones\n"
"                     coalesce into one, as on hardware. catchup: with\n"
"                     --sysidle the timekeeper's tick is held back in full\n"
"                     idle; every tick due is delivered afterwards, the\n"
"                     next one at the guest's EOI of the last. discard:\n"
"                     held back too; one tick for the whole held time\n"
"                     (merge).\n"
"                     Under both, a guest that sleeps on that tick alone\n"
"                     wakes late, by up to --lapic-tick-max-hold\n"
"  --lapic-tick-max-hold SECONDS  hold the tick back at most this long\n"
"                     (default 2; 0.01 to 3600; needs catchup or discard)\n"
"  --housekeeping-cpu N  pin the housekeeping thread to host CPU N (with\n"
"                     --sysidle: only while the guest is not fully idle)\n"
"  --name NAME        the VM's name in the control socket, metrics and\n"
"                     hooks (default: the kernel file's stem and the PID,\n"
"                     e.g. idle-4242); any characters but '/' and control\n"
"                     characters, at most 80 bytes\n"
"  --uuid UUID        the VM's uuid in the control socket, metrics and\n"
"                     hooks: 32 hex digits as 8-4-4-4-12 (either case;\n"
"                     shown lowercase). Default: the version-5 uuid\n"
"                     (SHA-1) of the name's bytes in the namespace\n"
"                     " VMM_UUID_NAMESPACE ", so\n"
"                     the same --name keeps its uuid across runs\n"
"  --control PATH     the control socket (default /run/sysidle/NAME.sock,\n"
"                     its directory created mode 0700; \"none\": no socket);\n"
"                     see vmm/export/README.md for the protocol,\n"
"                     build/sysidlectl for a client\n"
"  --metrics-file PATH  write the idle state in Prometheus text format to\n"
"                     PATH (atomically) at each state change and at most\n"
"                     once a second while the VM is not fully idle (not\n"
"                     periodically while it stays fully idle: its samples\n"
"                     say how to extrapolate)\n"
"  --hooks DIR        run DIR/vm and DIR/vm.d/* on start, stop and each\n"
"                     change of full idle, as libvirt runs its hooks\n"
"                     (default " DEFAULT_HOOKS_DIR ";\n"
"                     absent: no hooks)\n"
"  --hook-timeout SECONDS  kill a hook still running after SECONDS\n"
"                     (default 10); at exit, the hook running and then the\n"
"                     last hooks get one SECONDS each in all\n"
"  --halt-poll-ns NS  a halted vCPU watches for its next interrupt for up\n"
"                     to NS ns before it blocks (0: never), the window\n"
"                     adapting as KVM's halt_poll_ns: grown while wake-ups\n"
"                     come just after it, shrunk when the halt outlasts NS.\n"
"                     Never with --sysidle while the VM is heading into\n"
"                     full idle: an idle VM still costs nothing.\n"
"                     Default " VMM_STR(HALT_POLL_DEFAULT_NS) "\n"
"  --timer-advance-ns NS  a halted vCPU wakes up to NS ns before its LAPIC\n"
"                     timer deadline and spins to it, the lead tuned to how\n"
"                     late its wake-ups come (as KVM's\n"
"                     lapic_timer_advance_ns), learned apart for each\n"
"                     decade of the sleep (<0.1, <1, <10, >=10 ms: a wake\n"
"                     from full idle needs a longer lead than one from a\n"
"                     short sleep); never delivered early; 0:\n"
"                     none. Default " VMM_STR(TIMER_ADVANCE_DEFAULT_NS) "\n"
"  --vcpu-timers self|housekeeping\n"
"                     self (default): a halted vCPU's LAPIC timer is the\n"
"                     timeout of its own wait, no other thread on its wake\n"
"                     path; housekeeping: every guest timer is served by\n"
"                     the housekeeping thread, which wakes the vCPU\n"
"  --sched-slice-us US|off  the vCPU and housekeeping threads ask the\n"
"                     kernel for a US us scheduler slice (sched_setattr\n"
"                     sched_runtime; Linux 6.12 or later, 100 to 100000),\n"
"                     so that a woken one preempts a busy task sooner;\n"
"                     older kernels ignore it. Default " VMM_STR(SCHED_SLICE_DEFAULT_US) "; off: the\n"
"                     kernel's own\n"
"  --interrupt-injection kvm-run|ioctl\n"
"                     kvm-run (default, where KVM offers KVM_CAP_SYNC_REGS\n"
"                     with the vCPU events): an interrupt goes in with the\n"
"                     KVM_RUN that delivers it; ioctl: a KVM_INTERRUPT call\n"
"                     of its own before it\n"
"  --version          print the version and exit 0\n"
"  -h, --help         print this help and exit 0\n"
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

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long n;
	uint64_t mult = 1ull << 20;

	errno = 0;
	n = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -1;
	switch (*end) {
	case 'k': case 'K': mult = 1ull << 10; end++; break;
	case 'm': case 'M': mult = 1ull << 20; end++; break;
	case 'g': case 'G': mult = 1ull << 30; end++; break;
	case '\0': break;
	default: return -1;
	}
	if (*end == 'i' && end[1] == 'B')
		end += 2;
	else if (*end == 'B')
		end++;
	if (*end || n == 0 || n > (1ull << 40) / mult)
		return -1;
	*out = n * mult;
	return 0;
}

/* 0 when @s is a VM name: 1..80 bytes, no '/', no control characters. */
static int check_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 80)
		return -1;
	for (; *s; s++)
		if (*s == '/' || (unsigned char)*s < 0x20 || *s == 0x7f)
			return -1;
	return 0;
}

static int usage_error(const char *fmt, const char *arg);

#define DEVICE_NAMES "pc-testdev, intel-iommu, edu" /* optional_devices[]' names */

/* --device NAME: 0, or -1 for a name not in optional_devices[]. */
static int parse_device(const char *name, struct vm_options *o)
{
	for (size_t i = 0; i < NR_OPTIONAL_DEVICES; i++) {
		if (!strcmp(name, optional_devices[i].name)) {
			o->devices[i] = true;
			/* the ACPI tables describe it (a DMAR) */
			if (!strcmp(name, "intel-iommu"))
				o->machine.intel_iommu = true;
			return 0;
		}
	}
	return -1;
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
		if (check_name(name))
			snprintf(name, sizeof(name), "vm-%d", (int)getpid());
		o->export.name = name;
	}
	if (!o->export.control_explicit) {
		snprintf(path, sizeof(path), "%s/%s.sock", DEFAULT_CONTROL_DIR,
			 o->export.name);
		if (strlen(path) >= CONTROL_PATH_MAX)
			return usage_error("--name '%s': too long for a control "
					   "socket path; give --control", o->export.name);
		o->export.control = path;
	}
	return 0;
}

/* The options being parsed: the --config file's, then the command line's. */
static struct conf_args conf;

static int usage_error(const char *fmt, const char *arg)
{
	const char *at = conf_origin(&conf, arg);

	fprintf(stderr, "%s: ", program_invocation_short_name);
	if (at)
		fprintf(stderr, "%s: ", at);
	fprintf(stderr, fmt, arg);
	fprintf(stderr, " (see %s --help)\n", program_invocation_short_name);
	return VMM_EXIT_USAGE;
}

/* Fills @o from argv; returns 0, or the exit status after a message. */
int parse_options(int argc, char **argv, struct vm_options *o)
{
	static const struct option longopts[] = {
		{ "mem", required_argument, NULL, 'm' },
		{ "cpus", required_argument, NULL, 'c' },
		{ "append", required_argument, NULL, 'a' },
		{ "module", required_argument, NULL, 'M' },
		{ "cpu", required_argument, NULL, 'U' },
		{ "stats-json", required_argument, NULL, 's' },
		{ "sysidle", no_argument, NULL, 'S' },
		{ "sysidle-log", required_argument, NULL, 'L' },
		{ "timekeeper", required_argument, NULL, 'T' },
		{ "lapic-tick-policy", required_argument, NULL, 'K' },
		{ "lapic-tick-max-hold", required_argument, NULL, 'X' },
		{ "housekeeping-cpu", required_argument, NULL, 'P' },
		{ "name", required_argument, NULL, 'n' },
		{ "uuid", required_argument, NULL, 'u' },
		{ "control", required_argument, NULL, 'C' },
		{ "metrics-file", required_argument, NULL, 'F' },
		{ "hooks", required_argument, NULL, 'H' },
		{ "hook-timeout", required_argument, NULL, 'O' },
		{ "device", required_argument, NULL, 'D' },
		{ "halt-poll-ns", required_argument, NULL, 'p' },
		{ "timer-advance-ns", required_argument, NULL, 'A' },
		{ "vcpu-timers", required_argument, NULL, 'V' },
		{ "sched-slice-us", required_argument, NULL, 'l' },
		{ "interrupt-injection", required_argument, NULL, 'I' },
		{ "config", required_argument, NULL, 'g' },
		{ "version", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static char uuid[UUID_STR_LEN];
	bool cli_modules = false, cli_devices = false;
	char *end, bad[64];
	double sec;
	long n;
	int c;

	o->machine.mem_size = 256ull << 20;
	o->machine.ncpus = 1;
	o->machine.append = "";
	o->machine.halt_poll_max_ns = HALT_POLL_DEFAULT_NS;
	o->machine.timer_advance_max_ns = TIMER_ADVANCE_DEFAULT_NS;
	o->machine.cpu_features_off = CPU_F_PV_EOI; /* opt-in: +pv-eoi */
	o->sched_slice_ns = SCHED_SLICE_DEFAULT_US * 1000ull;
	o->idle.housekeeping_cpu = -1;
	o->export.hooks_dir = DEFAULT_HOOKS_DIR;
	o->export.hook_timeout_ns = 10000000000ull;
	if (conf_args_build(program_invocation_short_name, argc, argv, NULL,
			    longopts, "kernel", &conf))
		return VMM_EXIT_USAGE;
	argc = conf.argc;
	argv = conf.argv;
	o->machine.modules = calloc((size_t)argc, sizeof(*o->machine.modules));
	if (!o->machine.modules)
		return usage_error("%s", "out of memory");
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case 'm':
			if (parse_size(optarg, &o->machine.mem_size))
				return usage_error("--mem '%s': expected a size "
						   "such as 256M or 1G", optarg);
			break;
		case 'c':
			errno = 0;
			n = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || n < 1 ||
			    n > VMM_MAX_CPUS)
				return usage_error("--cpus '%s': expected a "
						   "number from 1 to 1024", optarg);
			o->machine.ncpus = (unsigned int)n;
			break;
		case 'a':
			o->machine.append = optarg;
			break;
		case 'M':
			/* the command line's modules replace the file's */
			if (!cli_modules && !conf_from_file(&conf, optarg)) {
				cli_modules = true;
				o->machine.nmodules = 0;
			}
			o->machine.modules[o->machine.nmodules++] = optarg;
			break;
		case 'D':
			if (!cli_devices && !conf_from_file(&conf, optarg)) {
				cli_devices = true; /* as --module */
				memset(o->devices, 0, sizeof(o->devices));
				o->machine.intel_iommu = false;
			}
			if (parse_device(optarg, o))
				return usage_error("--device '%s': expected "
						   "one of: " DEVICE_NAMES,
						   optarg);
			break;
		case 'U':
			if (cpu_features_parse(optarg,
					&o->machine.cpu_features_off, bad,
					sizeof(bad)))
				return usage_error("--cpu: '%s': expected "
						   "+FEATURE or -FEATURE, FEATURE "
						   "x2apic, tsc-deadline or pv-eoi", bad);
			break;
		case 's':
			o->stats_json = optarg;
			break;
		case 'S':
			o->idle.sysidle = true;
			break;
		case 'L':
			o->idle.log = optarg;
			break;
		case 'T':
		case 'P':
			errno = 0;
			n = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || n < 0 ||
			    n >= (c == 'T' ? VMM_MAX_CPUS : 1024))
				return usage_error(c == 'T' ?
					"--timekeeper '%s': expected a vCPU number" :
					"--housekeeping-cpu '%s': expected a host "
					"CPU number", optarg);
			if (c == 'T')
				o->idle.timekeeper = (int)n;
			else
				o->idle.housekeeping_cpu = (int)n;
			break;
		case 'K':
			if (lapic_tick_policy_parse(optarg,
					&o->machine.lapic_tick_policy))
				return usage_error("--lapic-tick-policy '%s': "
						   "expected honour, catchup or "
						   "discard", optarg);
			break;
		case 'X':
			errno = 0;
			sec = strtod(optarg, &end);
			if (errno || *end || end == optarg || !(sec >= 0.01) ||
			    sec > 3600)
				return usage_error("--lapic-tick-max-hold '%s': "
						   "expected seconds from 0.01 "
						   "to 3600", optarg);
			o->idle.max_hold_ns = (uint64_t)(sec * 1e9);
			break;
		case 'n':
			if (check_name(optarg))
				return usage_error("--name '%s': expected 1 to 80 "
						   "bytes, no '/' and no control "
						   "characters", optarg);
			o->export.name = optarg;
			break;
		case 'u':
			if (uuid_parse(optarg, uuid))
				return usage_error("--uuid '%s': expected a uuid "
						   "of 32 hex digits as 8-4-4-4-12, "
						   "e.g. 0f4c1a2b-3c4d-5e6f-8a9b-"
						   "0123456789ab", optarg);
			o->export.uuid = uuid;
			break;
		case 'C':
			if (!*optarg || strlen(optarg) >= CONTROL_PATH_MAX)
				return usage_error("--control '%s': expected a "
						   "socket path of at most 107 "
						   "bytes, or none", optarg);
			o->export.control = strcmp(optarg, "none") ? optarg : NULL;
			o->export.control_explicit = true;
			break;
		case 'F':
			if (!*optarg)
				return usage_error("%s--metrics-file: expected a "
						   "path", "");
			o->export.metrics_file = optarg;
			break;
		case 'H':
			if (!*optarg)
				return usage_error("%s--hooks: expected a "
						   "directory", "");
			o->export.hooks_dir = optarg;
			break;
		case 'O':
			if (hooks_parse_timeout(optarg, &o->export.hook_timeout_ns))
				return usage_error("--hook-timeout '%s': "
						   HOOKS_TIMEOUT_USAGE, optarg);
			break;
		case 'p':
		case 'A':
			errno = 0;
			n = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || n < 0 ||
			    n > 10000000)
				return usage_error(c == 'p' ?
					"--halt-poll-ns '%s': expected ns from 0 "
					"to 10000000" : "--timer-advance-ns '%s': "
					"expected ns from 0 to 10000000", optarg);
			if (c == 'p')
				o->machine.halt_poll_max_ns = (uint64_t)n;
			else
				o->machine.timer_advance_max_ns = (uint64_t)n;
			break;
		case 'V':
			if (strcmp(optarg, "self") &&
			    strcmp(optarg, "housekeeping"))
				return usage_error("--vcpu-timers '%s': expected "
						   "self or housekeeping", optarg);
			o->machine.timers_on_housekeeping = *optarg == 'h';
			break;
		case 'I':
			if (strcmp(optarg, "kvm-run") && strcmp(optarg, "ioctl"))
				return usage_error("--interrupt-injection '%s': "
						   "expected kvm-run or ioctl",
						   optarg);
			o->machine.inject_by_ioctl = *optarg == 'i';
			break;
		case 'l':
			errno = 0;
			n = strtol(optarg, &end, 10);
			if (!strcmp(optarg, "off"))
				o->sched_slice_ns = 0;
			else if (errno || *end || end == optarg || n < 100 ||
				 n > 100000)
				return usage_error("--sched-slice-us '%s': "
						   "expected us from 100 to 100000, "
						   "or off", optarg);
			else
				o->sched_slice_ns = (uint64_t)n * 1000u;
			break;
		case 'g': /* read by conf_args_build */
			break;
		case 'v':
			sysidle_version_print(stdout, "sysidle-vmm");
			free(o->machine.modules);
			exit(0);
		case 'h':
			fputs(usage_text, stdout);
			free(o->machine.modules);
			exit(0);
		case ':':
			return usage_error("option '%s' needs an argument",
					   argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'",
					   argv[optind - 1]);
		}
	}
	if (o->idle.log && !o->idle.sysidle)
		return usage_error("%s", "--sysidle-log needs --sysidle");
	if (o->idle.max_hold_ns && (!o->idle.sysidle ||
	    o->machine.lapic_tick_policy == LAPIC_TICK_HONOUR))
		return usage_error("%s", "--lapic-tick-max-hold needs --sysidle "
				   "and --lapic-tick-policy catchup or discard");
	if (optind + 1 < argc)
		return usage_error("unexpected argument '%s'", argv[optind + 1]);
	if (optind < argc)
		o->machine.kernel = argv[optind];
	else if (conf.positional)
		o->machine.kernel = conf.positional; /* the file's "kernel" */
	else
		return usage_error("%s", "missing KERNEL");
	if (find_guest(o))
		return VMM_EXIT_IMAGE;
	return default_names(o);
}
