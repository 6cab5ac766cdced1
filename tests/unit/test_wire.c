// SPDX-License-Identifier: MIT
/*
 * Unit tests of the wire layer: the opcode table against itself and the
 * IBA header layouts, PSN arithmetic, header accessors, and the ICRC.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "wire/wire.h"

static uint32_t rng_state = 4791;

/* xorshift32: deterministic, so a failure reproduces */
static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 17;
	rng_state ^= rng_state << 5;
	return rng_state;
}

static void fill_random(uint8_t *p, size_t n)
{
	while (n--)
		*p++ = (uint8_t)rnd();
}

/* ---- opcode table ---- */

/* IBA order of the extension headers after the BTH (FETH precedes RETH). */
static const struct {
	enum uroce_hdr_type type;
	unsigned int len;
} hdr_order[] = {
	{ UROCE_HDR_XRCETH, UROCE_XRCETH_LEN },
	{ UROCE_HDR_DETH, UROCE_DETH_LEN },
	{ UROCE_HDR_FETH, UROCE_FETH_LEN },
	{ UROCE_HDR_RETH, UROCE_RETH_LEN },
	{ UROCE_HDR_ATMETH, UROCE_ATMETH_LEN },
	{ UROCE_HDR_AETH, UROCE_AETH_LEN },
	{ UROCE_HDR_ATMACK, UROCE_ATMACK_LEN },
	{ UROCE_HDR_IMMDT, UROCE_IMMDT_LEN },
	{ UROCE_HDR_IETH, UROCE_IETH_LEN },
};

#define ALL_BITS ((1u << 27) - 1)
#define HDR_BITS ((1u << UROCE_NUM_HDR_TYPES) - 1)

static bool has(uint32_t mask, uint32_t bits)
{
	return (mask & bits) == bits;
}

static int popcount(uint32_t v)
{
	return __builtin_popcount(v);
}

static void test_opcode_layout(void **state)
{
	int op, valid = 0;

	for (op = 0; op < 256; op++) {
		const struct uroce_opcode_info *o = &uroce_opcode[op];
		unsigned int at = UROCE_BTH_LEN;
		size_t i;

		if (!o->name) {
			assert_int_equal(o->mask, 0);
			assert_int_equal(o->length, 0);
			continue;
		}
		valid++;
		assert_int_equal(o->mask & ~ALL_BITS, 0);
		/* each present header starts where the previous one ends */
		for (i = 0; i < sizeof(hdr_order) / sizeof(hdr_order[0]); i++) {
			if (!(o->mask & (1u << hdr_order[i].type)))
				continue;
			assert_int_equal(o->offset[hdr_order[i].type], at);
			at += hdr_order[i].len;
		}
		if (o->mask & UROCE_M_CNP)
			at += UROCE_CNP_RSVD_LEN;
		assert_int_equal(o->length, at);
		assert_int_equal(o->offset[UROCE_HDR_PAYLOAD], o->length);
		assert_true(o->length <= UROCE_MAX_HDR_LEN);
	}
	/* RC 0x00-0x14, 0x16, 0x17, 0x1c, 0x1d; UC 12; UD 2; CNP;
	 * XRC 0xa0-0xb4, 0xb6, 0xb7 */
	assert_int_equal(valid, 25 + 12 + 2 + 1 + 23);
}

