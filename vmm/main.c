/* SPDX-License-Identifier: GPL-2.0-only */
/* Options, the VM's lifetime, the one error pattern, signals. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "export.h"
#include "housekeeping.h"
#include "vmm.h"

static atomic_int stop_status = -1;
static atomic_bool fail_reported;
static int stop_fd = -1; /* eventfd: the VM has stopped */

static const char usage_text[] =
"Usage: vmm [options] KERNEL.elf\n"
"Run a Multiboot v1 ELF32 KERNEL on KVM with a userspace interrupt controller.\n"
"\n"
"Options:\n"
"  --mem SIZE         guest RAM (default 256M); SIZE is a number with an\n"
"                     optional K, M or G suffix (no suffix: MiB)\n"
"  --cpus N           number of vCPUs, 1..1024 (and at most what this host's\n"
"                     KVM allows); each is a host thread (default 1)\n"
"  --append CMDLINE   kernel command line (multiboot cmdline is\n"
"                     \"KERNEL CMDLINE\", as QEMU and GRUB pass it)\n"
"  --module FILE      load FILE as a multiboot module (repeatable)\n"
"  --stats-json FILE  write per-vCPU exit counts, HLT exits, interrupts\n"
"                     injected, time halted, the housekeeping thread's\n"
"                     host wake-ups and the pause counters to FILE at exit\n"
"  --sysidle          detect the fully idle guest (all vCPUs halted, the\n"
"                     timekeeper taking only its tick) and then stop its\n"
"                     paravirtual tick and the VMM's own periodic work;\n"
"                     guest LAPIC timers are always honoured\n"
"  --sysidle-log FILE one line per idle state change and tick stop/restart\n"
"                     (\"-\": stderr); needs --sysidle\n"
"  --timekeeper N     the timekeeper vCPU (default 0)\n"
"  --housekeeping-cpu N  pin the housekeeping thread to host CPU N (with\n"
"                     --sysidle: only while the guest is not fully idle)\n"
"  --name NAME        the VM's name in the control socket, metrics and\n"
"                     hooks (default: the kernel file's stem and the PID,\n"
"                     e.g. idle-4242); any characters but '/' and control\n"
"                     characters, at most 80 bytes\n"
"  --control PATH     the control socket (default /run/sysidle/NAME.sock,\n"
"                     its directory created mode 0700; \"none\": no socket);\n"
"                     see vmm/README.md for the protocol, build/sysidlectl\n"
"                     for a client\n"
"  --metrics-file PATH  write the idle state in Prometheus text format to\n"
"                     PATH (atomically) at each state change and at most\n"
"                     once a second while the VM is not fully idle\n"
"  --hooks DIR        run DIR/vm and DIR/vm.d/* on start, stop and each\n"
"                     change of full idle, as libvirt runs its hooks\n"
"                     (default /etc/sysidle/hooks; absent: no hooks)\n"
"  --hook-timeout SECONDS  kill a hook still running after SECONDS\n"
"                     (default 10)\n"
"  -h, --help         print this help and exit 0\n"
"\n"
"Signals: SIGUSR2 ends a full-idle period from outside (the tick restarts).\n"
"\n"
"Devices: 16550 UART at 0x3f8 (stdout/stdin, IRQ 4), isa-debug-exit at 0xf4,\n"
"fw_cfg at 0x510/0x511, IOAPIC at 0xfec00000, local APIC (xAPIC at\n"
"0xfee00000 and x2APIC MSRs), PIC/PIT ports ignored.\n"
"\n"
"Exit status:\n"
"  V          the guest wrote V to port 0xf4 (V & 0xff as is; 0 = success;\n"
"             guests should keep their codes below 120)\n"
"  120        bad option or missing kernel\n"
"  121        kernel or module unreadable, not an ELF32 image, no multiboot\n"
"             header in the first 8 KiB, or RAM too small for the image\n"
"  122        KVM unavailable or failing, or more vCPUs than KVM allows\n"
"  123        the guest triple-faulted (KVM_EXIT_SHUTDOWN)\n"
"  124        emulation failure, failed VM entry or unknown exit reason\n"
"  125        the --stats-json file could not be written\n"
"  128+SIG    stopped by SIGINT, SIGTERM or SIGHUP (130, 143, 129)\n";

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Any thread, any time: the first status wins, the main thread wakes. */
void vm_stop(int status)
{
	int expected = -1;
	uint64_t one = 1;

	if (atomic_compare_exchange_strong(&stop_status, &expected, status) &&
	    stop_fd >= 0 && write(stop_fd, &one, sizeof(one)) < 0)
		abort();
}

