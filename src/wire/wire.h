/* SPDX-License-Identifier: MIT */
/*
 * uroce wire layer: RoCE v2 header layouts, the opcode table, ICRC and PSN
 * arithmetic.  Pure code: no state, no IO.  Every header field is read and
 * written through one accessor below; nothing else does byte order.
 */
#ifndef UROCE_WIRE_H
#define UROCE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <endian.h>
#include <sys/uio.h>
#include <netinet/in.h>

#define UROCE_UDP_PORT	   4791
#define UROCE_BTH_LEN	   12
#define UROCE_RETH_LEN	   16
#define UROCE_AETH_LEN	   4
#define UROCE_ATMETH_LEN   28
#define UROCE_ATMACK_LEN   8
#define UROCE_IMMDT_LEN	   4
#define UROCE_IETH_LEN	   4
#define UROCE_DETH_LEN	   8
#define UROCE_FETH_LEN	   4
#define UROCE_XRCETH_LEN   4
#define UROCE_CNP_RSVD_LEN 16 /* reserved bytes after a CNP's BTH */
#define UROCE_ICRC_LEN	   4
#define UROCE_MAX_HDR_LEN  64 /* BTH + the longest extension chain */
#define UROCE_DEFAULT_PKEY 0xffff
#define UROCE_PSN_MASK	   0xffffffu
#define UROCE_QPN_MASK	   0xffffffu

/* IBA 9.2: opcodes (transport class in the top 3 bits). */
enum uroce_opcode {
	UROCE_OP_RC_SEND_FIRST = 0x00,
	UROCE_OP_RC_SEND_MIDDLE = 0x01,
	UROCE_OP_RC_SEND_LAST = 0x02,
	UROCE_OP_RC_SEND_LAST_IMM = 0x03,
	UROCE_OP_RC_SEND_ONLY = 0x04,
	UROCE_OP_RC_SEND_ONLY_IMM = 0x05,
	UROCE_OP_RC_WRITE_FIRST = 0x06,
	UROCE_OP_RC_WRITE_MIDDLE = 0x07,
	UROCE_OP_RC_WRITE_LAST = 0x08,
	UROCE_OP_RC_WRITE_LAST_IMM = 0x09,
	UROCE_OP_RC_WRITE_ONLY = 0x0a,
	UROCE_OP_RC_WRITE_ONLY_IMM = 0x0b,
	UROCE_OP_RC_READ_REQUEST = 0x0c,
	UROCE_OP_RC_READ_RESPONSE_FIRST = 0x0d,
	UROCE_OP_RC_READ_RESPONSE_MIDDLE = 0x0e,
	UROCE_OP_RC_READ_RESPONSE_LAST = 0x0f,
	UROCE_OP_RC_READ_RESPONSE_ONLY = 0x10,
	UROCE_OP_RC_ACK = 0x11,
	UROCE_OP_RC_ATOMIC_ACK = 0x12,
	UROCE_OP_RC_CMP_SWAP = 0x13,
	UROCE_OP_RC_FETCH_ADD = 0x14,
	UROCE_OP_RC_SEND_LAST_INV = 0x16,
	UROCE_OP_RC_SEND_ONLY_INV = 0x17,
	UROCE_OP_RC_FLUSH = 0x1c,
	UROCE_OP_RC_ATOMIC_WRITE = 0x1d,
	UROCE_OP_UC_SEND_FIRST = 0x20,
	UROCE_OP_UC_SEND_MIDDLE = 0x21,
	UROCE_OP_UC_SEND_LAST = 0x22,
	UROCE_OP_UC_SEND_LAST_IMM = 0x23,
	UROCE_OP_UC_SEND_ONLY = 0x24,
	UROCE_OP_UC_SEND_ONLY_IMM = 0x25,
	UROCE_OP_UC_WRITE_FIRST = 0x26,
	UROCE_OP_UC_WRITE_MIDDLE = 0x27,
	UROCE_OP_UC_WRITE_LAST = 0x28,
	UROCE_OP_UC_WRITE_LAST_IMM = 0x29,
	UROCE_OP_UC_WRITE_ONLY = 0x2a,
	UROCE_OP_UC_WRITE_ONLY_IMM = 0x2b,
	UROCE_OP_UD_SEND_ONLY = 0x64,
	UROCE_OP_UD_SEND_ONLY_IMM = 0x65,
	UROCE_OP_CNP = 0x81,
	/* XRC (IBA 9.2, 0b101): each XRC opcode is the RC one | 0xa0 */
	UROCE_OP_XRC_BASE = 0xa0,
	UROCE_OP_XRC_SEND_ONLY = 0xa4,
	UROCE_OP_XRC_WRITE_ONLY = 0xaa,
	UROCE_OP_XRC_READ_REQUEST = 0xac,
	UROCE_OP_XRC_ACK = 0xb1,
};

