// SPDX-License-Identifier: MIT
/*
 * The CM MAD field table (src/rdmacm/mad.c): the table checked against
 * itself, build -> parse -> equal for every message kind, and the bytes
 * of one message of each kind against those the hand-written parse/build
 * switches produced before the table (so the wire format did not move:
 * kernel rdma_cm and tests/rdmacm depend on it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cm.h"

/* one message of each kind, every field it carries set to a value that
 * fills the field's width with a distinct pattern */
static const uint8_t sample_pdata[224] = { 0xa5, 0x5a, 0x01, 0x02, 0x03 };
#define SAMPLE_GID(b) \
	{ \
		.raw = { b, \
			 b + 1, \
			 b + 2, \
			 b + 3, \
			 b + 4, \
			 b + 5, \
			 b + 6, \
			 b + 7, \
			 b + 8, \
			 b + 9, \
			 b + 10, \
			 b + 11, \
			 b + 12, \
			 b + 13, \
			 b + 14, \
			 b + 15 } \
	}
static const struct cm_msg samples[] = {
	{ .attr = CM_ATTR_REQ,
	  .tid = 0x1122334455667788ULL,
	  .local_id = 0xdeadbeef,
	  .sid = 0x0000000001060000ULL | 4791,
	  .ca_guid = 0x0102030405060708ULL,
	  .qkey = 0x80010203,
	  .qpn = 0xabcdef,
	  .resp_res = 0x10,
	  .init_depth = 0x0f,
	  .remote_resp_to = 20,
	  .qp_type = 1,
	  .flow_ctrl = 1,
	  .psn = 0x123456,
	  .local_resp_to = 21,
	  .retry_cnt = 7,
	  .mtu = 5,
	  .rnr_retry = 6,
	  .max_cm_retries = 15,
	  .srq = 1,
	  .ext_transport = 1,
	  .sgid = SAMPLE_GID(0x10),
	  .dgid = SAMPLE_GID(0x40),
	  .tclass = 0x48,
	  .hop_limit = 64,
	  .ack_timeout = 18,
	  .pdata = sample_pdata,
	  .pdata_len = 92 },
	{ .attr = CM_ATTR_MRA,
	  .tid = 2,
	  .local_id = 0x01020304,
	  .remote_id = 0x05060708,
	  .msg_mraed = 2,
	  .service_to = 31,
	  .pdata = sample_pdata,
	  .pdata_len = 5 },
	{ .attr = CM_ATTR_REJ,
	  .tid = 3,
	  .local_id = 0x11111111,
	  .remote_id = 0x22222222,
	  .msg_rejected = 1,
	  .reason = 28,
	  .pdata = sample_pdata,
	  .pdata_len = 148 },
	{ .attr = CM_ATTR_REP,
	  .tid = 4,
	  .local_id = 0x33333333,
	  .remote_id = 0x44444444,
	  .qkey = 0x55555555,
	  .qpn = 0x123457,
	  .eecn = 0x765432,
	  .psn = 0xfedcba,
	  .resp_res = 4,
	  .init_depth = 3,
	  .target_ack_delay = 19,
	  .flow_ctrl = 1,
	  .rnr_retry = 7,
	  .srq = 1,
	  .ca_guid = 0x8877665544332211ULL,
	  .pdata = sample_pdata,
	  .pdata_len = 3 },
	{ .attr = CM_ATTR_RTU,
	  .tid = 5,
	  .local_id = 0x66666666,
	  .remote_id = 0x77777777 },
	{ .attr = CM_ATTR_DREQ,
	  .tid = 6,
	  .local_id = 0x88888888,
	  .remote_id = 0x99999999,
	  .qpn = 0xaaaaaa,
	  .pdata = sample_pdata,
	  .pdata_len = 220 },
	{ .attr = CM_ATTR_DREP,
	  .tid = 7,
	  .local_id = 0xbbbbbbbb,
	  .remote_id = 0xcccccccc },
	{ .attr = CM_ATTR_SIDR_REQ,
	  .tid = 8,
	  .local_id = 0xdddddddd,
	  .sid = 0x0000000001110000ULL | 7174,
	  .pdata = sample_pdata,
	  .pdata_len = 36 },
	{ .attr = CM_ATTR_SIDR_REP,
	  .tid = 9,
	  .local_id = 0xeeeeeeee,
	  .reason = 2,
	  .qpn = 0x0bcdef,
	  .sid = 0x0000000001110000ULL | 7174,
	  .qkey = 0x01234567,
	  .pdata = sample_pdata,
	  .pdata_len = 10 },
};

