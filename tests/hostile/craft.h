/* SPDX-License-Identifier: MIT */
/*
 * Hand-crafted RoCE v2 packets for the hostile-input tests and the fuzz
 * seed corpus: BTH, one extension header, payload, PadCnt padding and an
 * ICRC computed for the given IPv4 addresses (uroce's receiver solves for
 * the IP identification and DF, so 0/DF is as good as any).
 */
#ifndef UROCE_CRAFT_H
#define UROCE_CRAFT_H

#include <arpa/inet.h>
#include <string.h>

#include "wire/wire.h"

#define CRAFT_MAX (UROCE_MAX_HDR_LEN + 4096 + 8)

struct craft {
	uint8_t op;
	uint32_t qpn;
	uint32_t psn;
	bool ackreq;
	int pad; /* PadCnt; -1: what the payload length needs */
	uint8_t tver;
	uint16_t pkey;		 /* 0: the default 0xffff */
	uint64_t va;		 /* RETH / ATMETH */
	uint32_t rkey;		 /* RETH / ATMETH / IETH */
	uint32_t dmalen;	 /* RETH */
	uint64_t swap_add, comp; /* ATMETH */
	uint8_t syn;		 /* AETH */
	uint32_t srqn;		 /* XRCETH */
	const void *payload;
	uint32_t paylen;
};

/* (Re)compute the ICRC of p[0..len) (BTH .. payload+pad) into p + len. */
static inline size_t craft_icrc(uint8_t *p, size_t len, struct in_addr src,
				struct in_addr dst)
{
	struct uroce_icrc_ip ip;
	struct iovec iov = { .iov_base = p, .iov_len = len };

	memset(&ip, 0, sizeof(ip));
	ip.family = AF_INET;
	ip.src.v4 = src;
	ip.dst.v4 = dst;
	ip.df = true;
	ip.sport = UROCE_UDP_PORT;
	ip.dport = UROCE_UDP_PORT;
	uroce_icrc_store(p + len, uroce_icrc_compute(&ip, &iov, 1));
	return len + UROCE_ICRC_LEN;
}

/*
 * Build pkt into out (at least CRAFT_MAX bytes): headers of the opcode's
 * table entry, payload, pad, ICRC over src -> dst (network order IPv4
 * addresses).  Returns the length.
 */
static inline size_t craft_build(const struct craft *c, uint8_t *out,
				 struct in_addr src, struct in_addr dst)
{
	const struct uroce_opcode_info *info = &uroce_opcode[c->op];
	uint32_t hlen = info->name ? info->length : UROCE_BTH_LEN;
	uint32_t pad = c->pad >= 0 ? (uint32_t)c->pad : (-c->paylen) & 3;
	size_t len;

	memset(out, 0, hlen);
	bth_init(out, c->op, false, (uint8_t)pad,
		 c->pkey ? c->pkey : UROCE_DEFAULT_PKEY, c->qpn, c->ackreq,
		 c->psn);
	out[1] = (uint8_t)((out[1] & 0xf0) | (c->tver & 0xf));
	if (info->mask & UROCE_M_XRCETH)
		xrceth_init(out + info->offset[UROCE_HDR_XRCETH], c->srqn);
	if (info->mask & UROCE_M_RETH)
		reth_init(out + info->offset[UROCE_HDR_RETH], c->va, c->rkey,
			  c->dmalen);
	if (info->mask & UROCE_M_ATMETH)
		atmeth_init(out + info->offset[UROCE_HDR_ATMETH], c->va,
			    c->rkey, c->swap_add, c->comp);
	if (info->mask & UROCE_M_AETH)
		aeth_init(out + info->offset[UROCE_HDR_AETH], c->syn, 0);
	if (info->mask & UROCE_M_IETH)
		ieth_init(out + info->offset[UROCE_HDR_IETH], c->rkey);
	if (info->mask & UROCE_M_DETH)
		deth_init(out + info->offset[UROCE_HDR_DETH], 0x11111111, 1);
	len = hlen;
	if (c->paylen)
		memcpy(out + len, c->payload, c->paylen);
	len += c->paylen;
	memset(out + len, 0, pad);
	len += pad;

	return craft_icrc(out, len, src, dst);
}

#endif /* UROCE_CRAFT_H */