/* the RC opcode an RC or XRC opcode mirrors (IBA 9.2: same low 5 bits) */
static inline uint8_t uroce_op_rc(uint8_t op)
{
	return op & 0x1f;
}

/* Which extension headers follow the BTH (index into uroce_opcode_info.offset). */
enum uroce_hdr_type {
	UROCE_HDR_DETH,
	UROCE_HDR_RETH,
	UROCE_HDR_ATMETH,
	UROCE_HDR_AETH,
	UROCE_HDR_ATMACK,
	UROCE_HDR_IMMDT,
	UROCE_HDR_IETH,
	UROCE_HDR_FETH,
	UROCE_HDR_XRCETH,  /* XRC requests: right after the BTH */
	UROCE_HDR_PAYLOAD, /* offset of the payload */
	UROCE_NUM_HDR_TYPES,
};

/* Class bits of an opcode; engines test these, never opcode lists. */
enum uroce_op_mask {
	UROCE_M_DETH = 1u << UROCE_HDR_DETH,
	UROCE_M_RETH = 1u << UROCE_HDR_RETH,
	UROCE_M_ATMETH = 1u << UROCE_HDR_ATMETH,
	UROCE_M_AETH = 1u << UROCE_HDR_AETH,
	UROCE_M_ATMACK = 1u << UROCE_HDR_ATMACK,
	UROCE_M_IMMDT = 1u << UROCE_HDR_IMMDT,
	UROCE_M_IETH = 1u << UROCE_HDR_IETH,
	UROCE_M_FETH = 1u << UROCE_HDR_FETH,
	UROCE_M_XRCETH = 1u << UROCE_HDR_XRCETH,
	UROCE_M_PAYLOAD = 1u << UROCE_HDR_PAYLOAD,

	UROCE_M_REQ = 1u << 10, /* a request (else a response) */
	UROCE_M_SEND = 1u << 11,
	UROCE_M_WRITE = 1u << 12,
	UROCE_M_READ = 1u << 13,   /* read request or read response */
	UROCE_M_ATOMIC = 1u << 14, /* atomic request or atomic ack */
	UROCE_M_ACK = 1u << 15,	   /* ACK/NAK (opcode 0x11) */
	UROCE_M_ATOMIC_WRITE = 1u << 16,
	UROCE_M_FLUSH = 1u << 17,
	UROCE_M_FIRST = 1u << 18,
	UROCE_M_MIDDLE = 1u << 19,
	UROCE_M_LAST = 1u << 20,
	UROCE_M_ONLY = UROCE_M_FIRST | UROCE_M_LAST,
	UROCE_M_RC = 1u << 21,
	UROCE_M_UC = 1u << 22,
	UROCE_M_UD = 1u << 23,
	UROCE_M_CNP = 1u << 24,
	UROCE_M_INV = 1u << 25, /* send with invalidate */
	UROCE_M_XRC = 1u << 26,
};

struct uroce_opcode_info {
	const char *name; /* NULL: not a valid opcode */
	uint32_t mask;	  /* enum uroce_op_mask */
	uint8_t length;	  /* BTH + extension headers, bytes */
	uint8_t offset[UROCE_NUM_HDR_TYPES]; /* from the start of the BTH */
};

/* opcode.c */
extern const struct uroce_opcode_info uroce_opcode[256];

/* AETH syndromes, IBA 9.7.5.2.x */
enum uroce_aeth_type {
	UROCE_AETH_ACK = 0x00,
	UROCE_AETH_RNR_NAK = 0x20,
	UROCE_AETH_NAK = 0x60,
	UROCE_AETH_TYPE_MASK = 0xe0,
};
enum uroce_nak_code {
	UROCE_NAK_PSN_SEQ_ERR = 0,
	UROCE_NAK_INVALID_REQ = 1,
	UROCE_NAK_REM_ACCESS = 2,
	UROCE_NAK_REM_OP_ERR = 3,
	UROCE_NAK_INV_RD_REQ = 4,
};
#define UROCE_AETH_ACK_UNLIMITED 0x1f /* "invalid" credit count */
#define UROCE_AETH_CREDIT_MASK	 0x1f

/* An ACK's credit count (IBA 9.7.5.1.1, its table of credit codes):
 * codes 0 and 1 count themselves, code 2k counts 2^k and code 2k + 1
 * 3 * 2^(k - 1), up to 32768 at code 30. */
static inline uint32_t uroce_aeth_credits(uint8_t code)
{
	if (code < 2)
		return code;
	return (code & 1) ? 3u << ((code >> 1) - 1) : 1u << (code >> 1);
}

/* The code for n receive WQEs: the largest whose count is at most n
 * (every ACK: from the top bit of n, not by walking the table). */
