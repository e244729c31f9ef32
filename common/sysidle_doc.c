/* SPDX-License-Identifier: GPL-2.0-only */
/* The urn:sysidle:1 document's writer and reader: see sysidle_doc.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sysidle_doc.h"

/* @s XML-escaped (malloc'd). */
static char *xml_escape(const char *s)
{
	char *out = malloc(6 * strlen(s) + 1), *p = out;

	if (!out)
		return NULL;
	for (; *s; s++) {
		switch (*s) {
		case '&': p = stpcpy(p, "&amp;"); break;
		case '<': p = stpcpy(p, "&lt;"); break;
		case '>': p = stpcpy(p, "&gt;"); break;
		case '\'': p = stpcpy(p, "&apos;"); break;
		case '"': p = stpcpy(p, "&quot;"); break;
		default: *p++ = *s;
		}
	}
	*p = '\0';
	return out;
}

static const char *const ratio_attr[3] = {
	"full_idle_ratio_1m", "full_idle_ratio_1h", "full_idle_ratio_24h",
};

/* The three ratios as " full_idle_ratio_1m='0.973' ..." into @buf (@n:
 * room for them). A permille above 1000 is written as 1000. */
static void duty_attributes(const struct sysidle_doc *doc, char *buf,
			    size_t n)
{
	size_t len = 0;

	for (int i = 0; i < 3 && len < n; i++) {
		unsigned int p = doc->full_idle_permille[i] > 1000 ? 1000 :
				 doc->full_idle_permille[i];
		int k = snprintf(buf + len, n - len, " %s='%u.%03u'",
				 ratio_attr[i], p / 1000, p % 1000);

		if (k < 0)
			break;
		len += (size_t)k;
	}
}

/* The attributes, in their one order, single-quoted. */
static char *attributes(const struct sysidle_doc *doc)
{
	const char *name = sysidle_state_name(doc->state);
	time_t t = (time_t)(doc->since_unix_ms / 1000);
	char since[40], *host;
	struct tm tm;
	char *s, *lease = NULL, duty[160] = "", left[48] = "";

	gmtime_r(&t, &tm);
	strftime(since, sizeof(since), "%Y-%m-%dT%H:%M:%S", &tm);
	if (doc->valid_until_unix_ms) {
		host = xml_escape(doc->writer_host);
		if (!host || asprintf(&lease, " writer_host='%s' writer_pid='%"
				      PRIu64 "' writer_start_ticks='%" PRIu64
				      "' valid_until_unix_ms='%" PRIu64 "'",
				      host, doc->writer_pid,
				      doc->writer_start_ticks,
				      doc->valid_until_unix_ms) < 0)
			lease = NULL;
		free(host);
		if (!lease)
			return NULL;
	}
	if (doc->has_duty)
		duty_attributes(doc, duty, sizeof(duty));
	if (doc->left_full_idle_unix_ms)
		snprintf(left, sizeof(left), " left_full_idle_unix_ms='%" PRIu64
			 "'", doc->left_full_idle_unix_ms);
	if (asprintf(&s, "name='%s' state='%s' num='%d' since='%s.%03uZ' "
		     "since_unix_ms='%" PRIu64 "' full_idle_periods='%" PRIu64
		     "' vcpus='%u'%s%s%s", name, name, (int)doc->state, since,
		     (unsigned int)(doc->since_unix_ms % 1000),
		     doc->since_unix_ms, doc->full_idle_periods,
		     doc->vcpus, duty, left, lease ? lease : "") < 0)
		s = NULL;
	free(lease);
	return s;
}

char *sysidle_doc_element(const struct sysidle_doc *doc)
{
	char *a = attributes(doc), *xml;

	if (!a || asprintf(&xml, "<state %s/>", a) < 0)
		xml = NULL;
	free(a);
	return xml;
}

char *sysidle_doc_domain_xml(const struct hook_domain *dom,
			     const struct sysidle_doc *doc)
{
	char *name = xml_escape(dom->name ? dom->name : "");
	char *uuid = xml_escape(dom->uuid ? dom->uuid : "");
	char *a = attributes(doc), *xml = NULL;

	if (name && uuid && a &&
	    asprintf(&xml, "<domain type='kvm'><name>%s</name><uuid>%s</uuid>"
		     "<vcpu>%u</vcpu><metadata><" SYSIDLE_DOC_PREFIX ":state "
		     "xmlns:" SYSIDLE_DOC_PREFIX "='" SYSIDLE_DOC_NS "' %s/>"
		     "</metadata></domain>\n", name, uuid, dom->ncpus, a) < 0)
		xml = NULL;
	free(name);
	free(uuid);
	free(a);
	return xml;
}

/* ---- the reader ---- */

/* The start of the first tag whose local name is "state", or NULL. @xml
 * is NUL-terminated. Linear: a tag name ends at the next '<' too. */
static const char *find_state(const char *xml)
{
	for (const char *p = strchr(xml, '<'); p; p = strchr(p + 1, '<')) {
		const char *n = p + 1, *end = n + strcspn(n, " \t\r\n/><");
		const char *colon = memchr(n, ':', (size_t)(end - n));

		if (colon)
			n = colon + 1;
		if (end - n == 5 && !memcmp(n, "state", 5))
			return end;
	}
	return NULL;
}