/* cm_mad_build(samples[i]) at commit a694301 (the switch statements) */
static const char *const golden[] = {
	/* attr 0x0010 */
	"010702030000000011223344556677880010000000000000deadbeef00000000"
	"00000000010612b701020304050607080000000080010203abcdef100000000f"
	"000000a3123456afffff56f9ffffffff101112131415161718191a1b1c1d1e1f"
	"404142434445464748494a4b4c4d4e4f00000002484000900000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"00000000a55a0102030000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000",
	/* attr 0x0011 */
	"0107020300000000000000000000000200110000000000000102030405060708"
	"80f8a55a01020300000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000",
	/* attr 0x0012 */
	"0107020300000000000000000000000300120000000000001111111122222222"
	"4000001c00000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"000000000000000000000000a55a010203000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000",
	/* attr 0x0013 */
	"0107020300000000000000000000000400130000000000003333333344444444"
	"555555551234570076543200fedcba00040399f08877665544332211a55a0100"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000",
	/* attr 0x0014 */
	"0107020300000000000000000000000500140000000000006666666677777777"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000",
	/* attr 0x0015 */
	"0107020300000000000000000000000600150000000000008888888899999999"
	"aaaaaa00a55a0102030000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000",
	/* attr 0x0016 */
	"010702030000000000000000000000070016000000000000bbbbbbbbcccccccc"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000",
	/* attr 0x0017 */
	"010702030000000000000000000000080017000000000000ddddddddffff0000"
	"0000000001111c06a55a01020300000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000",
	/* attr 0x0018 */
	"010702030000000000000000000000090018000000000000eeeeeeee02000000"
	"0bcdef000000000001111c060123456700000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"000000000000000000000000000000000000000000000000a55a010203000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000",
};

#define NSAMPLES (sizeof(samples) / sizeof(samples[0]))

