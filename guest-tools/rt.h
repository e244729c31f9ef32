/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The guest runtime: the interfaces of the freestanding pieces every guest
 * image links (one .c/.S file per concern, see meson.build). Only the ABI
 * header is shared with the VMM.
 */
#ifndef GUEST_RT_H
#define GUEST_RT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sysidle/guest_abi.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;

#define MAX_CPUS 1024
#define STACK_SIZE 0x4000ul
#define STACK_REGION 0x01000000ul /* AP stacks: 16 MiB .. 32 MiB, not zeroed */

/* Interrupt vectors used by the runtime and the images. */
#define VEC_PIC_BASE 0x20  /* 8259s remapped here, then masked */
#define VEC_SERIAL 0x34    /* IOAPIC pin GUEST_IRQ_COM1 */
#define VEC_CALL 0x40      /* run_on_cpu() wake-up */
#define VEC_IPI_FIXED 0x41
#define VEC_IPI_ALL 0x42
#define VEC_IPI_ALLBUT 0x43
#define VEC_IPI_SELF 0x44
#define VEC_IPI_SELFMSR 0x45
#define VEC_PENDING 0x46   /* IRR/ISR/TPR check (priority class 4) */
#define VEC_TIMER 0x50     /* timer checks and one-shot wake-ups */
#define VEC_RELAY_ARM 0x51 /* tick.c: post a relayed wake-up to the relay */
#define VEC_RELAY_FIRE 0x52 /* tick.c: the relay's one-shot timer */
#define VEC_TICK 0x60      /* the periodic tick (tick.c) */
#define VEC_PING 0x70
#define VEC_PONG 0x71
#define VEC_SPURIOUS 0xff

/* ---- io.h: port I/O, MSRs, CPUID, TSC (inline) ---- */
static inline void outb(u16 port, u8 v) { __asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port)); }
static inline void outw(u16 port, u16 v) { __asm__ volatile("outw %0, %1" : : "a"(v), "Nd"(port)); }
static inline void outl(u16 port, u32 v) { __asm__ volatile("outl %0, %1" : : "a"(v), "Nd"(port)); }
static inline u8 inb(u16 port)
{
	u8 v;
	__asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}
static inline u64 rdmsr(u32 msr)
{
	u32 lo, hi;
	__asm__ volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(msr));
	return ((u64)hi << 32) | lo;
}
static inline void wrmsr(u32 msr, u64 v)
{
	__asm__ volatile("wrmsr" : : "c"(msr), "a"((u32)v), "d"((u32)(v >> 32)) : "memory");
}
static inline u64 rdtsc(void)
{
	u32 lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((u64)hi << 32) | lo;
}
static inline void cpuid(u32 leaf, u32 sub, u32 *a, u32 *b, u32 *c, u32 *d)
{
	__asm__ volatile("cpuid" : "=a"(*a), "=b"(*b), "=c"(*c), "=d"(*d) : "a"(leaf), "c"(sub));
}
static inline void cpu_relax(void) { __asm__ volatile("pause" ::: "memory"); }
static inline void irq_disable(void) { __asm__ volatile("cli" ::: "memory"); }
static inline void irq_enable(void) { __asm__ volatile("sti" ::: "memory"); }
/* Enable interrupts and halt: the STI shadow makes the pair atomic. */
static inline void safe_halt(void) { __asm__ volatile("sti; hlt" ::: "memory"); }
static inline void mfence(void) { __asm__ volatile("mfence" ::: "memory"); }
#define READ_ONCE(x) (*(volatile __typeof__(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile __typeof__(x) *)&(x) = (v))