static void test_opcode_classes(void **state)
{
	const uint32_t ops = UROCE_M_SEND | UROCE_M_WRITE | UROCE_M_READ |
			     UROCE_M_ATOMIC | UROCE_M_ACK |
			     UROCE_M_ATOMIC_WRITE | UROCE_M_FLUSH;
	const uint32_t classes = UROCE_M_RC | UROCE_M_UC | UROCE_M_UD |
				 UROCE_M_CNP | UROCE_M_XRC;
	int op;

	for (op = 0; op < 256; op++) {
		const struct uroce_opcode_info *o = &uroce_opcode[op];
		const struct uroce_opcode_info *rc;
		uint32_t m = o->mask;
		bool req = m & UROCE_M_REQ;
		const char *n = o->name;

		if (!n)
			continue;

		/* transport class matches the top bits of the opcode */
		assert_int_equal(popcount(m & classes), 1);
		switch (op >> 5) {
		case 0:
			assert_true(m & UROCE_M_RC);
			assert_memory_equal(n, "RC_", 3);
			break;
		case 1:
			assert_true(m & UROCE_M_UC);
			assert_memory_equal(n, "UC_", 3);
			assert_true(m & (UROCE_M_SEND | UROCE_M_WRITE));
			break;
		case 3:
			assert_true(m & UROCE_M_UD);
			assert_memory_equal(n, "UD_", 3);
			assert_true(m & UROCE_M_SEND);
			break;
		case 4:
			assert_int_equal(m, UROCE_M_CNP);
			assert_string_equal(n, "CNP");
			continue;
		case 5:
			/* the RC opcode with the same low bits, plus an
			 * XRCETH on requests */
			assert_true(m & UROCE_M_XRC);
			assert_memory_equal(n, "XRC_", 4);
			rc = &uroce_opcode[uroce_op_rc(op)];
			assert_non_null(rc->name);
			assert_string_equal(n + 4, rc->name + 3);
			assert_int_equal(m & ~(UROCE_M_XRC | UROCE_M_XRCETH),
					 rc->mask & ~UROCE_M_RC);
			assert_int_equal(!!(m & UROCE_M_XRCETH), req);
			break;
		default:
			fail_msg("opcode 0x%02x in an unused class", op);
		}

		/* exactly one operation, and the right direction */
		assert_int_equal(popcount(m & ops), 1);
		if (m & (UROCE_M_SEND | UROCE_M_WRITE | UROCE_M_ATOMIC_WRITE |
			 UROCE_M_FLUSH))
			assert_true(req);
		if (m & UROCE_M_ACK)
			assert_false(req);
		if (m & (UROCE_M_READ | UROCE_M_ATOMIC))
			assert_int_equal(req, strstr(n, "RESPONSE") == NULL &&
						      strstr(n, "ACK") == NULL);

		/* position in the message, from the name */
		if (strstr(n, "_FIRST"))
			assert_int_equal(m & UROCE_M_ONLY, UROCE_M_FIRST);
		else if (strstr(n, "_LAST"))
			assert_int_equal(m & UROCE_M_ONLY, UROCE_M_LAST);
		else if (strstr(n, "_MIDDLE"))
			assert_true(m & UROCE_M_MIDDLE);
		else
			assert_true(has(m, UROCE_M_ONLY));
		if (m & UROCE_M_MIDDLE)
			assert_false(m & UROCE_M_ONLY);

		/* which headers each kind of packet carries (IBA 9.2) */
		assert_int_equal(!!(m & UROCE_M_IMMDT), !!strstr(n, "_IMM"));
		assert_int_equal(!!(m & UROCE_M_IETH), !!strstr(n, "_INV"));
		assert_int_equal(!!(m & UROCE_M_INV), !!(m & UROCE_M_IETH));
		assert_int_equal(!!(m & UROCE_M_DETH), !!(m & UROCE_M_UD));
		assert_int_equal(!!(m & UROCE_M_FETH), !!(m & UROCE_M_FLUSH));
		assert_int_equal(!!(m & UROCE_M_ATMETH),
				 (m & UROCE_M_ATOMIC) && req);
		assert_int_equal(!!(m & UROCE_M_ATMACK),
				 (m & UROCE_M_ATOMIC) && !req);
		assert_int_equal(!!(m & UROCE_M_AETH),
				 !req && !(m & UROCE_M_MIDDLE));
		assert_int_equal(!!(m & UROCE_M_RETH),
				 ((m & UROCE_M_WRITE) && (m & UROCE_M_FIRST)) ||
					 ((m & UROCE_M_READ) && req) ||
					 (m & (UROCE_M_ATOMIC_WRITE |
					       UROCE_M_FLUSH)));
		assert_int_equal(!!(m & UROCE_M_PAYLOAD),
				 !!(m & (UROCE_M_SEND | UROCE_M_WRITE |
					 UROCE_M_ATOMIC_WRITE)) ||
					 ((m & UROCE_M_READ) && !req));
	}
}