static void hex(const uint8_t *b, size_t n, char *out)
{
	size_t i;

	for (i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static void test_golden_bytes(void **state)
{
	char got[2 * CM_MAD_SIZE + 1];
	uint8_t mad[CM_MAD_SIZE];
	size_t i;

	(void)state;
	assert_int_equal(NSAMPLES, sizeof(golden) / sizeof(golden[0]));
	for (i = 0; i < NSAMPLES; i++) {
		cm_mad_build(mad, &samples[i]);
		hex(mad, sizeof(mad), got);
		if (strcmp(got, golden[i]))
			fail_msg("attr 0x%04x: built\n%s\nwant\n%s",
				 samples[i].attr, got, golden[i]);
	}
}

/* every message kind we speak has a row, and a sample above */
static void test_every_kind(void **state)
{
	static const uint16_t kinds[] = {
		CM_ATTR_REQ,  CM_ATTR_MRA,	CM_ATTR_REJ,
		CM_ATTR_REP,  CM_ATTR_RTU,	CM_ATTR_DREQ,
		CM_ATTR_DREP, CM_ATTR_SIDR_REQ, CM_ATTR_SIDR_REP,
	};
	size_t i, j, n;

	(void)state;
	cm_mad_descs(&n);
	assert_int_equal(n, sizeof(kinds) / sizeof(kinds[0]));
	for (i = 0; i < n; i++) {
		assert_non_null(cm_mad_desc(kinds[i]));
		for (j = 0; j < NSAMPLES; j++)
			if (samples[j].attr == kinds[i])
				break;
		assert_true(j < NSAMPLES);
	}
	assert_null(cm_mad_desc(0x0019)); /* LAP: not spoken */
}

/* the rows against themselves: each field inside the CM data and before
 * the private data, its member wide enough, no two fields sharing a bit */
static void test_table_consistent(void **state)
{
	const struct cm_mad_desc *d = NULL;
	size_t n, i, k, b;

	(void)state;
	d = cm_mad_descs(&n);
	for (i = 0; i < n; i++) {
		uint8_t owner[CM_MAD_SIZE * 8];

		memset(owner, 0xff, sizeof(owner));
		assert_true(24 + d[i].pdata_off + d[i].pdata_len <= CM_MAD_SIZE);
		for (k = 0; k < d[i].nfields; k++) {
			const struct cm_field *f = &d[i].fields[k];
			size_t first = (size_t)f->off * 8 + f->bit;

			if (f->bit > 7 || f->width == 0 ||
			    first + f->width > (size_t)d[i].pdata_off * 8)
				fail_msg("%s.%s: outside the fields area",
					 d[i].name, f->name);
			if (f->width == 128) {
				if (f->bit || f->size != 16)
					fail_msg("%s.%s: a GID is 16 whole bytes",
						 d[i].name, f->name);
			} else if (f->bit + f->width > 64 ||
				   (f->size && f->width > f->size * 8) ||
				   (!f->size && f->width < 64 &&
				    f->value >> f->width)) {
				fail_msg("%s.%s: width %u does not fit",
					 d[i].name, f->name, f->width);
			}
			if (f->size &&
			    f->member + f->size > sizeof(struct cm_msg))
				fail_msg("%s.%s: member outside struct cm_msg",
					 d[i].name, f->name);
			for (b = first; b < first + f->width; b++) {
				if (owner[b] != 0xff)
					fail_msg("%s.%s overlaps %s at bit %zu",
						 d[i].name, f->name,
						 d[i].fields[owner[b]].name, b);
				owner[b] = (uint8_t)k;
			}
		}
	}
}

/* a value that fills the width, different per field and per round */
static uint64_t pattern(unsigned int round, size_t k, unsigned int width)
{
	uint64_t v = 0x9e3779b97f4a7c15ULL * (round * 131 + k + 1);

	v ^= v >> 29;
	if (round == 0)
		v = ~0ULL; /* all ones: catches a short mask */
	return width >= 64 ? v : v & ((1ULL << width) - 1);
}

static void set_member(struct cm_msg *m, const struct cm_field *f, uint64_t v)
{
	uint8_t *p = (uint8_t *)m + f->member;
	uint8_t v8 = (uint8_t)v;
	uint16_t v16 = (uint16_t)v;
	uint32_t v32 = (uint32_t)v;

	switch (f->size) {
	case 1:
		memcpy(p, &v8, 1);
		break;
	case 2:
		memcpy(p, &v16, 2);
		break;
	case 4:
		memcpy(p, &v32, 4);
		break;
	case 8:
		memcpy(p, &v, 8);
		break;
	case 16:
		memset(p, (int)(v & 0xff), 16);
		p[0] ^= 0x5a;
		break;
	}
}

static void test_round_trip(void **state)
{
	const struct cm_mad_desc *d;
	uint8_t pdata[CM_MAD_SIZE];
	size_t n, i, k;
	unsigned int round;

	(void)state;
	for (k = 0; k < sizeof(pdata); k++)
		pdata[k] = (uint8_t)(k * 7 + 3);
	d = cm_mad_descs(&n);
	for (i = 0; i < n; i++) {
		for (round = 0; round < 8; round++) {
			struct cm_msg in = { 0 }, out;
			uint8_t mad[CM_MAD_SIZE];

			in.attr = d[i].attr;
			in.tid = pattern(round, 99, 64);
			in.pdata = pdata;
			in.pdata_len = d[i].pdata_len;
			for (k = 0; k < d[i].nfields; k++)
				set_member(&in, &d[i].fields[k],
					   pattern(round, k,
						   d[i].fields[k].width));
			cm_mad_build(mad, &in);
			assert_int_equal(cm_mad_parse(mad, sizeof(mad), &out),
					 0);
			assert_int_equal(out.attr, in.attr);
			assert_true(out.tid == in.tid);
			assert_int_equal(out.pdata_len, d[i].pdata_len);
			assert_memory_equal(out.pdata, pdata, d[i].pdata_len);
			for (k = 0; k < d[i].nfields; k++) {
				const struct cm_field *f = &d[i].fields[k];

				if (!f->size)
					continue;
				if (memcmp((uint8_t *)&in + f->member,
					   (uint8_t *)&out + f->member, f->size))
					fail_msg("%s.%s round %u: not what was built",
						 d[i].name, f->name, round);
			}
			/* and nothing else came back set */
			out.pdata = in.pdata;
			assert_memory_equal(&in, &out, sizeof(in));
		}
	}
}

/* what is not a CM Send of a kind we know is refused */
static void test_parse_refuses(void **state)
{
	uint8_t mad[CM_MAD_SIZE];
	struct cm_msg m;

	(void)state;
	cm_mad_build(mad, &samples[0]);
	assert_int_equal(cm_mad_parse(mad, CM_MAD_SIZE - 1, &m), -1);
	mad[3] = 0x01; /* method Get */
	assert_int_equal(cm_mad_parse(mad, CM_MAD_SIZE, &m), -1);
	cm_mad_build(mad, &samples[0]);
	mad[17] = 0x19; /* LAP */
	assert_int_equal(cm_mad_parse(mad, CM_MAD_SIZE, &m), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden_bytes),
		cmocka_unit_test(test_every_kind),
		cmocka_unit_test(test_table_consistent),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_parse_refuses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
