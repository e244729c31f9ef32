/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What each wake source means, in plain words, and what an operator can do
 * about it: the one table `why` and `report` read (tools/sysidlectl.md,
 * "why", lists the same rules). A row matches a status wake_sources row by
 * its source and, when the rule has one, the start of its detail ("last":
 * "lapic-timer periodic", "ipi from vcpu 2", "device vector 0x40") and,
 * for a row that says so, whether the vCPU is the timekeeper; the
 * first matching row wins, so a source's specific rows come before its
 * catch-all one.
 */
#include <stdio.h>
#include <string.h>

#include "sysidlectl.h"

static const struct why_rule rules[] = {
	{ "lapic-timer", "lapic-timer periodic", "LAPIC periodic timer",
	  "the guest's own tick",
	  "--lapic-tick-policy catchup would hold it while the VM is idle "
	  "(discard: one tick for the held time); a tickless guest "
	  "(nohz=on) or its pv tick would not need it", true, 1 },
	{ "lapic-timer", "lapic-timer periodic", "LAPIC periodic timer",
	  "the guest's tick on a vCPU other than the timekeeper: it ends "
	  "full idle at each tick",
	  "a tickless guest (nohz=on) stops it on an idle vCPU; "
	  "--lapic-tick-policy holds the timekeeper's tick only", true, 0 },
	{ "lapic-timer", "lapic-timer one-shot", "LAPIC one-shot timer",
	  "re-armed at a steady rate it is the guest's tick (a guest "
	  "without NO_HZ_IDLE), else a guest program's timer",
	  "a tickless guest (nohz=on) or the pv tick lets the VM idle; "
	  "else find the guest's timer (its /proc/timer_list)", true, -1 },
	{ "lapic-timer", "lapic-timer tsc-deadline", "LAPIC TSC-deadline timer",
	  "re-armed at a steady rate it is the guest's tick (a guest "
	  "without NO_HZ_IDLE), else a guest program's timer",
	  "a tickless guest (nohz=on) or the pv tick lets the VM idle; "
	  "else find the guest's timer (its /proc/timer_list)", true, -1 },
	{ "lapic-timer", NULL, "LAPIC timer", "a guest timer",
	  "find the guest's timer (its /proc/timer_list)", true, -1 },
	{ "pv-tick", NULL, "paravirtual tick",
	  "the VMM's pv tick, already suspended in full idle: it runs only "
	  "while a vCPU is busy or woken by something else (the other rows)",
	  "look at what else wakes or keeps the vCPUs busy", false, -1 },
	{ "ipi", NULL, "IPIs",
	  "guest work spread across its vCPUs (the scheduler waking a task "
	  "on another vCPU, TLB shootdowns, a timer of another vCPU)",
	  "look inside the guest at what runs on the sending vCPU; fewer "
	  "vCPUs send fewer", false, -1 },
	{ "device", "device extint", "legacy PIC interrupt (ExtINT)",
	  "a device on the 8259 PIC, typically the PIT's tick",
	  "a guest on its LAPIC timer or the pv tick (no PIT tick)", true, -1 },
	{ "device", NULL, "device interrupt",
	  "a device's interrupt (the VMM reports its vector, not its IOAPIC "
	  "pin: the guest's /proc/interrupts names the device on it)",
	  "a device that interrupts steadily needs looking at in the guest",
	  false, -1 },
	{ "serial-input", NULL, "serial input",
	  "input arriving on the serial console",
	  "stop whatever writes to the console", false, -1 },
	{ "kick", NULL, "control kicks",
	  "someone outside woke it: a tool's kick on the control socket",
	  "find the tool that kicks it (sysidlectl kick, a script)", false, -1 },
	{ "signal", NULL, "SIGUSR2",
	  "someone outside woke it: SIGUSR2 sent to the VMM",
	  "find who signals the VMM", false, -1 },
	{ "other", NULL, "other wake-ups",
	  "an NMI, INIT/SIPI, a resume or the RTC's alarm", "", false, -1 },
};

static const struct why_rule unknown_rule = {
	NULL, NULL, "wake-ups", "a source this sysidlectl does not know", "",
	false, -1 };

/* See sysidlectl.h. */
const struct why_rule *why_rule_for(const char *source, const char *last,
				    bool timekeeper)
{
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
		const struct why_rule *r = &rules[i];

		if (strcmp(r->source, source) ||
		    (r->timekeeper >= 0 && r->timekeeper != timekeeper))
			continue;
		if (r->detail && (!last || strncmp(last, r->detail,
						   strlen(r->detail))))
			continue;
		return r;
	}
	return &unknown_rule;
}

/* See sysidlectl.h. */
const char *why_housekeeping_note(const char *reason)
{
	if (!strcmp(reason, "housekeeping-tick"))
		return "the VMM's own tick while the VM is not fully idle: a "
		       "consequence, not a cause";
	if (!strcmp(reason, "lapic-timer"))
		return "serving the guest's LAPIC timers (above)";
	if (!strcmp(reason, "pv-tick"))
		return "the pv tick (above)";
	if (!strcmp(reason, "kick"))
		return "a kick: a vCPU to wake or a state change to make";
	if (!strcmp(reason, "kick-backstop") || !strcmp(reason,
							 "hold-backstop"))
		return "a backstop of the VMM's own, while a tick is held";
	if (!strcmp(reason, "rtc"))
		return "the RTC's alarm";
	return "";
}

/* See sysidlectl.h. */
void fmt_per_s(double per_s, char *buf, size_t size)
{
	if (!(per_s >= 0))
		snprintf(buf, size, "?");
	else if (per_s >= 10 || per_s == 0)
		snprintf(buf, size, "%.0f/s", per_s);
	else if (per_s >= 1)
		snprintf(buf, size, "%.1f/s", per_s);
	else
		snprintf(buf, size, "%.1f/min", per_s * 60);
}

/* See sysidlectl.h. */
void why_label(const char *source, const char *last, char *buf, size_t size)
{
	const struct why_rule *r = why_rule_for(source, last, true);
	const char *rest = "";

	/* what the detail adds: "from vcpu 2", "vector 0x40" */
	if (last && !strncmp(last, source, strlen(source)) &&
	    last[strlen(source)] == ' ' && !r->detail)
		rest = last + strlen(source) + 1;
	if (!r->source) /* a source this table does not know: its name */
		snprintf(buf, size, "%s wake-ups", source);
	else if (!strcmp(source, "ipi") && !strncmp(rest, "from vcpu ", 10))
		snprintf(buf, size, "%s from vCPU %s", r->label, rest + 10);
	else
		snprintf(buf, size, "%s%s%s", r->label, *rest ? " " : "", rest);
}