/* A few layouts spelled out, so a consistent but wrong table still fails. */
static void test_opcode_spot(void **state)
{
	const struct uroce_opcode_info *o;

	o = &uroce_opcode[UROCE_OP_RC_WRITE_ONLY_IMM];
	assert_string_equal(o->name, "RC_WRITE_ONLY_IMM");
	assert_int_equal(o->length, 32);
	assert_int_equal(o->offset[UROCE_HDR_IMMDT], 28);

	o = &uroce_opcode[UROCE_OP_RC_FLUSH];
	assert_string_equal(o->name, "RC_FLUSH");
	assert_int_equal(o->offset[UROCE_HDR_FETH], 12);
	assert_int_equal(o->offset[UROCE_HDR_RETH], 16);
	assert_int_equal(o->length, 32);
	assert_false(o->mask & UROCE_M_PAYLOAD);

	o = &uroce_opcode[UROCE_OP_RC_ATOMIC_WRITE];
	assert_string_equal(o->name, "RC_ATOMIC_WRITE");
	assert_true(o->mask & UROCE_M_PAYLOAD);
	assert_int_equal(o->offset[UROCE_HDR_PAYLOAD], 28);

	o = &uroce_opcode[UROCE_OP_RC_ATOMIC_ACK];
	assert_int_equal(o->offset[UROCE_HDR_ATMACK], 16);
	assert_int_equal(o->length, 24);

	o = &uroce_opcode[UROCE_OP_RC_CMP_SWAP];
	assert_int_equal(o->length, 40);

	o = &uroce_opcode[UROCE_OP_UD_SEND_ONLY_IMM];
	assert_int_equal(o->offset[UROCE_HDR_IMMDT], 20);
	assert_int_equal(o->length, 24);

	assert_string_equal(uroce_opcode[UROCE_OP_RC_SEND_LAST_INV].name,
			    "RC_SEND_LAST_INV");
	assert_string_equal(uroce_opcode[UROCE_OP_UC_WRITE_MIDDLE].name,
			    "UC_WRITE_MIDDLE");
	assert_null(uroce_opcode[0x15].name);
	assert_null(uroce_opcode[0x40].name);
	assert_null(uroce_opcode[0xff].name);

	o = &uroce_opcode[UROCE_OP_XRC_WRITE_ONLY];
	assert_int_equal(o->offset[UROCE_HDR_XRCETH], 12);
	assert_int_equal(o->offset[UROCE_HDR_RETH], 16);
	assert_int_equal(o->length, 32);
	o = &uroce_opcode[UROCE_OP_XRC_BASE | UROCE_OP_RC_CMP_SWAP];
	assert_int_equal(o->offset[UROCE_HDR_ATMETH], 16);
	assert_int_equal(o->length, 44);
	o = &uroce_opcode[UROCE_OP_XRC_ACK];
	assert_int_equal(o->offset[UROCE_HDR_AETH], 12);
	assert_int_equal(o->length, 16);
	assert_null(uroce_opcode[0xb5].name);
}

static void test_mtu(void **state)
{
	assert_int_equal(uroce_mtu_bytes(0), 0);
	assert_int_equal(uroce_mtu_bytes(1), 256);
	assert_int_equal(uroce_mtu_bytes(2), 512);
	assert_int_equal(uroce_mtu_bytes(3), 1024);
	assert_int_equal(uroce_mtu_bytes(4), 2048);
	assert_int_equal(uroce_mtu_bytes(5), 4096);
	assert_int_equal(uroce_mtu_bytes(6), 0);
	assert_int_equal(uroce_mtu_bytes(-1), 0);
}

/* ---- PSN arithmetic ---- */

