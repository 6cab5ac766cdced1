// SPDX-License-Identifier: MIT
/*
 * CM MAD wire format: the 24-byte MAD header (IBA 13.4.3) and the CM
 * messages of IBA vol 1 chapter 12 (tables 106-120).  Pure code: no state,
 * no IO.  Offsets below are from the start of the CM data (byte 24).
 */
#include <endian.h>
#include <string.h>

#include "cm.h"

#define D(off)	(24 + (off))

static inline void put8(uint8_t *m, int off, uint8_t v) { m[D(off)] = v; }
static inline uint8_t get8(const uint8_t *m, int off) { return m[D(off)]; }

static inline void put16(uint8_t *m, int off, uint16_t v)
{
	v = htobe16(v);
	memcpy(m + D(off), &v, 2);
}

static inline uint16_t get16(const uint8_t *m, int off)
{
	uint16_t v;

	memcpy(&v, m + D(off), 2);
	return be16toh(v);
}

static inline void put32(uint8_t *m, int off, uint32_t v)
{
	v = htobe32(v);
	memcpy(m + D(off), &v, 4);
}

static inline uint32_t get32(const uint8_t *m, int off)
{
	uint32_t v;

	memcpy(&v, m + D(off), 4);
	return be32toh(v);
}

static inline void put64(uint8_t *m, int off, uint64_t v)
{
	v = htobe64(v);
	memcpy(m + D(off), &v, 8);
}

static inline uint64_t get64(const uint8_t *m, int off)
{
	uint64_t v;

	memcpy(&v, m + D(off), 8);
	return be64toh(v);
}

/* A 24-bit field in the top of a 32-bit word, with a byte after it. */
static inline void put24(uint8_t *m, int off, uint32_t v24, uint8_t low)
{
	put32(m, off, (v24 & 0xffffff) << 8 | low);
}

static inline uint32_t get24(const uint8_t *m, int off)
{
	return get32(m, off) >> 8;
}

struct pdata_loc {
	uint16_t attr;
	uint8_t off, len;
};

static const struct pdata_loc pdata_tbl[] = {
	{ CM_ATTR_REQ, 140, CM_REQ_PDATA },
	{ CM_ATTR_MRA, 10, CM_MRA_PDATA },
	{ CM_ATTR_REJ, 84, CM_REJ_PDATA },
	{ CM_ATTR_REP, 36, CM_REP_PDATA },
	{ CM_ATTR_RTU, 8, CM_RTU_PDATA },
	{ CM_ATTR_DREQ, 12, CM_DREQ_PDATA },
	{ CM_ATTR_DREP, 8, CM_DREP_PDATA },
	{ CM_ATTR_SIDR_REQ, 16, CM_SIDR_REQ_PDATA },
	{ CM_ATTR_SIDR_REP, 96, CM_SIDR_REP_PDATA },
};

static const struct pdata_loc *pdata_of(uint16_t attr)
{
	size_t i;

	for (i = 0; i < sizeof(pdata_tbl) / sizeof(pdata_tbl[0]); i++)
		if (pdata_tbl[i].attr == attr)
			return &pdata_tbl[i];
	return NULL;
}

/*
 * Parses a received MAD.  Returns 0, or -1 when it is not a CM Send
 * message of a kind we know (the caller drops and counts it).
 */
