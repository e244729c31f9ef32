/* SPDX-License-Identifier: GPL-2.0-only */
/* The scripted guest's language (README.md): parsed into one step array. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sysidle/guest_abi.h>

#include "script.h"

#define XAPIC_BASE 0xfee00000ull
#define XAPIC_EOI 0x0b0
#define XAPIC_ICR_LO 0x300
#define XAPIC_ICR_HI 0x310
#define ICR_INIT_ASSERT 0x4500u /* delivery mode INIT, level assert */
#define ICR_STARTUP 0x4600u     /* delivery mode Start-up, level assert */
#define MAX_DEPTH 16            /* nested repeat ... end */
#define MAX_WORDS 5

struct parser {
	struct script *s;
	uint32_t cap;           /* steps allocated */
	uint32_t open[MAX_DEPTH]; /* the open REPEATs */
	uint32_t depth;
	uint32_t line;
	char *err;
	size_t err_len;
};

static int fail(struct parser *p, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(p->err, p->err_len, "line %u: ", p->line);

	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < p->err_len)
		vsnprintf(p->err + n, p->err_len - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static int number(struct parser *p, const char *w, uint64_t max,
		  uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(w, &end, 0);
	if (errno || end == w || *end || *w == '-' || *out > max)
		return fail(p, "'%s': not a number from 0 to %#llx", w,
			    (unsigned long long)max);
	return 0;
}

/* A value, or "tsc+N": N ns after the guest TSC when the step runs. */
static int value(struct parser *p, const char *w, struct script_step *st)
{
	if (!strncmp(w, "tsc+", 4)) {
		st->tsc_relative = true;
		return number(p, w + 4, UINT64_MAX / 2, &st->b);
	}
	return number(p, w, UINT64_MAX, &st->b);
}

/* "outs"'s bytes, as hex digits, two a byte. */
static int hex_bytes(struct parser *p, const char *w, struct script_step *st)
{
	size_t n = strlen(w);
	uint8_t *b;

	if (!n || n % 2 || n / 2 > SCRIPT_MAX_OUTS ||
	    strspn(w, "0123456789abcdefABCDEF") != n)
		return fail(p, "outs: 1 to %u bytes as hex digits",
			    SCRIPT_MAX_OUTS);
	b = malloc(n / 2);
	if (!b)
		return fail(p, "out of memory");
	for (size_t i = 0; i < n / 2; i++) {
		char pair[3] = { w[2 * i], w[2 * i + 1], 0 };

		b[i] = (uint8_t)strtoul(pair, NULL, 16);
	}
	st->data = b;
	st->len = (uint32_t)(n / 2);
	st->size = 1;
	return 0;
}

static int size_of(struct parser *p, const char *w, uint64_t max,
		   uint8_t *out)
{
	uint64_t n;

	if (number(p, w, max, &n))
		return -1;
	if (n != 1 && n != 2 && n != 4 && n != 8)
		return fail(p, "size %s: 1, 2, 4 or 8", w);
	*out = (uint8_t)n;
	return 0;
}

static struct script_step *add(struct parser *p, enum script_op op)
{
	struct script *s = p->s;
	struct script_step *st;

	if (s->nsections == 0) {
		fail(p, "a step before the first 'vcpu' or 'on' line");
		return NULL;
	}
	if (p->cap == SCRIPT_MAX_STEPS) {
		fail(p, "more than %u steps", SCRIPT_MAX_STEPS);
		return NULL;
	}
	st = &s->steps[p->cap++];
	memset(st, 0, sizeof(*st));
	st->op = op;
	st->line = p->line;
	s->sections[s->nsections - 1].prog.n++;
	return st;
}

static int mmio_write(struct parser *p, uint64_t addr, uint64_t val)
{
	struct script_step *st = add(p, OP_MMIO_WRITE);

	if (!st)
		return -1;
	st->a = addr;
	st->size = 4;
	st->b = val;
	return 0;
}

static int close_section(struct parser *p)
{
	if (p->depth)
		return fail(p, "a 'repeat' opened at line %u has no 'end'",
			    p->s->steps[p->open[p->depth - 1]].line);
	return 0;
}

static int section(struct parser *p, char **w, int n)
{
	struct script *s = p->s;
	struct script_section *sec;
	uint64_t a, b;
	char *dash;

	if (close_section(p))
		return -1;
	if (n != 2)
		return fail(p, "'%s' takes one argument", w[0]);
	if (s->nsections == SCRIPT_MAX_SECTIONS)
		return fail(p, "more than %u sections", SCRIPT_MAX_SECTIONS);
	sec = &s->sections[s->nsections];
	memset(sec, 0, sizeof(*sec));
	sec->prog.steps = &s->steps[p->cap];
	if (!strcmp(w[0], "vcpu")) {
		sec->kind = SECTION_VCPU;
		dash = strchr(w[1], '-');
		if (dash)
			*dash = 0;
		if (number(p, w[1], 1023, &a) ||
		    (dash && number(p, dash + 1, 1023, &b)))
			return -1;
		if (!dash)
			b = a;
		if (b < a)
			return fail(p, "vcpu %llu-%llu: an empty range",
				    (unsigned long long)a,
				    (unsigned long long)b);
	} else if (!strcmp(w[1], "nmi")) {
		sec->kind = SECTION_ON_NMI;
		a = b = 0;
	} else if (!strcmp(w[1], "default")) {
		sec->kind = SECTION_ON_DEFAULT;
		a = b = 0;
	} else {
		sec->kind = SECTION_ON_VECTOR;
		if (number(p, w[1], 255, &a))
			return -1;
		if (a < 16)
			return fail(p, "on %s: vectors 0-15 are exceptions",
				    w[1]);
		b = a;
	}
	sec->first = (uint32_t)a;
	sec->last = (uint32_t)b;
	s->nsections++;
	return 0;
}

static const struct {
	const char *name;
	enum script_op op;
	int args;  /* words after the name */
} simple[] = {
	{ "out", OP_OUT, 3 }, { "in", OP_IN, 2 }, { "outs", OP_OUTS, 2 },
	{ "mmio-write", OP_MMIO_WRITE, 3 }, { "mmio-read", OP_MMIO_READ, 2 },
	{ "wrmsr", OP_WRMSR, 2 }, { "rdmsr", OP_RDMSR, 1 },
	{ "hlt", OP_HLT, 0 }, { "hlt-until", OP_HLT_UNTIL, 1 },
	{ "shutdown", OP_SHUTDOWN, 0 },
	{ "sti", OP_STI, 0 }, { "cli", OP_CLI, 0 },
	{ "wait-irq", OP_WAIT_IRQ, 1 }, { "spin", OP_SPIN, 0 },
	{ "busy", OP_BUSY, 1 }, { "repeat", OP_REPEAT, 1 },
	{ "loop", OP_REPEAT, 0 }, { "end", OP_END, 0 },
};

/* The step a line names, with its operands. */
static int step(struct parser *p, char **w, int n)
{
	struct script_step *st;
	size_t i;

	for (i = 0; i < sizeof(simple) / sizeof(simple[0]); i++)
		if (!strcmp(w[0], simple[i].name))
			break;
	if (i == sizeof(simple) / sizeof(simple[0]))
		return fail(p, "unknown step '%s'", w[0]);
	if (n - 1 != simple[i].args)
		return fail(p, "'%s' takes %d argument%s", w[0],
			    simple[i].args, simple[i].args == 1 ? "" : "s");
	if (simple[i].op == OP_REPEAT && p->depth == MAX_DEPTH)
		return fail(p, "repeat nested deeper than %d", MAX_DEPTH);
	if (simple[i].op == OP_END && !p->depth)
		return fail(p, "'end' with no 'repeat' or 'loop' open");
	st = add(p, simple[i].op);
	if (!st)
		return -1;
	switch (st->op) {
	case OP_OUT:
	case OP_IN:
		if (number(p, w[1], 0xffff, &st->a) ||
		    size_of(p, w[2], 4, &st->size))
			return -1;
		return n == 4 ? value(p, w[3], st) : 0;
	case OP_OUTS:
		if (number(p, w[1], 0xffff, &st->a))
			return -1;
		return hex_bytes(p, w[2], st);
	case OP_MMIO_WRITE:
	case OP_MMIO_READ:
		if (number(p, w[1], UINT64_MAX, &st->a) ||
		    size_of(p, w[2], 8, &st->size))
			return -1;
		return n == 4 ? value(p, w[3], st) : 0;
	case OP_WRMSR:
		if (number(p, w[1], UINT32_MAX, &st->a))
			return -1;
		return value(p, w[2], st);
	case OP_RDMSR:
		return number(p, w[1], UINT32_MAX, &st->a);
	case OP_WAIT_IRQ:
	case OP_HLT_UNTIL:
		return number(p, w[1], 255, &st->a);
	case OP_BUSY:
		return number(p, w[1], 3600ull * 1000000000ull, &st->a);
	case OP_REPEAT:
		if (n == 2 && number(p, w[1], 1000000000, &st->a))
			return -1;
		if (n == 2 && !st->a)
			return fail(p, "repeat 0: use 'loop'");
		p->open[p->depth++] = (uint32_t)(st - p->s->steps);
		return 0;
	case OP_END: {
		uint32_t at = p->open[--p->depth];
		struct script_step *rep = &p->s->steps[at];

		if (rep < p->s->sections[p->s->nsections - 1].prog.steps)
			return fail(p, "'end' of a 'repeat' in another "
				    "section");
		/* jumps are relative to the section's first step */
		st->jump = at - (uint32_t)(p->s->sections[p->s->nsections -
					   1].prog.steps - p->s->steps);
		rep->jump = st->jump + (uint32_t)(st - rep) + 1;
		return 0;
	}
	default:
		return 0;
	}
}

/* Shorthands, each a few steps: eoi, exit CODE, start-ap ID VECTOR. */
static int shorthand(struct parser *p, char **w, int n, bool *done)
{
	uint64_t a, b;
	struct script_step *st;

	*done = true;
	if (!strcmp(w[0], "eoi")) {
		if (n != 1)
			return fail(p, "'eoi' takes no argument");
		return mmio_write(p, XAPIC_BASE + XAPIC_EOI, 0);
	}
	if (!strcmp(w[0], "exit")) {
		if (n != 2 || number(p, w[1], UINT32_MAX, &a))
			return n != 2 ? fail(p, "'exit' takes a code") : -1;
		st = add(p, OP_OUT);
		if (!st)
			return -1;
		st->a = GUEST_PORT_DEBUG_EXIT;
		st->size = 4;
		st->b = a;
		return 0;
	}
	if (!strcmp(w[0], "start-ap")) {
		if (n != 3)
			return fail(p, "'start-ap' takes an APIC ID and a "
				    "vector");
		if (number(p, w[1], 254, &a) || number(p, w[2], 255, &b))
			return -1;
		return mmio_write(p, XAPIC_BASE + XAPIC_ICR_HI, a << 24) ||
		       mmio_write(p, XAPIC_BASE + XAPIC_ICR_LO,
				  ICR_INIT_ASSERT) ||
		       mmio_write(p, XAPIC_BASE + XAPIC_ICR_HI, a << 24) ||
		       mmio_write(p, XAPIC_BASE + XAPIC_ICR_LO,
				  ICR_STARTUP | b) ? -1 : 0;
	}
	*done = false;
	return 0;
}

static int parse_line(struct parser *p, char *line)
{
	char *w[MAX_WORDS + 1], *save = NULL, *hash = strchr(line, '#');
	int n = 0;
	bool done;

	if (hash)
		*hash = 0;
	for (char *t = strtok_r(line, " \t\r", &save); t;
	     t = strtok_r(NULL, " \t\r", &save)) {
		if (n == MAX_WORDS)
			return fail(p, "more than %d words", MAX_WORDS);
		w[n++] = t;
	}
	if (!n)
		return 0;
	if (!strcmp(w[0], "vcpu") || !strcmp(w[0], "on"))
		return section(p, w, n);
	if (shorthand(p, w, n, &done) || done)
		return done ? 0 : -1;
	return step(p, w, n);
}

int script_load(const char *path, struct script *s, char *err,
		size_t err_len)
{
	struct parser p = { .s = s, .err = err, .err_len = err_len };
	char *text, *line, *next;
	size_t len;
	FILE *f;
	int rc = 0;

	memset(s, 0, sizeof(*s));
	f = fopen(path, "re");
	if (!f) {
		snprintf(err, err_len, "%s", strerror(errno));
		return -1;
	}
	text = malloc(SCRIPT_MAX_BYTES + 1);
	s->steps = calloc(SCRIPT_MAX_STEPS, sizeof(*s->steps));
	s->sections = calloc(SCRIPT_MAX_SECTIONS, sizeof(*s->sections));
	if (!text || !s->steps || !s->sections) {
		fclose(f);
		free(text);
		snprintf(err, err_len, "out of memory");
		return -1;
	}
	len = fread(text, 1, SCRIPT_MAX_BYTES + 1, f);
	fclose(f);
	if (len > SCRIPT_MAX_BYTES) {
		free(text);
		snprintf(err, err_len, "longer than %u bytes",
			 SCRIPT_MAX_BYTES);
		return -1;
	}
	text[len] = 0;
	for (line = text; line && !rc; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		p.line++;
		rc = parse_line(&p, line);
	}
	if (!rc)
		rc = close_section(&p);
	if (!rc && !s->nsections)
		rc = fail(&p, "no 'vcpu' section");
	free(text);
	return rc;
}

static const struct script_program *find(const struct script *s,
					 enum script_section_kind kind,
					 uint32_t id)
{
	for (uint32_t i = 0; i < s->nsections; i++)
		if (s->sections[i].kind == kind && s->sections[i].first <= id &&
		    id <= s->sections[i].last)
			return &s->sections[i].prog;
	return NULL;
}

const struct script_program *script_vcpu(const struct script *s, uint32_t id)
{
	return find(s, SECTION_VCPU, id);
}

const struct script_program *script_on_vector(const struct script *s,
					      uint32_t vec)
{
	const struct script_program *p = find(s, SECTION_ON_VECTOR, vec);

	return p ? p : find(s, SECTION_ON_DEFAULT, 0);
}

const struct script_program *script_on_nmi(const struct script *s)
{
	return find(s, SECTION_ON_NMI, 0);
}