static inline uint8_t uroce_aeth_credit_code(uint32_t n)
{
	uint32_t k;

	if (n < 2)
		return (uint8_t)n;
	k = 31u - (uint32_t)__builtin_clz(n); /* 2^k <= n, k >= 1 */
	if (k >= 15)
		return 30;
	return (uint8_t)(2 * k + (n >= 3u << (k - 1)));
}

/* ---- PSN arithmetic (24-bit, IBA 9.7.1) ---- */
static inline uint32_t uroce_psn_add(uint32_t psn, uint32_t n)
{
	return (psn + n) & UROCE_PSN_MASK;
}

/* <0 if a is before b, 0 if equal, >0 if after, in a 2^23 window */
static inline int32_t uroce_psn_cmp(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}

/* ---- BTH accessors (p points at the BTH) ---- */
static inline uint32_t uroce_rd_be32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return be32toh(v);
}
static inline void uroce_wr_be32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
}
static inline uint64_t uroce_rd_be64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return be64toh(v);
}
static inline void uroce_wr_be64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
}
static inline uint32_t uroce_rd_be24(const uint8_t *p)
{
	return ((uint32_t)p[0] << 16) | ((uint32_t)p[1] << 8) | p[2];
}
static inline void uroce_wr_be24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16);
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)v;
}

static inline uint8_t bth_opcode(const uint8_t *bth)
{
	return bth[0];
}
static inline bool bth_se(const uint8_t *bth)
{
	return bth[1] & 0x80;
}
static inline bool bth_mig(const uint8_t *bth)
{
	return bth[1] & 0x40;
}
static inline uint8_t bth_pad(const uint8_t *bth)
{
	return (bth[1] >> 4) & 3;
}
static inline uint8_t bth_tver(const uint8_t *bth)
{
	return bth[1] & 0xf;
}
static inline uint16_t bth_pkey(const uint8_t *bth)
{
	return (uint16_t)((bth[2] << 8) | bth[3]);
}
static inline bool bth_fecn(const uint8_t *bth)
{
	return bth[4] & 0x80;
}
static inline bool bth_becn(const uint8_t *bth)
{
	return bth[4] & 0x40;
}
static inline uint32_t bth_qpn(const uint8_t *bth)
{
	return uroce_rd_be24(bth + 5);
}
static inline bool bth_ackreq(const uint8_t *bth)
{
	return bth[8] & 0x80;
}
static inline uint32_t bth_psn(const uint8_t *bth)
{
	return uroce_rd_be24(bth + 9);
}

/* Build a whole BTH in one go. */
static inline void bth_init(uint8_t *bth, uint8_t opcode, bool se, uint8_t pad,
			    uint16_t pkey, uint32_t qpn, bool ackreq,
			    uint32_t psn)
{
	bth[0] = opcode;
	bth[1] = (uint8_t)((se ? 0x80 : 0) | 0x40 /* MigReq */ |
			   ((pad & 3) << 4));
	bth[2] = (uint8_t)(pkey >> 8);
	bth[3] = (uint8_t)pkey;
	bth[4] = 0;
	uroce_wr_be24(bth + 5, qpn & UROCE_QPN_MASK);
	bth[8] = ackreq ? 0x80 : 0;
	uroce_wr_be24(bth + 9, psn & UROCE_PSN_MASK);
}

/* ---- extension headers (p points at that header) ---- */
static inline uint64_t reth_va(const uint8_t *p)
{
	return uroce_rd_be64(p);
}
static inline uint32_t reth_rkey(const uint8_t *p)
{
	return uroce_rd_be32(p + 8);
}
static inline uint32_t reth_len(const uint8_t *p)
{
	return uroce_rd_be32(p + 12);
}
static inline void reth_init(uint8_t *p, uint64_t va, uint32_t rkey,
			     uint32_t len)
{
	uroce_wr_be64(p, va);
	uroce_wr_be32(p + 8, rkey);
	uroce_wr_be32(p + 12, len);
}

static inline uint8_t aeth_syn(const uint8_t *p)
{
	return p[0];
}
static inline uint32_t aeth_msn(const uint8_t *p)
{
	return uroce_rd_be24(p + 1);
}
static inline void aeth_init(uint8_t *p, uint8_t syn, uint32_t msn)
{
	p[0] = syn;
	uroce_wr_be24(p + 1, msn);
}

