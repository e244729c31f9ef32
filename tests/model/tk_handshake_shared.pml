/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * tk_handshake.pml: the constants, the shared variables (see the list in
 * tk_handshake.pml), the configuration, the ghost variables and the
 * helper macros used by the properties and the processes.
 */

/* enum sysidle_state */
#define NOT        0
#define SHORT      1
#define LONG       2
#define FULL       3
#define FULL_NOTED 4

/* tk_state */
#define TK_HALTED  0
#define TK_BUSY    1
#define WINDOW     2

/* tk phases in tk_set_busy() (ghost) */
#define TKP_DONE   0 /* not in tk_set_busy, or through it and its kick */
#define TKP_STORED 1 /* TK_BUSY stored, state not yet loaded */
#define TKP_REQ    2 /* state seen above SHORT, force_req not yet stored */
#define TKP_KICK   3 /* force_req stored, kick not yet sent or deferred */

/* the other vCPUs' phases (octr parity: even exactly in O_IDLE) */
#define O_RUNNING  0
#define O_IDLE     1
#define O_EXITING  2 /* counter odd, sysidle_reset not finished (locked) */
#define O_WAKING   3 /* its reset replaced FULL_NOTED, kick not yet deferred */

/* Configuration, chosen once by init: each vCPU has a pv tick (hz != 0);
 * with -DNO_PVTICK, one of them or both have none. */
bit  tk_hz = 1;
bit  o_hz = 1;

byte tk_state = TK_BUSY;   /* atomic_init(&idle.tk_state, TK_BUSY) */
bit  force_req;
bit  kick;                 /* eventfd */
byte state = NOT;
byte ophase = O_RUNNING;   /* vCPUs start running: idle_seq odd, ctr odd */
bit  stopped;              /* idle.stopped (housekeeping thread) */
bit  tk_tick = 1;          /* the timekeeper's pv tick armed */
bit  o_tick = 1;           /* the other vCPUs' pv tick armed */
bit  tk_irr;               /* a tick is pending for the timekeeper */
bit  tk_kick_due;          /* the tk holds back a kick (hk_kick_due_ns) */
bit  o_kick_due;           /* the others hold back a kick */
bit  backstop;             /* idle.kick_backstop armed */
bit  tk_run = 1;           /* the timekeeper's v->state == VCPU_RUNNING */
bit  tk_lock;              /* the timekeeper's v->lock, held across steps */
bit  o_lock;               /* the other vCPUs' v->lock, held across steps */
/* The housekeeping thread waits for that vCPU's lock (1: the timekeeper's,
 * 2: the others'): the vCPU does not take it again before (a fair lock, so
 * that the vCPU cannot starve the housekeeping thread). */
byte hk_wait;
/* The housekeeping loop (housekeeping.c) handles a pending kick before the
 * timers of the same poll() return: a timer callback may start while a
 * kick is pending only if that kick came after the poll() returned, so at
 * most one more poll round of timers runs before the kick is handled.
 * klate: a timer callback started with the kick already pending. */
bit  klate;

/* Ghost. */
byte tkp = TKP_DONE;
bit  hk_in;                /* the housekeeping thread is in a handler */
bit  busy_noted;           /* tk stored TK_BUSY while FULL_NOTED, not left */
bit  win_noted;            /* a window opened while FULL_NOTED, tick on */
bit  tk_halted_ghost;      /* the timekeeper is in HLT */
bit  stop_busy;            /* idle_stop() ran with tk_state == TK_BUSY */
/* Housekeeping thread only: idle_stop()'s tk_running (the timekeeper was
 * found VCPU_RUNNING); cleared by the restart it asks for. */
bit  tk_running;

#define TK_IS_BUSY (tk_state == TK_BUSY)
#define O_RUN (ophase == O_RUNNING || ophase == O_WAKING)
#define OTHERS_KICKING (ophase == O_WAKING || o_kick_due)
#define NOTHING_PENDING (!force_req && !kick && !tk_kick_due && !backstop && \
			 tkp == TKP_DONE && !OTHERS_KICKING && !hk_in)

/* Every step that may move the state off FULL_NOTED clears the ghosts. */
#define SET_STATE(v) \
	if :: state == FULL_NOTED && (v) != FULL_NOTED -> \
		busy_noted = 0; win_noted = 0 \
	   :: else -> skip fi; \
	state = (v)