static void test_psn(void **state)
{
	int i;

	assert_int_equal(uroce_psn_add(0xffffff, 1), 0);
	assert_int_equal(uroce_psn_add(0xfffff0, 0x20), 0x10);
	assert_int_equal(uroce_psn_add(5, 0), 5);
	/* adding the mask is subtracting one */
	assert_int_equal(uroce_psn_add(0, UROCE_PSN_MASK), 0xffffff);

	assert_int_equal(uroce_psn_cmp(7, 7), 0);
	assert_true(uroce_psn_cmp(0, 0xffffff) > 0); /* across the wrap */
	assert_true(uroce_psn_cmp(0xffffff, 0) < 0);
	assert_true(uroce_psn_cmp(0x7fffff, 0) > 0); /* edge of the window */
	assert_true(uroce_psn_cmp(0x800000, 0) < 0);
	assert_int_equal(uroce_psn_cmp(0x10, 0xfffff0), 0x20);

	for (i = 0; i < 100000; i++) {
		uint32_t a = rnd() & UROCE_PSN_MASK;
		uint32_t d = rnd() % 0x7fffff + 1; /* 1 .. 2^23 - 1 */
		uint32_t b = uroce_psn_add(a, d);

		assert_true(b <= UROCE_PSN_MASK);
		assert_int_equal(uroce_psn_cmp(b, a), (int32_t)d);
		assert_int_equal(uroce_psn_cmp(a, b), -(int32_t)d);
	}
}

/* ---- header accessors ---- */

/* AETH credit codes (IBA 9.7.5.1.1's table) and the code for a count */
static void test_aeth_credits(void **state)
{
	static const uint32_t table[31] = {
		0,    1,    2,	  3,	 4,	6,     8,     12,
		16,   24,   32,	  48,	 64,	96,    128,   192,
		256,  384,  512,  768,	 1024,	1536,  2048,  3072,
		4096, 6144, 8192, 12288, 16384, 24576, 32768,
	};
	uint32_t n;
	uint8_t c;

	(void)state;
	for (c = 0; c <= 30; c++)
		assert_int_equal(uroce_aeth_credits(c), table[c]);
	/* the largest code whose count is at most n: never more than there
	 * are, and the next code says more */
	for (n = 0; n <= 70000; n++) {
		c = uroce_aeth_credit_code(n);
		assert_true(c <= 30);
		assert_true(table[c] <= n);
		if (c < 30)
			assert_true(table[c + 1] > n);
	}
	assert_int_equal(uroce_aeth_credit_code(UINT32_MAX), 30);
}

static void test_bth(void **state)
{
	static const uint8_t want[UROCE_BTH_LEN] = {
		0x0a, 0xe0, 0x80, 0x01, 0x00, 0x12,
		0x34, 0x56, 0x80, 0xab, 0xcd, 0xef,
	};
	uint8_t b[UROCE_BTH_LEN];
	int i;

	bth_init(b, UROCE_OP_RC_WRITE_ONLY, true, 2, 0x8001, 0x123456, true,
		 0xabcdef);
	assert_memory_equal(b, want, sizeof(want));
	assert_int_equal(bth_opcode(b), UROCE_OP_RC_WRITE_ONLY);
	assert_true(bth_se(b));
	assert_true(bth_mig(b));
	assert_int_equal(bth_pad(b), 2);
	assert_int_equal(bth_tver(b), 0);
	assert_int_equal(bth_pkey(b), 0x8001);
	assert_false(bth_fecn(b));
	assert_false(bth_becn(b));
	assert_int_equal(bth_qpn(b), 0x123456);
	assert_true(bth_ackreq(b));
	assert_int_equal(bth_psn(b), 0xabcdef);

	/* out-of-range arguments are masked, never spill into neighbours */
	bth_init(b, 0x81, false, 7, 0xffff, 0xffffffff, false, 0xffffffff);
	assert_int_equal(bth_pad(b), 3);
	assert_int_equal(bth_qpn(b), 0xffffff);
	assert_int_equal(bth_psn(b), 0xffffff);
	assert_int_equal(b[4], 0);
	assert_int_equal(b[8], 0);
	assert_false(bth_se(b));
	assert_false(bth_ackreq(b));

	for (i = 0; i < 1000; i++) {
		uint8_t op = (uint8_t)rnd(), pad = rnd() & 3;
		uint16_t pkey = (uint16_t)rnd();
		uint32_t qpn = rnd() & UROCE_QPN_MASK;
		uint32_t psn = rnd() & UROCE_PSN_MASK;
		bool se = rnd() & 1, ack = rnd() & 1;

		bth_init(b, op, se, pad, pkey, qpn, ack, psn);
		assert_int_equal(bth_opcode(b), op);
		assert_int_equal(bth_se(b), se);
		assert_int_equal(bth_pad(b), pad);
		assert_int_equal(bth_pkey(b), pkey);
		assert_int_equal(bth_qpn(b), qpn);
		assert_int_equal(bth_ackreq(b), ack);
		assert_int_equal(bth_psn(b), psn);
	}
}