static inline uint64_t atmeth_va(const uint8_t *p)
{
	return uroce_rd_be64(p);
}
static inline uint32_t atmeth_rkey(const uint8_t *p)
{
	return uroce_rd_be32(p + 8);
}
static inline uint64_t atmeth_swap_add(const uint8_t *p)
{
	return uroce_rd_be64(p + 12);
}
static inline uint64_t atmeth_comp(const uint8_t *p)
{
	return uroce_rd_be64(p + 20);
}
static inline void atmeth_init(uint8_t *p, uint64_t va, uint32_t rkey,
			       uint64_t swap_add, uint64_t comp)
{
	uroce_wr_be64(p, va);
	uroce_wr_be32(p + 8, rkey);
	uroce_wr_be64(p + 12, swap_add);
	uroce_wr_be64(p + 20, comp);
}

static inline uint64_t atmack_orig(const uint8_t *p)
{
	return uroce_rd_be64(p);
}
static inline void atmack_init(uint8_t *p, uint64_t orig)
{
	uroce_wr_be64(p, orig);
}

/* Immediate data and IETH are carried as opaque big-endian words. */
static inline uint32_t immdt_raw(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}
static inline void immdt_set_raw(uint8_t *p, uint32_t be)
{
	memcpy(p, &be, 4);
}
static inline uint32_t ieth_rkey(const uint8_t *p)
{
	return uroce_rd_be32(p);
}
static inline void ieth_init(uint8_t *p, uint32_t rkey)
{
	uroce_wr_be32(p, rkey);
}

static inline uint32_t deth_qkey(const uint8_t *p)
{
	return uroce_rd_be32(p);
}
static inline uint32_t deth_sqp(const uint8_t *p)
{
	return uroce_rd_be24(p + 5);
}
static inline void deth_init(uint8_t *p, uint32_t qkey, uint32_t sqp)
{
	uroce_wr_be32(p, qkey);
	p[4] = 0;
	uroce_wr_be24(p + 5, sqp);
}

/* FETH (FLUSH): selectivity level in bits 5:4, placement type in 3:0 */
static inline uint8_t feth_sel(const uint8_t *p)
{
	return (p[3] >> 4) & 3;
}
static inline uint8_t feth_plt(const uint8_t *p)
{
	return p[3] & 0xf;
}
static inline void feth_init(uint8_t *p, uint8_t sel, uint8_t plt)
{
	uroce_wr_be32(p, ((uint32_t)(sel & 3) << 4) | (plt & 0xf));
}

/* XRCETH (IBA 9.3.7): 8 reserved bits, then the XRC SRQ number */
static inline uint32_t xrceth_srqn(const uint8_t *p)
{
	return uroce_rd_be24(p + 1);
}
static inline void xrceth_init(uint8_t *p, uint32_t srqn)
{
	p[0] = 0;
	uroce_wr_be24(p + 1, srqn);
}

/* ---- ICRC (icrc.c) ---- */

/*
 * The IP/UDP header fields the ICRC covers.  Addresses are IPv4 (family
 * AF_INET, in network order) or IPv6.  For IPv4 the identification and the
 * DF flag are what the sender's kernel put in the IP header.
 */
struct uroce_icrc_ip {
	int family;
	union {
		struct in_addr v4;
		struct in6_addr v6;
	} src, dst;
	uint16_t ip_id;	       /* IPv4 only, host order */
	bool df;	       /* IPv4 only */
	uint16_t sport, dport; /* host order */
};

/* the IP/UDP fields the ICRC covers, for a datagram from src to dst
 * (port 4791); IPv4 ID and DF are left 0 */
struct sockaddr_storage;
void uroce_icrc_ip_from(const struct sockaddr_storage *src,
			const struct sockaddr_storage *dst,
			struct uroce_icrc_ip *ip);

/*
 * ICRC of a RoCE v2 packet whose bytes from the BTH up to (not including)
 * the ICRC are the concatenation of iov[0..iovcnt).  Returns the value to be
 * stored little-endian after the payload.
 */
uint32_t uroce_icrc_compute(const struct uroce_icrc_ip *ip,
			    const struct iovec *iov, int iovcnt);

/*
 * Check the trailing ICRC of pkt[0..len) (BTH through ICRC).  For IPv4 the
 * identification and DF bit are unknown to a UDP socket receiver: the check
 * passes if some value of those 17 bits makes the ICRC right (ip->df is
 * ignored; ip->ip_id is only the value tried first, the fast path).
 * Returns true when the ICRC is right.
 */
bool uroce_icrc_check(const struct uroce_icrc_ip *ip, const uint8_t *pkt,
		      size_t len);

/* Store a computed ICRC after the payload. */
static inline void uroce_icrc_store(uint8_t *p, uint32_t icrc)
{
	icrc = htole32(icrc);
	memcpy(p, &icrc, 4);
}

/* ---- MTU helpers (opcode.c) ---- */
/* IBV_MTU_256..4096 enum value to bytes, 0 if invalid */
uint32_t uroce_mtu_bytes(int ibv_mtu);

#endif /* UROCE_WIRE_H */
