"""The test guests as a scripted KVM plays them (tests/vmm/scripted/
README.md): for idle.elf, burst.elf, hello.elf and spin.elf a script that
makes the exits the image makes, as the VMM sees them; for any other image
a guest that halts at once. vmmtest.use_scripted() runs the VMM tests on
them where /dev/kvm is not usable."""
import os

PVTICK_HZ, PVTICK_VECTOR, PVTICK_MISSED = 0x53490000, 0x53490001, 0x53490002
IDLE_TICK_VECTOR, IDLE_SERIAL_VECTOR = 0x60, 0x34  # idle.elf's (rt.h)


def serial_out(text):
    """Script steps that write @text to the serial port, 64 bytes an exit
    (rep outsb, as the test guests print)."""
    b = text.encode()
    return "".join("  outs 0x3f8 %s\n" % b[i:i + 64].hex()
                   for i in range(0, len(b), 64))


def idle_sleep_script(cpus, sleep_s):
    """idle.elf hz=0 sleep=S as the VMM sees it: every vCPU started, vCPU
    0 in HLT until its one-shot TSC-deadline timer S seconds ahead, then
    "idle: woken by timer" and the exit port, 0."""
    text = ["vcpu 0", "  sti", "  mmio-write 0xfee000f0 4 0x1ff",
            "  mmio-write 0xfee00320 4 0x40050"]  # LVTT: TSC-deadline 0x50
    text += ["  start-ap %d 0x10" % i for i in range(1, cpus)]
    text += ["  wrmsr 0x6e0 tsc+%d" % (sleep_s * 1000000000),
             serial_out("# idle: tick=none\nidle: %d cpus up, hz=0\n" %
                        cpus).rstrip("\n"),
             "  hlt-until 0x50",
             serial_out("idle: woken by timer\n").rstrip("\n"), "  exit 0"]
    if cpus > 1:
        text += ["vcpu 1-%d" % (cpus - 1), "  sti", "  loop", "    hlt",
                 "  end"]
    return "\n".join(text + ["on 0x50", "  eoi"]) + "\n"


def idle_script(cpus, hz):
    """idle.elf as the VMM sees it: every vCPU started and in HLT for
    ever; vCPU 0 with the pv tick at @hz (each tick reads the missed count)
    and the serial receive interrupt (each reads the byte and the missed
    count), its two start-up lines and "idle: woken by serial" for each
    serial interrupt. What it does not do: count jiffies (no "jiffies=",
    no "idle: jiffies ok")."""
    text = ["vcpu 0", "  sti", "  mmio-write 0xfee000f0 4 0x1ff"]
    text += ["  start-ap %d 0x10" % i for i in range(1, cpus)]
    if hz:
        text += ["  wrmsr %#x %#x" % (PVTICK_VECTOR, IDLE_TICK_VECTOR),
                 "  wrmsr %#x %d" % (PVTICK_HZ, hz)]
    text.append(serial_out("# idle: tick=%s\n" % ("pv" if hz else "none"))
                .rstrip("\n"))
    text += ["  out 0x3f9 1 1",
             "  mmio-write 0xfec00000 4 0x19", "  mmio-write 0xfec00010 4 0",
             "  mmio-write 0xfec00000 4 0x18",
             "  mmio-write 0xfec00010 4 %#x" % IDLE_SERIAL_VECTOR]
    text.append(serial_out("idle: %d cpus up, hz=%d\n" % (cpus, hz))
                .rstrip("\n"))
    halt = ["  loop", "    hlt", "  end"]
    text += halt
    if cpus > 1:
        text += ["vcpu 1-%d" % (cpus - 1), "  sti"] + halt
    text += ["on %#x" % IDLE_SERIAL_VECTOR, "  in 0x3f8 1",
             "  rdmsr %#x" % PVTICK_MISSED,
             serial_out("idle: woken by serial\n").rstrip("\n"), "  eoi",
             "on %#x" % IDLE_TICK_VECTOR, "  rdmsr %#x" % PVTICK_MISSED,
             "  eoi"]
    return "\n".join(text) + "\n"


def burst_script(cpus, hz, period_ms, duty):
    """burst.elf as the VMM sees it, roughly: vCPU 0 busy (no exit) for
    @duty % of every @period_ms, in HLT until its TSC-deadline timer for
    the rest; the others in HLT; the pv tick at @hz."""
    busy = period_ms * duty // 100
    text = ["vcpu 0", "  sti", "  mmio-write 0xfee000f0 4 0x1ff",
            "  mmio-write 0xfee00320 4 0x40050"]  # LVTT: TSC-deadline 0x50
    text += ["  start-ap %d 0x10" % i for i in range(1, cpus)]
    if hz:
        text += ["  wrmsr %#x %#x" % (PVTICK_VECTOR, IDLE_TICK_VECTOR),
                 "  wrmsr %#x %d" % (PVTICK_HZ, hz)]
    text += ["  loop", "    busy %d" % (busy * 1000000),
             "    wrmsr 0x6e0 tsc+%d" % ((period_ms - busy) * 1000000),
             "    hlt", "  end"]
    if cpus > 1:
        text += ["vcpu 1-%d" % (cpus - 1), "  sti", "  loop", "    hlt",
                 "  end"]
    text += ["on 0x50", "  eoi", "on %#x" % IDLE_TICK_VECTOR,
             "  rdmsr %#x" % PVTICK_MISSED, "  eoi"]
    return "\n".join(text) + "\n"