static void test_ext_headers(void **state)
{
	static const uint8_t reth_want[UROCE_RETH_LEN] = {
		0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
		0xde, 0xad, 0xbe, 0xef, 0x00, 0x00, 0x10, 0x00,
	};
	uint8_t h[UROCE_ATMETH_LEN];
	uint32_t be;

	reth_init(h, 0x0123456789abcdefull, 0xdeadbeef, 4096);
	assert_memory_equal(h, reth_want, sizeof(reth_want));
	assert_int_equal(reth_va(h), 0x0123456789abcdefull);
	assert_int_equal(reth_rkey(h), 0xdeadbeef);
	assert_int_equal(reth_len(h), 4096);

	aeth_init(h, UROCE_AETH_NAK | UROCE_NAK_REM_ACCESS, 0xfedcba);
	assert_int_equal(h[0], 0x62);
	assert_int_equal(aeth_syn(h) & UROCE_AETH_TYPE_MASK, UROCE_AETH_NAK);
	assert_int_equal(aeth_msn(h), 0xfedcba);

	atmeth_init(h, 0x1122334455667788ull, 0x99aabbcc, 0x0102030405060708ull,
		    0xf0e0d0c0b0a09080ull);
	assert_int_equal(h[0], 0x11);
	assert_int_equal(h[8], 0x99);
	assert_int_equal(h[12], 0x01);
	assert_int_equal(h[20], 0xf0);
	assert_int_equal(atmeth_va(h), 0x1122334455667788ull);
	assert_int_equal(atmeth_rkey(h), 0x99aabbcc);
	assert_int_equal(atmeth_swap_add(h), 0x0102030405060708ull);
	assert_int_equal(atmeth_comp(h), 0xf0e0d0c0b0a09080ull);

	atmack_init(h, 0xa5a5a5a55a5a5a5aull);
	assert_int_equal(atmack_orig(h), 0xa5a5a5a55a5a5a5aull);
	assert_int_equal(h[0], 0xa5);

	/* immediate data stays in network order end to end */
	be = htonl(0x11223344);
	immdt_set_raw(h, be);
	assert_int_equal(h[0], 0x11);
	assert_int_equal(immdt_raw(h), be);

	ieth_init(h, 0xcafe0001);
	assert_int_equal(h[0], 0xca);
	assert_int_equal(ieth_rkey(h), 0xcafe0001);

	memset(h, 0xee, sizeof(h));
	deth_init(h, 0x80010000, 0x000001);
	assert_int_equal(h[4], 0); /* reserved */
	assert_int_equal(deth_qkey(h), 0x80010000);
	assert_int_equal(deth_sqp(h), 1);

	feth_init(h, 1, 2);
	assert_int_equal(uroce_rd_be32(h), 0x12);
	assert_int_equal(feth_sel(h), 1);
	assert_int_equal(feth_plt(h), 2);

	uroce_icrc_store(h, 0x78f353f3);
	assert_int_equal(h[0], 0xf3);
	assert_int_equal(h[3], 0x78);
}