int cm_mad_parse(const uint8_t *mad, size_t len, struct cm_msg *m)
{
	const struct pdata_loc *pl;
	uint64_t tid;

	memset(m, 0, sizeof(*m));
	if (len < CM_MAD_SIZE)
		return -1;
	/* base version 1, CM class, class version 2, method Send, status 0 */
	if (mad[0] != 1 || mad[1] != CM_MGMT_CLASS ||
	    mad[2] != CM_CLASS_VERSION || mad[3] != CM_METHOD_SEND)
		return -1;
	m->attr = (uint16_t)(mad[16] << 8 | mad[17]);
	pl = pdata_of(m->attr);
	if (!pl)
		return -1;
	memcpy(&tid, mad + 8, 8);
	m->tid = be64toh(tid);
	m->pdata = mad + D(pl->off);
	m->pdata_len = pl->len;

	switch (m->attr) {
	case CM_ATTR_REQ:
		m->local_id = get32(mad, 0);
		m->sid = get64(mad, 8);
		m->ca_guid = get64(mad, 16);
		m->qkey = get32(mad, 28);
		m->qpn = get24(mad, 32);
		m->resp_res = get8(mad, 35);
		m->init_depth = get8(mad, 39);
		m->remote_resp_to = get8(mad, 43) >> 3;
		m->qp_type = (get8(mad, 43) >> 1) & 3;
		m->flow_ctrl = get8(mad, 43) & 1;
		m->psn = get24(mad, 44);
		m->local_resp_to = get8(mad, 47) >> 3;
		m->retry_cnt = get8(mad, 47) & 7;
		m->mtu = get8(mad, 50) >> 4;
		m->rnr_retry = get8(mad, 50) & 7;
		m->max_cm_retries = get8(mad, 51) >> 4;
		m->srq = (get8(mad, 51) >> 3) & 1;
		m->ext_transport = get8(mad, 51) & 7;
		memcpy(m->sgid.raw, mad + D(56), 16);
		memcpy(m->dgid.raw, mad + D(72), 16);
		m->tclass = get8(mad, 92);
		m->hop_limit = get8(mad, 93);
		m->ack_timeout = get8(mad, 95) >> 3;
		break;
	case CM_ATTR_MRA:
		m->local_id = get32(mad, 0);
		m->remote_id = get32(mad, 4);
		m->msg_mraed = get8(mad, 8) >> 6;
		m->service_to = get8(mad, 9) >> 3;
		break;
	case CM_ATTR_REJ:
		m->local_id = get32(mad, 0);
		m->remote_id = get32(mad, 4);
		m->msg_rejected = get8(mad, 8) >> 6;
		m->reason = get16(mad, 10);
		break;
	case CM_ATTR_REP:
		m->local_id = get32(mad, 0);
		m->remote_id = get32(mad, 4);
		m->qkey = get32(mad, 8);
		m->qpn = get24(mad, 12);
		m->eecn = get24(mad, 16);
		m->psn = get24(mad, 20);
		m->resp_res = get8(mad, 24);
		m->init_depth = get8(mad, 25);
		m->target_ack_delay = get8(mad, 26) >> 3;
		m->flow_ctrl = get8(mad, 26) & 1;
		m->rnr_retry = get8(mad, 27) >> 5;
		m->srq = (get8(mad, 27) >> 4) & 1;
		m->ca_guid = get64(mad, 28);
		break;
	case CM_ATTR_RTU:
	case CM_ATTR_DREP:
		m->local_id = get32(mad, 0);
		m->remote_id = get32(mad, 4);
		break;
	case CM_ATTR_DREQ:
		m->local_id = get32(mad, 0);
		m->remote_id = get32(mad, 4);
		m->qpn = get24(mad, 8);
		break;
	case CM_ATTR_SIDR_REQ:
		m->local_id = get32(mad, 0);
		m->sid = get64(mad, 8);
		break;
	case CM_ATTR_SIDR_REP:
		m->local_id = get32(mad, 0);
		m->reason = get8(mad, 4);
		m->qpn = get24(mad, 8);
		m->sid = get64(mad, 12);
		m->qkey = get32(mad, 20);
		break;
	}
	return 0;
}

/* Builds a whole MAD from m; m->pdata (m->pdata_len bytes) is copied into
 * the message's private data area, zero-padded. */