def hello_script(opts):
    """tests/vmm/guests/hello.elf: "hello", print= bytes of numbered
    lines, then cli; hlt for ever (stay=1) or the exit port (exit=);
    None for more than a script holds."""
    out, i, n = "hello\n", 0, int(opts.get("print", "0"))
    if n > 400000:
        return None
    while len(out) < 6 + n:
        out += "%010d%s\n" % (i, "".join(chr(97 + (i + j) % 26)
                                        for j in range(53)))
        i += 1
    text = "vcpu 0\n" + serial_out(out[:6 + n])
    if opts.get("stay", "0") == "0":
        text += "  exit %d\n" % int(opts.get("exit", "0"))
    return text  # its steps run out: cli; hlt for ever


def script_for(args, directory):
    """The path of a script, written in @directory, that stands for the
    guest image @args name, for vmm-scripted: idle.elf (without sleep=,
    or with hz=0), burst.elf, hello.elf and spin.elf have one; any other
    image gets a guest that halts with interrupts off at once: what comes
    before the guest runs (the options, the loader's checks) runs as with
    KVM, the guest's own output never comes."""
    kernel = os.path.basename(args[-1]) if args else ""
    cpus, append = 1, ""
    for i, a in enumerate(args[:-1]):
        if a == "--cpus":
            cpus = int(args[i + 1])
        elif a == "--append":
            append = args[i + 1]
    opts = dict(w.split("=", 1) for w in append.split() if "=" in w)
    hz = int(opts.get("hz", "250"))
    if kernel == "idle.elf" and "sleep" not in opts:
        text = idle_script(cpus, hz)
    elif kernel == "idle.elf" and hz == 0 and "tick" not in opts:
        text = idle_sleep_script(cpus, int(opts["sleep"]))
    elif kernel == "hello.elf" and hello_script(opts):
        text = hello_script(opts)
    elif kernel == "spin.elf":  # "spinning", then cli and no exit again
        text = "vcpu 0\n" + serial_out("spinning\n") + "  cli\n  spin\n"
    elif kernel == "burst.elf":
        text = burst_script(cpus, hz, int(opts.get("period", "100")),
                            int(opts.get("duty", "50")))
    else:  # no guest: what comes before it runs (options, the loader)
        text = "vcpu 0\n"  # its steps run out at once: cli; hlt
        kernel = "none"
    path = os.path.join(directory, "%s-%d.script" % (kernel, len(
        os.listdir(directory))))
    with open(path, "w") as f:
        f.write(text)
    return path


def timer_and_ipis(timer_hz, ipi_hz):
    """Three vCPUs: vCPU 0 a periodic LAPIC timer at @timer_hz (vector
    0x30), HLT; vCPU 1 HLT, woken by vCPU 2's IPIs (vector 0x50) at
    @ipi_hz; vCPU 2 busy between them (never halts)."""
    return """
vcpu 0
  sti
  mmio-write 0xfee000f0 4 0x1ff     # LAPIC SVR: enabled
  mmio-write 0xfee003e0 4 0xb       # TDCR: divide by 1 (1 ns a count)
  mmio-write 0xfee00320 4 0x20030   # LVTT: periodic, vector 0x30
  mmio-write 0xfee00380 4 %d        # TMICT: the period
  start-ap 1 0x10
  start-ap 2 0x10
  loop
    hlt
  end
on 0x30
  eoi
vcpu 1
  sti
  mmio-write 0xfee000f0 4 0x1ff
  loop
    hlt
  end
on 0x50
  eoi
vcpu 2
  mmio-write 0xfee000f0 4 0x1ff
  loop
    busy %d
    mmio-write 0xfee00310 4 0x1000000   # ICR high: APIC 1
    mmio-write 0xfee00300 4 0x50        # ICR low: fixed, vector 0x50
  end
""" % (1000000000 // timer_hz, 1000000000 // ipi_hz)


def halted_with_serial(ready=""):
    """Two vCPUs halted for good, vCPU 0 taking the serial interrupt
    (IOAPIC pin 4 -> vector 0x40, its handler reads the byte): fully idle
    until something from outside. @ready: a line written first."""
    return """
vcpu 0
  sti
  mmio-write 0xfee000f0 4 0x1ff
  mmio-write 0xfec00000 4 0x19      # IOAPIC pin 4, high dword: APIC 0
  mmio-write 0xfec00010 4 0
  mmio-write 0xfec00000 4 0x18      # low dword: vector 0x40, unmasked
  mmio-write 0xfec00010 4 0x40
  out 0x3f9 1 1                     # UART IER: receive interrupt
  start-ap 1 0x10
%s  loop
    hlt
  end
on 0x40
  in 0x3f8 1
  eoi
vcpu 1
  sti
  loop
    hlt
  end
""" % (serial_out(ready + "\n") if ready else "")