/* ---- ICRC ---- */

struct vec {
	const char *what;
	const uint8_t *pkt; /* IPv4 header, UDP header, RoCE */
	size_t len;
};

/* RoCE v2 CNP captured from a ConnectX-4 Lx (in scapy's test suite). */
static const uint8_t cx4_cnp[] = {
	0x45, 0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11, 0x91, 0x61,
	0x0a, 0x00, 0x11, 0x01, 0x0a, 0x00, 0x12, 0x01, 0x00, 0x00, 0x12, 0xb7,
	0x00, 0x28, 0x00, 0x00, 0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x01, 0x18,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x82, 0xfd, 0x00, 0x2a,
};

/* UC SEND ONLY with 2 bytes of pad (scapy's RoCE regression example). */
static const uint8_t uc_send[] = {
	0x45, 0x01, 0x00, 0x40, 0x04, 0x78, 0x40, 0x00, 0x40, 0x11, 0xb4,
	0xd5, 0xc0, 0xa8, 0x00, 0x07, 0xc0, 0xa8, 0x00, 0x07, 0xc0, 0x00,
	0x12, 0xb7, 0x00, 0x2c, 0xac, 0xa2, 0x24, 0x60, 0xff, 0xff, 0x00,
	0x00, 0x00, 0xd3, 0x00, 0xcf, 0x17, 0x10, 'F',	'0',  0x81, 0x8b,
	0xe2, 0x89, '5',  0xd9, 0x0e, 0x9a, 0x95, 'P',	'T',  0x01, 0xbe,
	0x88, '^',  'P',  0x00, 0x00, 0x78, 0xf3, 0x53, 0xf3,
};

static void ip_from_v4(struct uroce_icrc_ip *ip, const uint8_t *p)
{
	memset(ip, 0, sizeof(*ip));
	ip->family = AF_INET;
	ip->ip_id = (uint16_t)(p[4] << 8 | p[5]);
	ip->df = p[6] & 0x40;
	memcpy(&ip->src.v4, p + 12, 4);
	memcpy(&ip->dst.v4, p + 16, 4);
	ip->sport = (uint16_t)(p[20] << 8 | p[21]);
	ip->dport = (uint16_t)(p[22] << 8 | p[23]);
}

static void test_icrc_vectors(void **state)
{
	const struct vec vecs[] = {
		{ "cx4 cnp", cx4_cnp, sizeof(cx4_cnp) },
		{ "uc send", uc_send, sizeof(uc_send) },
	};
	size_t i;

	for (i = 0; i < sizeof(vecs) / sizeof(vecs[0]); i++) {
		const uint8_t *roce = vecs[i].pkt + 28;
		size_t len = vecs[i].len - 28;
		struct uroce_icrc_ip ip;
		struct iovec iov = { (void *)roce, len - UROCE_ICRC_LEN };
		uint8_t icrc[4];

		ip_from_v4(&ip, vecs[i].pkt);
		uroce_icrc_store(icrc, uroce_icrc_compute(&ip, &iov, 1));
		assert_memory_equal(icrc, roce + len - 4, 4);
		assert_true(uroce_icrc_check(&ip, roce, len));
		/* the check must not need the IP id or DF */
		ip.ip_id = 0;
		ip.df = !ip.df;
		assert_true(uroce_icrc_check(&ip, roce, len));
	}
}

/* A random RoCE packet of len bytes (BTH .. ICRC) with a valid ICRC. */
static void make_pkt(uint8_t *p, size_t len, const struct uroce_icrc_ip *ip)
{
	struct iovec iov = { p, len - UROCE_ICRC_LEN };

	if (len < UROCE_BTH_LEN + UROCE_ICRC_LEN) {
		fail_msg("runt packet of %zu bytes", len);
		return;
	}
	fill_random(p, len);
	uroce_icrc_store(p + len - UROCE_ICRC_LEN,
			 uroce_icrc_compute(ip, &iov, 1));
}