/* ---- lib.c ---- */
void *memset(void *d, int c, size_t n);
void *memcpy(void *d, const void *s, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);
int strncmp(const char *a, const char *b, size_t n);
int vsnprintf(char *buf, size_t size, const char *fmt, va_list ap);
int snprintf(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
u64 parse_u64(const char *s, u64 dflt);

/* ---- console.c: 16550 at GUEST_PORT_COM1, polled output ---- */
void console_init(void);
void console_write(const char *s, size_t n); /* takes the console lock */
void console_write_unlocked(const char *s, size_t n);
void console_lock(void);
bool console_trylock(u64 spins);
void console_unlock(void);

/* ---- exit.c ---- */
__attribute__((noreturn)) void guest_exit(u32 code);
#define EXIT_OK 0
#define EXIT_FAIL 1
#define EXIT_WATCHDOG 2
#define EXIT_EXCEPTION 3
#define EXIT_BADIRQ 4

/* ---- cmdline.c ---- */
void cmdline_init(const char *mb_cmdline);
const char *cmdline_get(const char *key); /* value or NULL; "" for a bare key */
u64 cmdline_u64(const char *key, u64 dflt);
bool cmdline_is(const char *key, const char *value); /* key=value present */
const char *cmdline_raw(void);

/* ---- idt.c + isr.S ---- */
struct irq_frame {
	u64 r15, r14, r13, r12, r11, r10, r9, r8;
	u64 rbp, rdi, rsi, rdx, rcx, rbx, rax;
	u64 vector, error;
	u64 rip, cs, rflags, rsp, ss;
};
typedef void (*irq_handler_t)(struct irq_frame *f);
void idt_init(void); /* BSP: build the table */
void idt_load(void); /* every CPU */
void irq_set_handler(u8 vector, irq_handler_t h); /* EOI is sent after h returns */
void nmi_set_handler(irq_handler_t h);

/* ---- percpu.c ---- */
struct percpu {
	struct percpu *self; /* %gs:0 */
	u32 index;
	u32 apic_id;
	volatile u32 online;
	void (*volatile call_fn)(void *);
	void *volatile call_arg;
	volatile u32 call_done;
	/* Event counters for the checks and workloads (written by handlers). */
	volatile u32 cnt_fixed, cnt_all, cnt_allbut, cnt_self, cnt_selfmsr;
	volatile u32 cnt_nmi, cnt_timer, cnt_pending, cnt_call, cnt_logical;
	volatile u64 timer_tsc;
	volatile u32 pend_isr_in_handler, pend_irr_in_handler;
	volatile u64 pv_eoi;    /* KVM's PV EOI flag word (bit 0: pending) */
	volatile u32 pv_eois;   /* EOIs this CPU made through it */
} __attribute__((aligned(64)));
extern struct percpu percpus[MAX_CPUS];
extern u32 nr_cpus;        /* CPUs the runtime brings up (smp.c cpus_enumerate) */
extern volatile u32 cpus_online;
static inline struct percpu *this_cpu(void)
{
	struct percpu *p;
	__asm__ volatile("mov %%gs:0, %0" : "=r"(p));
	return p;
}
void percpu_setup(u32 index); /* sets GS base on the calling CPU */

/* ---- apic.c: xAPIC (MMIO) and x2APIC (MSR) behind one interface ---- */
extern bool apic_x2; /* the chosen mode, for all CPUs */
/* KVM's PV EOI (guest_abi.h MSR_KVM_PV_EOI) when the hypervisor has it,
 * unless pveoi=0: every CPU's EOI clears its flag instead of an APIC write
 * where the hypervisor set it */
extern bool apic_pv_eoi;
void apic_choose_mode(void); /* BSP, from apic=, pveoi= and CPUID */
void apic_cpu_init(void);    /* every CPU: switch mode, enable, mask LVTs */
u32 apic_read(u32 reg);
void apic_write(u32 reg, u32 v);
u32 apic_id(void);
void apic_eoi(void);
void apic_send_ipi(u32 dest, u32 icr_low); /* dest ignored with a shorthand */
bool apic_isr_bit(u8 vector);
bool apic_irr_bit(u8 vector);

/* ---- ioapic.c ---- */
u32 ioapic_read(u32 reg);
void ioapic_write(u32 reg, u32 v);
void ioapic_route(u32 pin, u8 vector, u32 dest_apic_id, bool masked);
u64 ioapic_read_redir(u32 pin);

/* ---- pic.c: 8259 and PIT (accepted, remapped, masked) ---- */
void pic_init_masked(void);
void pit_stop(void);

/* ---- acpi.c: the CPUs the firmware's MADT describes ---- */
/* The APIC IDs of the MADT's enabled Local APIC and Local x2APIC entries, in
 * table order, duplicates dropped: at most max go into ids, *described gets
 * how many there are. Returns the number stored, or -1 without an MADT (no
 * RSDP, or no valid table on the way to it). */
int acpi_cpu_apic_ids(u32 *ids, u32 max, u32 *described);

/* ---- fwcfg.c ---- */
void fwcfg_read(u16 key, void *buf, size_t n);
void fwcfg_read_more(void *buf, size_t n); /* continue the current item */
u32 fwcfg_nb_cpus(void); /* FW_CFG_NB_CPUS, at least 1; 1 without fw_cfg */

/* ---- timer.c: TSC and LAPIC timer ---- */
extern u64 tsc_khz;
extern bool tsc_from_cpuid;
void tsc_init(void); /* BSP, after apic_cpu_init */
u64 ns_to_tsc(u64 ns);
u64 tsc_to_ns(u64 ticks);
void timer_oneshot(u8 vector, u32 ns);
void timer_oneshot_ns(u8 vector, u64 ns); /* any length: divide up to 128, clamped */
void timer_periodic(u8 vector, u32 ns);
void timer_tsc_deadline(u8 vector, u64 deadline);
void timer_stop(void);
void udelay_tsc(u64 ns); /* busy wait */

/* ---- watchdog.c ---- */
void watchdog_start(u64 seconds);
void watchdog_check(void); /* exits with EXIT_WATCHDOG when expired */
/* Spin (interrupts as the caller left them) until *p >= v or ns elapse. */
bool wait_u32(volatile u32 *p, u32 v, u64 ns);

/* ---- cpus.c: which CPUs there are, and their APIC IDs ---- */
/* What cpus_enumerate() found, for the images to report and check. */
struct cpu_census {
	bool from_madt;   /* APIC IDs from the MADT; else fw_cfg's count, ID = index */
	u32 madt_enabled; /* enabled MADT entries (0 without an MADT) */
	u32 fwcfg_cpus;   /* FW_CFG_NB_CPUS (1 without fw_cfg), before any clamp */
	u32 over_limit;   /* described but beyond MAX_CPUS */
	u32 xapic_unreachable; /* xAPIC mode: IDs of 255 and up, and those whose
				* 8-bit ID they repeat, left offline */
	u32 max_apic_id;  /* the highest APIC ID among nr_cpus */
};
extern struct cpu_census cpu_census;
/* BSP, after apic_choose_mode() and apic_cpu_init(): fill percpus[].apic_id
 * (the BSP's own ID first, then the MADT's order) and nr_cpus. In xAPIC mode
 * the CPUs an 8-bit destination cannot address alone are left out (cpus.c). */
void cpus_enumerate(void);

/* ---- smp.c ---- */
u32 smp_boot(void); /* INIT-SIPI-SIPI every AP; returns CPUs online */
/* Run fn(arg) on CPU cpu from its idle loop; wait up to ns. */
bool run_on_cpu(u32 cpu, void (*fn)(void *), void *arg, u64 ns);
void run_on_cpu_async(u32 cpu, void (*fn)(void *), void *arg);
__attribute__((noreturn)) void idle_loop(void);

/* ---- tick.c: the periodic tick and jiffies (the one place for them) ---- */
enum tick_kind { TICK_NONE, TICK_LAPIC, TICK_PV, TICK_TSCDL };
extern volatile u64 jiffies;     /* ticks elapsed since tick_start() */
extern volatile u64 tick_taken;  /* tick interrupts handled */
extern volatile u64 tick_missed; /* pv: sum of the MISSED counts folded in */
extern volatile u64 tick_last_tsc; /* TSC when the last tick was taken */
extern enum tick_kind tick_kind;
extern u32 tick_hz;
extern u32 tick_cpu;        /* the CPU that called tick_start() */
extern u64 tick_start_tsc;  /* TSC when the tick was started */
bool tick_pv_available(void); /* this VMM's signature and SYSIDLE_HV_F_PVTICK */
/* Start the tick on the calling CPU: the pv tick when available, else a
 * periodic LAPIC timer (tick=lapic forces it); hz=0: no tick. */
void tick_start(u32 hz);
void tick_stop(void);
const char *tick_kind_name(void); /* "pv", "lapic" or "none" */
/* After a wake-up that was not a tick: fold MSR_SYSIDLE_PVTICK_MISSED into
 * jiffies (pv tick, on the tick CPU only) and return jiffies. */
u64 tick_sync(void);
/* floor((tsc - tick_start_tsc) in seconds * tick_hz): the ticks due by tsc */
u64 tick_expected(u64 tsc);
/* The calling CPU's LAPIC timer carries the LAPIC tick. */
bool tick_owns_lapic_timer(void);
/* ... and its one-shot wake-ups go through another CPU's timer (relay). */
bool tick_wake_relayed(void);
/* Wake the calling CPU at or after TSC deadline: a one-shot LAPIC timer on
 * vector; where the LAPIC tick owns the timer, another CPU's one-shot that
 * sends vector back as an IPI, or with no other CPU the next tick (at most
 * one period late). For HLT loops that recheck the TSC after each wake-up. */
void wake_at_tsc(u8 vector, u64 deadline);
void wake_cancel(void); /* stop the one-shot (leaves a LAPIC tick alone) */

/* ---- memfill.c: a RAM region filled with a known pattern, checked later ---- */
#define MEMFILL_BASE 0x04000000ul /* 64 MiB: above the image and the AP stacks */
struct memfill {
	u64 base, bytes, seed;
	u64 checksum; /* the fill's: what a check of unchanged memory gives */
};
/* Where the RAM the region may use ends (below the first hole, 3 GiB). */
u64 memfill_ram_end(void);
/* Fills @mib MiB from MEMFILL_BASE with the pattern of @seed; false (and
 * nothing written) when that does not fit. */
bool memfill_fill(struct memfill *m, u64 mib, u64 seed);
/* The checksum of the region as it is now; the pages with a word that
 * differs from the fill, and the address of the first such word. */
u64 memfill_check(const struct memfill *m, u64 *bad_pages, u64 *first_bad);

/* ---- main.c (runtime) calls the image's entry ---- */
void guest_main(void);
extern const char *guest_name;
extern u32 mb_mem_upper_kb; /* multiboot mem_upper, 0 when absent */

#endif