void cm_mad_build(uint8_t *mad, const struct cm_msg *m)
{
	const struct pdata_loc *pl = pdata_of(m->attr);
	uint64_t tid = htobe64(m->tid);

	memset(mad, 0, CM_MAD_SIZE);
	mad[0] = 1;
	mad[1] = CM_MGMT_CLASS;
	mad[2] = CM_CLASS_VERSION;
	mad[3] = CM_METHOD_SEND;
	memcpy(mad + 8, &tid, 8);
	mad[16] = (uint8_t)(m->attr >> 8);
	mad[17] = (uint8_t)m->attr;

	switch (m->attr) {
	case CM_ATTR_REQ:
		put32(mad, 0, m->local_id);
		put64(mad, 8, m->sid);
		put64(mad, 16, m->ca_guid);
		put32(mad, 28, m->qkey);
		put24(mad, 32, m->qpn, m->resp_res);
		put24(mad, 36, 0, m->init_depth);
		put24(mad, 40, 0, (uint8_t)(m->remote_resp_to << 3 |
					    (m->qp_type & 3) << 1 |
					    (m->flow_ctrl & 1)));
		put24(mad, 44, m->psn, (uint8_t)(m->local_resp_to << 3 |
						 (m->retry_cnt & 7)));
		put16(mad, 48, 0xffff);			/* P_Key */
		put8(mad, 50, (uint8_t)(m->mtu << 4 | (m->rnr_retry & 7)));
		put8(mad, 51, (uint8_t)(m->max_cm_retries << 4 |
					(m->srq & 1) << 3 |
					(m->ext_transport & 7)));
		put16(mad, 52, 0xffff);			/* permissive LIDs */
		put16(mad, 54, 0xffff);
		memcpy(mad + D(56), m->sgid.raw, 16);
		memcpy(mad + D(72), m->dgid.raw, 16);
		put8(mad, 91, 2);			/* rate: 2.5 Gb/s */
		put8(mad, 92, m->tclass);
		put8(mad, 93, m->hop_limit);
		put8(mad, 95, (uint8_t)(m->ack_timeout << 3));
		break;
	case CM_ATTR_MRA:
		put32(mad, 0, m->local_id);
		put32(mad, 4, m->remote_id);
		put8(mad, 8, (uint8_t)(m->msg_mraed << 6));
		put8(mad, 9, (uint8_t)(m->service_to << 3));
		break;
	case CM_ATTR_REJ:
		put32(mad, 0, m->local_id);
		put32(mad, 4, m->remote_id);
		put8(mad, 8, (uint8_t)(m->msg_rejected << 6));
		put16(mad, 10, m->reason);
		break;
	case CM_ATTR_REP:
		put32(mad, 0, m->local_id);
		put32(mad, 4, m->remote_id);
		put32(mad, 8, m->qkey);
		put24(mad, 12, m->qpn, 0);
		put24(mad, 16, m->eecn, 0);
		put24(mad, 20, m->psn, 0);
		put8(mad, 24, m->resp_res);
		put8(mad, 25, m->init_depth);
		put8(mad, 26, (uint8_t)(m->target_ack_delay << 3 |
					(m->flow_ctrl & 1)));
		put8(mad, 27, (uint8_t)(m->rnr_retry << 5 | (m->srq & 1) << 4));
		put64(mad, 28, m->ca_guid);
		break;
	case CM_ATTR_RTU:
	case CM_ATTR_DREP:
		put32(mad, 0, m->local_id);
		put32(mad, 4, m->remote_id);
		break;
	case CM_ATTR_DREQ:
		put32(mad, 0, m->local_id);
		put32(mad, 4, m->remote_id);
		put24(mad, 8, m->qpn, 0);
		break;
	case CM_ATTR_SIDR_REQ:
		put32(mad, 0, m->local_id);
		put16(mad, 4, 0xffff);
		put64(mad, 8, m->sid);
		break;
	case CM_ATTR_SIDR_REP:
		put32(mad, 0, m->local_id);
		put8(mad, 4, (uint8_t)m->reason);
		put24(mad, 8, m->qpn, 0);
		put64(mad, 12, m->sid);
		put32(mad, 20, m->qkey);
		break;
	}
	if (pl && m->pdata && m->pdata_len)
		memcpy(mad + D(pl->off), m->pdata,
		       m->pdata_len < pl->len ? m->pdata_len : pl->len);
}