static void random_ip(struct uroce_icrc_ip *ip, int family)
{
	memset(ip, 0, sizeof(*ip));
	ip->family = family;
	if (family == AF_INET) {
		ip->src.v4.s_addr = rnd();
		ip->dst.v4.s_addr = rnd();
		ip->ip_id = (uint16_t)rnd();
		ip->df = rnd() & 1;
	} else {
		fill_random(ip->src.v6.s6_addr, 16);
		fill_random(ip->dst.v6.s6_addr, 16);
	}
	ip->sport = (uint16_t)rnd();
	ip->dport = UROCE_UDP_PORT;
}

static const size_t lens[] = {
	16, 17,	 20,  28,	 32,	    36,	       44,
	60, 100, 256, 1024 + 28, 2048 + 32, 4096 + 16, 4096 + 44,
};

static void test_icrc_roundtrip(void **state)
{
	static uint8_t p[4096 + 64];
	size_t i;
	int fam, n;

	for (fam = 0; fam < 2; fam++) {
		for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
			for (n = 0; n < 64; n++) {
				struct uroce_icrc_ip ip;

				random_ip(&ip, fam ? AF_INET6 : AF_INET);
				if (!fam && n < 4) {
					/* the extremes of the 17 bits */
					ip.ip_id = (n & 1) ? 0xffff : 0;
					ip.df = n & 2;
				}
				make_pkt(p, lens[i], &ip);
				assert_true(uroce_icrc_check(&ip, p, lens[i]));
			}
		}
	}
}

/* Splitting the packet across an iovec, even inside the BTH, changes nothing. */
static void test_icrc_iov(void **state)
{
	static uint8_t p[2048];
	struct uroce_icrc_ip ip;
	struct iovec whole = { p, sizeof(p) }, iov[4];
	uint32_t want;
	int n;

	random_ip(&ip, AF_INET);
	fill_random(p, sizeof(p));
	want = uroce_icrc_compute(&ip, &whole, 1);
	for (n = 0; n < 1000; n++) {
		size_t a = rnd() % (sizeof(p) + 1);
		size_t b = a + rnd() % (sizeof(p) - a + 1);
		size_t c = b + rnd() % (sizeof(p) - b + 1);

		if (n < 14) { /* every split point inside the BTH */
			a = (size_t)n;
			b = a;
			c = a + 1;
		}
		iov[0] = (struct iovec){ p, a };
		iov[1] = (struct iovec){ p + a, b - a };
		iov[2] = (struct iovec){ p + b, c - b };
		iov[3] = (struct iovec){ p + c, sizeof(p) - c };
		assert_int_equal(uroce_icrc_compute(&ip, iov, 4), want);
	}
}

/* What the ICRC does and does not cover, besides the packet bytes. */
static void test_icrc_coverage(void **state)
{
	static uint8_t p[300];
	struct uroce_icrc_ip ip, other;
	struct iovec iov = { p, sizeof(p) - UROCE_ICRC_LEN };
	uint32_t want;

	random_ip(&ip, AF_INET);
	make_pkt(p, sizeof(p), &ip);
	want = uroce_icrc_compute(&ip, &iov, 1);

	/* FECN/BECN may be set by switches on the way (IBA A17.8) */
	p[4] ^= 0xc0;
	assert_int_equal(uroce_icrc_compute(&ip, &iov, 1), want);
	assert_true(uroce_icrc_check(&ip, p, sizeof(p)));
	p[4] ^= 0xc0;

	/* but the id and DF are covered on the sending side */
	other = ip;
	other.ip_id ^= 1;
	assert_int_not_equal(uroce_icrc_compute(&other, &iov, 1), want);
	other = ip;
	other.df = !other.df;
	assert_int_not_equal(uroce_icrc_compute(&other, &iov, 1), want);

	/* addresses and ports are covered */
	other = ip;
	other.src.v4.s_addr ^= htonl(1);
	assert_false(uroce_icrc_check(&other, p, sizeof(p)));
	other = ip;
	other.dst.v4.s_addr ^= htonl(0x100);
	assert_false(uroce_icrc_check(&other, p, sizeof(p)));
	other = ip;
	other.sport ^= 0x8000;
	assert_false(uroce_icrc_check(&other, p, sizeof(p)));
	other = ip;
	other.dport ^= 1;
	assert_false(uroce_icrc_check(&other, p, sizeof(p)));

	/* the length is covered: a shortened packet fails */
	assert_false(uroce_icrc_check(&ip, p, sizeof(p) - 4));

	/* IPv4 and IPv6 differ; garbage families and runts are refused */
	other = ip;
	other.family = AF_INET6;
	assert_false(uroce_icrc_check(&other, p, sizeof(p)));
	other.family = AF_UNIX;
	assert_false(uroce_icrc_check(&other, p, sizeof(p)));
	assert_false(uroce_icrc_check(&ip, p, 15));
	assert_false(uroce_icrc_check(&ip, p, 0));
}