/* The value of attribute @key in the tag whose attributes start at @p
 * (into @buf), or NULL when absent or too long. */
static const char *attr(const char *p, const char *key, char *buf,
			size_t size)
{
	size_t klen = strlen(key);

	for (;;) {
		const char *name, *v, *q;
		size_t nlen;

		p += strspn(p, " \t\r\n");
		if (!*p || *p == '/' || *p == '>')
			return NULL;
		name = p;
		p += strcspn(p, " \t\r\n=/>");
		nlen = (size_t)(p - name);
		p += strspn(p, " \t\r\n");
		if (*p != '=')
			return NULL; /* malformed */
		p++;
		p += strspn(p, " \t\r\n");
		if (*p != '\'' && *p != '"')
			return NULL;
		v = p + 1;
		q = strchr(v, *p);
		if (!q)
			return NULL;
		p = q + 1;
		if (nlen != klen || memcmp(name, key, klen))
			continue;
		if ((size_t)(q - v) >= size)
			return NULL;
		memcpy(buf, v, (size_t)(q - v));
		buf[q - v] = '\0';
		return buf;
	}
}

/* @s as a decimal number; false when it is not one. */
static bool parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (!s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return !errno && !*end;
}

/* @s as a decimal 0..1 ("0", "1", "0.5", "0.973", "1.000"; digits past
 * the third decimal dropped, at most 18 of them) in thousandths; false
 * when it is not one. */
static bool parse_ratio(const char *s, unsigned int *permille)
{
	unsigned int whole, frac = 0;
	size_t nd;

	if (!s || (s[0] != '0' && s[0] != '1'))
		return false;
	whole = (unsigned int)(s[0] - '0');
	s++;
	if (*s == '.') {
		s++;
		nd = strspn(s, "0123456789");
		if (nd == 0 || nd > 18 || s[nd])
			return false;
		for (size_t i = 0; i < 3; i++)
			frac = frac * 10 + (i < nd ? (unsigned int)(s[i] - '0') : 0);
		if (whole == 1 && s[strspn(s, "0")])
			return false; /* above 1 */
	} else if (*s) {
		return false;
	}
	*permille = whole * 1000 + frac;
	return true;
}

/* The duty cycle's optional attributes of the tag at @p into @doc; false
 * when one is there but bad. */
static bool parse_duty(const char *p, struct sysidle_doc *doc)
{
	char buf[64];

	for (int i = 0; i < 3; i++) {
		if (!attr(p, ratio_attr[i], buf, sizeof(buf)))
			continue;
		if (!parse_ratio(buf, &doc->full_idle_permille[i]))
			return false;
		doc->has_duty = true;
	}
	return !attr(p, "left_full_idle_unix_ms", buf, sizeof(buf)) ||
	       parse_u64(buf, &doc->left_full_idle_unix_ms);
}

int sysidle_doc_parse(const char *xml, struct sysidle_doc *doc)
{
	const char *p;
	char buf[64];
	uint64_t v;
	int st = -1, s;

	if (!xml || strnlen(xml, SYSIDLE_DOC_MAX + 1) > SYSIDLE_DOC_MAX)
		return -1;
	p = find_state(xml);
	if (!p)
		return -1;
	*doc = (struct sysidle_doc){ 0 };
	for (int i = 0; i < 3; i++) {
		const char *key = i == 0 ? "name" : i == 1 ? "state" : "num";
		const char *val = attr(p, key, buf, sizeof(buf));

		if (!val)
			continue;
		if (i < 2)
			s = sysidle_state_from_name(val);
		else
			s = parse_u64(val, &v) && v < SYSIDLE_NR_STATES ?
			    (int)v : -1;
		if (s < 0 || (st >= 0 && s != st))
			return -1;
		st = s;
	}
	if (st < 0 ||
	    !parse_u64(attr(p, "since_unix_ms", buf, sizeof(buf)),
		       &doc->since_unix_ms))
		return -1;
	doc->state = (enum sysidle_state)st;
	if (attr(p, "full_idle_periods", buf, sizeof(buf)) &&
	    !parse_u64(buf, &doc->full_idle_periods))
		return -1;
	if (attr(p, "vcpus", buf, sizeof(buf))) {
		if (!parse_u64(buf, &v) || v > UINT32_MAX)
			return -1;
		doc->vcpus = (unsigned int)v;
	}
	if ((attr(p, "valid_until_unix_ms", buf, sizeof(buf)) &&
	     !parse_u64(buf, &doc->valid_until_unix_ms)) ||
	    (attr(p, "writer_pid", buf, sizeof(buf)) &&
	     !parse_u64(buf, &doc->writer_pid)) ||
	    (attr(p, "writer_start_ticks", buf, sizeof(buf)) &&
	     !parse_u64(buf, &doc->writer_start_ticks)))
		return -1;
	if (!parse_duty(p, doc))
		return -1;
	/* Longer than a host name: left "" (not unescaped: host names have
	 * no character that needs it). */
	(void)attr(p, "writer_host", doc->writer_host, sizeof(doc->writer_host));
	return 0;
}