bool vm_stopping(void)
{
	return atomic_load(&stop_status) >= 0;
}

int vm_status(void)
{
	return atomic_load(&stop_status);
}

int vmm_fail(int status, const char *fmt, ...)
{
	va_list ap;

	if (!atomic_exchange(&fail_reported, true) && !vm_stopping()) {
		va_start(ap, fmt);
		fputs("vmm: ", stderr);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
		va_end(ap);
	}
	vm_stop(status);
	return -1;
}

void vmm_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("vmm: warning: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

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

/* The defaults that depend on the kernel and the PID: --name and
 * --control. The strings live as long as the process. */
static int default_names(struct vm_options *o)
{
	static char name[96], path[CONTROL_PATH_MAX + 32];
	const char *base = strrchr(o->kernel, '/');
	size_t len;

	if (!o->name) {
		base = base ? base + 1 : o->kernel;
		len = strcspn(base, ".");
		if (len == 0 || len > 60)
			len = len ? 60 : strlen(base);
		snprintf(name, sizeof(name), "%.*s-%d", (int)len, base,
			 (int)getpid());
		if (check_name(name))
			snprintf(name, sizeof(name), "vm-%d", (int)getpid());
		o->name = name;
	}
	if (!o->control_explicit) {
		snprintf(path, sizeof(path), "%s/%s.sock", DEFAULT_CONTROL_DIR,
			 o->name);
		if (strlen(path) >= CONTROL_PATH_MAX)
			return usage_error("--name '%s': too long for a control "
					   "socket path; give --control", o->name);
		o->control = path;
	}
	return 0;
}

static int usage_error(const char *fmt, const char *arg)
{
	fputs("vmm: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs(" (see vmm --help)\n", stderr);
	return VMM_EXIT_USAGE;
}

/* Fills @o from argv; returns 0, or the exit status after a message. */
static int parse_options(int argc, char **argv, struct vm_options *o)
{
	static const struct option longopts[] = {
		{ "mem", required_argument, NULL, 'm' },
		{ "cpus", required_argument, NULL, 'c' },
		{ "append", required_argument, NULL, 'a' },
		{ "module", required_argument, NULL, 'M' },
		{ "stats-json", required_argument, NULL, 's' },
		{ "sysidle", no_argument, NULL, 'S' },
		{ "sysidle-log", required_argument, NULL, 'L' },
		{ "timekeeper", required_argument, NULL, 'T' },
		{ "housekeeping-cpu", required_argument, NULL, 'P' },
		{ "name", required_argument, NULL, 'n' },
		{ "control", required_argument, NULL, 'C' },
		{ "metrics-file", required_argument, NULL, 'F' },
		{ "hooks", required_argument, NULL, 'H' },
		{ "hook-timeout", required_argument, NULL, 'O' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	long n;
	int c;

	o->mem_size = 256ull << 20;
	o->ncpus = 1;
	o->append = "";
	o->housekeeping_cpu = -1;
	o->hooks_dir = DEFAULT_HOOKS_DIR;
	o->hook_timeout_ns = 10000000000ull;
	o->modules = calloc((size_t)argc, sizeof(*o->modules));
	if (!o->modules)
		return usage_error("%s", "out of memory");
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case 'm':
			if (parse_size(optarg, &o->mem_size))
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
			o->ncpus = (unsigned int)n;
			break;
		case 'a':
			o->append = optarg;
			break;
		case 'M':
			o->modules[o->nmodules++] = optarg;
			break;
		case 's':
			o->stats_json = optarg;
			break;
		case 'S':
			o->sysidle = true;
			break;
		case 'L':
			o->sysidle_log = optarg;
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
				o->timekeeper = (int)n;
			else
				o->housekeeping_cpu = (int)n;
			break;
		case 'n':
			if (check_name(optarg))
				return usage_error("--name '%s': expected 1 to 80 "
						   "bytes, no '/' and no control "
						   "characters", optarg);
			o->name = optarg;
			break;
		case 'C':
			if (!*optarg || strlen(optarg) >= CONTROL_PATH_MAX)
				return usage_error("--control '%s': expected a "
						   "socket path of at most 107 "
						   "bytes, or none", optarg);
			o->control = strcmp(optarg, "none") ? optarg : NULL;
			o->control_explicit = true;
			break;
		case 'F':
			if (!*optarg)
				return usage_error("%s--metrics-file: expected a "
						   "path", "");
			o->metrics_file = optarg;
			break;
		case 'H':
			if (!*optarg)
				return usage_error("%s--hooks: expected a "
						   "directory", "");
			o->hooks_dir = optarg;
			break;
		case 'O':
			if (hooks_parse_timeout(optarg, &o->hook_timeout_ns))
				return usage_error("--hook-timeout '%s': "
						   HOOKS_TIMEOUT_USAGE, optarg);
			break;
		case 'h':
			fputs(usage_text, stdout);
			free(o->modules);
			exit(0);
		case ':':
			return usage_error("option '%s' needs an argument",
					   argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'",
					   argv[optind - 1]);
		}
	}
	if (o->sysidle_log && !o->sysidle)
		return usage_error("%s", "--sysidle-log needs --sysidle");
	if (optind >= argc)
		return usage_error("%s", "missing KERNEL.elf");
	if (optind + 1 < argc)
		return usage_error("unexpected argument '%s'", argv[optind + 1]);
	o->kernel = argv[optind];
	return default_names(o);
}

static int devices_init(struct vm *vm)
{
	if (serial_init(vm) || debug_exit_init(vm) || fw_cfg_init(vm) ||
	    legacy_init(vm) || ioapic_init(vm))
		return -1;
	return bus_register(BUS_MMIO, GUEST_LAPIC_BASE, 0x1000, lapic_mmio,
			    NULL);
}

/* Sleeps until the VM stops by itself or a stop signal arrives. */
static void wait_for_stop(int sig_fd)
{
	struct pollfd fds[2] = {
		{ .fd = stop_fd, .events = POLLIN },
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

	setvbuf(stdout, NULL, _IOLBF, 0);
	status = parse_options(argc, argv, &opts);
	if (status) {
		free(opts.modules);
		return status;
	}

	/* Stop signals go to the signalfd; every thread inherits the mask. */
	sigemptyset(&stop_sigs);
	sigaddset(&stop_sigs, SIGINT);
	sigaddset(&stop_sigs, SIGTERM);
	sigaddset(&stop_sigs, SIGHUP);
	sigaddset(&stop_sigs, SIGUSR2); /* not a stop: ends full idle */
	pthread_sigmask(SIG_BLOCK, &stop_sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	stop_fd = eventfd(0, EFD_CLOEXEC);
	sig_fd = signalfd(-1, &stop_sigs, SFD_CLOEXEC);
	if (stop_fd < 0 || sig_fd < 0)
		return vmm_fail(VMM_EXIT_KVM, "eventfd/signalfd: %s",
				strerror(errno)), vm_status();

	if (kvm_vm_create(&vm, &opts) || loader_load(&vm, &opts) ||
	    devices_init(&vm) || msr_vm_setup(&vm) || vcpus_create(&vm) ||
	    idle_init(&vm) || status_init(&vm) || pause_init(&vm) ||
	    /* per vCPU: the LAPIC timer and the pv tick; idle.c's tick and
	     * its kick backstop (hk_timer_arm drops a timer when full) */
	    housekeeping_start(2 * vm.ncpus + 2) || serial_input_start() ||
	    export_start(&vm) || vcpus_start(&vm)) {
		vm_stop(VMM_EXIT_KVM); /* no-op when a message set the status */
	} else {
		wait_for_stop(sig_fd);
	}

	vcpus_stop(&vm);
	vcpus_join(&vm);
	housekeeping_stop();
	serial_input_stop();
	idle_flush(); /* the last state changes, to the export thread */
	export_stop();
	status = vm_status();
	if (opts.stats_json && vm.vcpus &&
	    stats_write(&vm, opts.stats_json, status))
		status = VMM_EXIT_STATS;
	idle_fini();
	kvm_vm_destroy(&vm);
	free(opts.modules);
	fflush(stdout);
	return status;
}