/*
 * Flip each bit of the packet in turn (BTH byte 4 is masked, so skip it).
 * IPv6: every flip is caught.  IPv4: the check accepts any of the 2^17
 * values of IP id and DF, so a flip whose CRC syndrome equals that of some
 * id/DF change cannot be caught.  Such a flip depends only on its distance
 * from the id field, hence on its offset from the BTH: there are exactly
 * two below 9000 bytes.
 */
static const struct {
	size_t byte;
	int bit;
} v4_blind[] = {
	{ 173, 3 },
	{ 1834, 6 },
};

static bool v4_blind_spot(size_t byte, int bit)
{
	size_t i;

	for (i = 0; i < sizeof(v4_blind) / sizeof(v4_blind[0]); i++)
		if (v4_blind[i].byte == byte && v4_blind[i].bit == bit)
			return true;
	return false;
}

static void test_icrc_one_bit(void **state)
{
	static const size_t flip_lens[] = { 16, 44, 1100, 4096 + 44 };
	static uint8_t p[4096 + 44];
	size_t i, byte;
	int fam, bit, blind = 0;

	for (fam = 0; fam < 2; fam++) {
		for (i = 0; i < sizeof(flip_lens) / sizeof(flip_lens[0]); i++) {
			size_t len = flip_lens[i];
			struct uroce_icrc_ip ip;

			random_ip(&ip, fam ? AF_INET6 : AF_INET);
			make_pkt(p, len, &ip);
			for (byte = 0; byte < len; byte++) {
				if (byte == 4)
					continue;
				for (bit = 0; bit < 8; bit++) {
					bool ok;

					p[byte] ^= (uint8_t)(1 << bit);
					ok = uroce_icrc_check(&ip, p, len);
					p[byte] ^= (uint8_t)(1 << bit);
					if (!ok)
						continue;
					if (!fam && v4_blind_spot(byte, bit)) {
						blind++;
						continue;
					}
					fail_msg("%s len %zu: flip of byte %zu bit %d not detected",
						 fam ? "IPv6" : "IPv4", len,
						 byte, bit);
				}
			}
			assert_true(uroce_icrc_check(&ip, p, len));
		}
	}
	/* 1100: first spot; 4140: both */
	assert_int_equal(blind, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_opcode_layout),
		cmocka_unit_test(test_opcode_classes),
		cmocka_unit_test(test_opcode_spot),
		cmocka_unit_test(test_mtu),
		cmocka_unit_test(test_psn),
		cmocka_unit_test(test_aeth_credits),
		cmocka_unit_test(test_bth),
		cmocka_unit_test(test_ext_headers),
		cmocka_unit_test(test_icrc_vectors),
		cmocka_unit_test(test_icrc_roundtrip),
		cmocka_unit_test(test_icrc_iov),
		cmocka_unit_test(test_icrc_coverage),
		cmocka_unit_test(test_icrc_one_bit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
