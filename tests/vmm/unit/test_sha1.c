/* SPDX-License-Identifier: GPL-2.0-only */
/* base/sha1.c against the FIPS 180-2 / RFC 3174 test vectors ("abc", the
 * 448-bit message, a million 'a'), fed whole and in pieces across the
 * block boundaries; the padding's edge lengths; and base/uuid.c: parsing
 * and version-5 uuids (values from Python's uuid.uuid5). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/sha1.h"
#include "base/uuid.h"

static char hex[2 * SHA1_DIGEST_SIZE + 1];

/* The digest of @len bytes of @p, fed @step bytes at a time (0: whole). */
static const char *digest(const void *p, size_t len, size_t step)
{
	const unsigned char *b = p;
	uint8_t md[SHA1_DIGEST_SIZE];
	struct sha1 c;
	size_t off = 0, n;

	sha1_init(&c);
	if (!step)
		step = len ? len : 1;
	while (off < len) {
		n = len - off < step ? len - off : step;
		sha1_update(&c, b + off, n);
		off += n;
	}
	sha1_final(&c, md);
	for (unsigned int i = 0; i < SHA1_DIGEST_SIZE; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return hex;
}

static const char msg448[] =
	"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";

START_TEST(vectors)
{
	ck_assert_str_eq(digest("abc", 3, 0),
			 "a9993e364706816aba3e25717850c26c9cd0d89d");
	ck_assert_uint_eq(strlen(msg448) * 8, 448);
	ck_assert_str_eq(digest(msg448, strlen(msg448), 0),
			 "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
	ck_assert_str_eq(digest("", 0, 0),
			 "da39a3ee5e6b4b0d3255bfef95601890afd80709");
}
END_TEST

/* The third vector, whole and in pieces that straddle the blocks. */
START_TEST(million_a)
{
	static const size_t steps[] = { 0, 1, 3, 63, 64, 65, 1000 };
	char *a = malloc(1000000);

	ck_assert_ptr_nonnull(a);
	memset(a, 'a', 1000000);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
		ck_assert_str_eq(digest(a, 1000000, steps[i]),
				 "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
	free(a);
}
END_TEST

/* Lengths where the padding needs one block or two. */
START_TEST(padding_edges)
{
	static const struct {
		size_t n;
		const char *md;
	} v[] = {
		{ 55, "c1c8bbdc22796e28c0e15163d20899b65621d65a" },
		{ 56, "c2db330f6083854c99d4b5bfb6e8f29f201be699" },
		{ 63, "03f09f5b158a7a8cdad920bddc29b81c18a551f5" },
		{ 64, "0098ba824b5c16427bd7a1122a5a442a25ec644d" },
		{ 65, "11655326c708d70319be2610e8a57d9a5b959d3b" },
		{ 119, "ee971065aaa017e0632a8ca6c77bb3bf8b1dfc56" },
		{ 120, "f34c1488385346a55709ba056ddd08280dd4c6d6" },
	};
	char a[128];

	memset(a, 'a', sizeof(a));
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		ck_assert_str_eq(digest(a, v[i].n, 0), v[i].md);
		ck_assert_str_eq(digest(a, v[i].n, 7), v[i].md);
	}
}
END_TEST

START_TEST(uuid_text)
{
	char u[UUID_STR_LEN] = "untouched";

	ck_assert_int_eq(uuid_parse("0F4C1A2B-3c4d-5E6f-8a9B-0123456789AB", u),
			 0);
	ck_assert_str_eq(u, "0f4c1a2b-3c4d-5e6f-8a9b-0123456789ab");
	strcpy(u, "untouched");
	ck_assert_int_eq(uuid_parse("0f4c1a2b3c4d5e6f8a9b0123456789ab", u), -1);
	ck_assert_int_eq(uuid_parse("0f4c1a2b-3c4d-5e6f-8a9b-0123456789a", u),
			 -1);
	ck_assert_int_eq(uuid_parse("0f4c1a2b-3c4d-5e6f-8a9b-0123456789abc",
				    u), -1);
	ck_assert_int_eq(uuid_parse("0f4c1a2b-3c4d-5e6f-8a9b-0123456789ag", u),
			 -1);
	ck_assert_int_eq(uuid_parse("0f4c1a2b+3c4d-5e6f-8a9b-0123456789ab", u),
			 -1);
	ck_assert_int_eq(uuid_parse("{0f4c1a2b-3c4d-5e6f-8a9b-0123456789a}",
				    u), -1);
	ck_assert_int_eq(uuid_parse("", u), -1);
	ck_assert_str_eq(u, "untouched");
}
END_TEST

START_TEST(uuid_name_based)
{
	static const struct {
		const char *name, *uuid;
	} v[] = {
		{ "idle-4242", "bbf96174-37cb-58b3-ac49-c5b8d6120645" },
		{ "web1", "0625b9a3-bece-5544-b583-91c630d8fdaf" },
		{ "", "45201a77-185e-5124-af95-65d104404e60" },
		{ "q\"x", "9a50f678-3464-59a8-845c-923d0400815e" },
	};
	char u[UUID_STR_LEN];

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		ck_assert_int_eq(uuid_v5(VMM_UUID_NAMESPACE, v[i].name,
					 strlen(v[i].name), u), 0);
		ck_assert_str_eq(u, v[i].uuid);
	}
	ck_assert_int_eq(uuid_v5("not a uuid", "x", 1, u), -1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sha1");
	TCase *tc = tcase_create("sha1");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, vectors);
	tcase_add_test(tc, million_a);
	tcase_add_test(tc, padding_edges);
	tcase_add_test(tc, uuid_text);
	tcase_add_test(tc, uuid_name_based);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
