// SPDX-License-Identifier: MIT
/*
 * CM MAD wire format: the 24-byte MAD header (IBA 13.4.3) and the CM
 * messages of IBA vol 1 chapter 12 (tables 106-120).  Pure code: no state,
 * no IO.
 *
 * Each message is one row of cm_mads: its fields (where each lies, which
 * struct cm_msg member it carries, or the constant we send in it) and its
 * private data area.  cm_mad_parse and cm_mad_build both walk that row,
 * so a field cannot be read at one place and written at another
 * (tests/unit/test_cm_mad.c checks the rows and the round trip).
 */
#include <endian.h>
#include <stddef.h>
#include <string.h>

#include "cm.h"

#define CM_DATA 24 /* the CM data follows the MAD header */

/* a field carried in member m of struct cm_msg */
#define F(n, o, b, w, m) \
	{ \
		.name = n, .off = o, .bit = b, .width = w, \
		.size = sizeof(((struct cm_msg *)0)->m), \
		.member = offsetof(struct cm_msg, m) \
	}
/* a field we always send with value v and ignore when received */
#define K(n, o, b, w, v) \
	{ \
		.name = n, .off = o, .bit = b, .width = w, .value = v \
	}

/* IBA table 106 */
static const struct cm_field req_fields[] = {
	F("local_comm_id", 0, 0, 32, local_id),
	F("service_id", 8, 0, 64, sid),
	F("local_ca_guid", 16, 0, 64, ca_guid),
	F("local_qkey", 28, 0, 32, qkey),
	F("local_qpn", 32, 0, 24, qpn),
	F("responder_resources", 35, 0, 8, resp_res),
	F("initiator_depth", 39, 0, 8, init_depth),
	F("remote_cm_response_timeout", 43, 0, 5, remote_resp_to),
	F("transport_service_type", 43, 5, 2, qp_type),
	F("end_to_end_flow_control", 43, 7, 1, flow_ctrl),
	F("starting_psn", 44, 0, 24, psn),
	F("local_cm_response_timeout", 47, 0, 5, local_resp_to),
	F("retry_count", 47, 5, 3, retry_cnt),
	K("partition_key", 48, 0, 16, 0xffff),
	F("path_mtu", 50, 0, 4, mtu),
	F("rnr_retry_count", 50, 5, 3, rnr_retry),
	F("max_cm_retries", 51, 0, 4, max_cm_retries),
	F("srq", 51, 4, 1, srq),
	F("extended_transport_type", 51, 5, 3, ext_transport),
	K("primary_local_port_lid", 52, 0, 16, 0xffff), /* permissive */
	K("primary_remote_port_lid", 54, 0, 16, 0xffff),
	F("primary_local_port_gid", 56, 0, 128, sgid),
	F("primary_remote_port_gid", 72, 0, 128, dgid),
	K("primary_packet_rate", 91, 2, 6, 2), /* 2.5 Gb/s */
	F("primary_traffic_class", 92, 0, 8, tclass),
	F("primary_hop_limit", 93, 0, 8, hop_limit),
	F("primary_local_ack_timeout", 95, 0, 5, ack_timeout),
};

/* IBA table 107 */
static const struct cm_field mra_fields[] = {
	F("local_comm_id", 0, 0, 32, local_id),
	F("remote_comm_id", 4, 0, 32, remote_id),
	F("message_mraed", 8, 0, 2, msg_mraed),
	F("service_timeout", 9, 0, 5, service_to),
};

/* IBA table 108 */
static const struct cm_field rej_fields[] = {
	F("local_comm_id", 0, 0, 32, local_id),
	F("remote_comm_id", 4, 0, 32, remote_id),
	F("message_rejected", 8, 0, 2, msg_rejected),
	F("reason", 10, 0, 16, reason),
};

/* IBA table 110 */
static const struct cm_field rep_fields[] = {
	F("local_comm_id", 0, 0, 32, local_id),
	F("remote_comm_id", 4, 0, 32, remote_id),
	F("local_qkey", 8, 0, 32, qkey),
	F("local_qpn", 12, 0, 24, qpn),
	F("local_eecn", 16, 0, 24, eecn),
	F("starting_psn", 20, 0, 24, psn),
	F("responder_resources", 24, 0, 8, resp_res),
	F("initiator_depth", 25, 0, 8, init_depth),
	F("target_ack_delay", 26, 0, 5, target_ack_delay),
	F("end_to_end_flow_control", 26, 7, 1, flow_ctrl),
	F("rnr_retry_count", 27, 0, 3, rnr_retry),
	F("srq", 27, 3, 1, srq),
	F("local_ca_guid", 28, 0, 64, ca_guid),
};

/* IBA tables 111 (RTU) and 113 (DREP) */
static const struct cm_field ids_fields[] = {
	F("local_comm_id", 0, 0, 32, local_id),
	F("remote_comm_id", 4, 0, 32, remote_id),
};

/* IBA table 112 */
static const struct cm_field dreq_fields[] = {
	F("local_comm_id", 0, 0, 32, local_id),
	F("remote_comm_id", 4, 0, 32, remote_id),
	F("remote_qpn", 8, 0, 24, qpn),
};

/* IBA table 119 */
static const struct cm_field sidr_req_fields[] = {
	F("request_id", 0, 0, 32, local_id),
	K("partition_key", 4, 0, 16, 0xffff),
	F("service_id", 8, 0, 64, sid),
};

/* IBA table 120 */
static const struct cm_field sidr_rep_fields[] = {
	F("request_id", 0, 0, 32, local_id),
	F("status", 4, 0, 8, reason),
	F("qpn", 8, 0, 24, qpn),
	F("service_id", 12, 0, 64, sid),
	F("qkey", 20, 0, 32, qkey),
};

#define M(a, n, fl, po, pl) \
	{ \
		.attr = a, .name = n, .fields = fl, \
		.nfields = sizeof(fl) / sizeof(fl[0]), .pdata_off = po, \
		.pdata_len = pl \
	}

static const struct cm_mad_desc cm_mads[] = {
	M(CM_ATTR_REQ, "REQ", req_fields, 140, CM_REQ_PDATA),
	M(CM_ATTR_MRA, "MRA", mra_fields, 10, CM_MRA_PDATA),
	M(CM_ATTR_REJ, "REJ", rej_fields, 84, CM_REJ_PDATA),
	M(CM_ATTR_REP, "REP", rep_fields, 36, CM_REP_PDATA),
	M(CM_ATTR_RTU, "RTU", ids_fields, 8, CM_RTU_PDATA),
	M(CM_ATTR_DREQ, "DREQ", dreq_fields, 12, CM_DREQ_PDATA),
	M(CM_ATTR_DREP, "DREP", ids_fields, 8, CM_DREP_PDATA),
	M(CM_ATTR_SIDR_REQ, "SIDR_REQ", sidr_req_fields, 16, CM_SIDR_REQ_PDATA),
	M(CM_ATTR_SIDR_REP, "SIDR_REP", sidr_rep_fields, 96, CM_SIDR_REP_PDATA),
};

const struct cm_mad_desc *cm_mad_descs(size_t *n)
{
	*n = sizeof(cm_mads) / sizeof(cm_mads[0]);
	return cm_mads;
}

const struct cm_mad_desc *cm_mad_desc(uint16_t attr)
{
	size_t i;

	for (i = 0; i < sizeof(cm_mads) / sizeof(cm_mads[0]); i++)
		if (cm_mads[i].attr == attr)
			return &cm_mads[i];
	return NULL;
}

/* the bytes a field covers, as one big-endian number (at most 8 bytes:
 * every field but a GID lies within one 64-bit span) */
static unsigned int span(const struct cm_field *f)
{
	return (f->bit + f->width + 7) / 8;
}

static uint64_t get_bits(const uint8_t *data, const struct cm_field *f)
{
	unsigned int i, n = span(f);
	uint64_t v = 0;

	for (i = 0; i < n; i++)
		v = v << 8 | data[f->off + i];
	v >>= n * 8 - f->bit - f->width;
	return f->width == 64 ? v : v & ((1ULL << f->width) - 1);
}

static void put_bits(uint8_t *data, const struct cm_field *f, uint64_t v)
{
	unsigned int i, n = span(f), shift = n * 8 - f->bit - f->width;
	uint64_t mask = f->width == 64 ? ~0ULL : (1ULL << f->width) - 1;
	uint64_t word = 0;

	for (i = 0; i < n; i++)
		word = word << 8 | data[f->off + i];
	word = (word & ~(mask << shift)) | (v & mask) << shift;
	for (i = n; i-- > 0; word >>= 8)
		data[f->off + i] = (uint8_t)word;
}

static uint64_t load(const struct cm_msg *m, const struct cm_field *f)
{
	const uint8_t *p = (const uint8_t *)m + f->member;
	uint8_t v8;
	uint16_t v16;
	uint32_t v32;
	uint64_t v64;

	switch (f->size) {
	case 1:
		memcpy(&v8, p, 1);
		return v8;
	case 2:
		memcpy(&v16, p, 2);
		return v16;
	case 4:
		memcpy(&v32, p, 4);
		return v32;
	case 8:
		memcpy(&v64, p, 8);
		return v64;
	}
	return f->value; /* a constant field */
}

static void store(struct cm_msg *m, const struct cm_field *f, uint64_t v)
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
	}
}

/*
 * Parses a received MAD.  Returns 0, or -1 when it is not a CM Send
 * message of a kind we know (the caller drops and counts it).
 */
int cm_mad_parse(const uint8_t *mad, size_t len, struct cm_msg *m)
{
	const struct cm_mad_desc *d;
	const struct cm_field *f;
	uint64_t tid;

	memset(m, 0, sizeof(*m));
	if (len < CM_MAD_SIZE)
		return -1;
	/* base version 1, CM class, class version 2, method Send, status 0 */
	if (mad[0] != 1 || mad[1] != CM_MGMT_CLASS ||
	    mad[2] != CM_CLASS_VERSION || mad[3] != CM_METHOD_SEND)
		return -1;
	m->attr = (uint16_t)(mad[16] << 8 | mad[17]);
	d = cm_mad_desc(m->attr);
	if (!d)
		return -1;
	memcpy(&tid, mad + 8, 8);
	m->tid = be64toh(tid);
	m->pdata = mad + CM_DATA + d->pdata_off;
	m->pdata_len = d->pdata_len;

	for (f = d->fields; f < d->fields + d->nfields; f++) {
		if (!f->size)
			continue; /* constant: what the peer sent is moot */
		if (f->width == 128)
			memcpy((uint8_t *)m + f->member, mad + CM_DATA + f->off,
			       16);
		else
			store(m, f, get_bits(mad + CM_DATA, f));
	}
	return 0;
}

/* Builds a whole MAD from m; m->pdata (m->pdata_len bytes) is copied into
 * the message's private data area, zero-padded. */
void cm_mad_build(uint8_t *mad, const struct cm_msg *m)
{
	const struct cm_mad_desc *d = cm_mad_desc(m->attr);
	const struct cm_field *f;
	uint64_t tid = htobe64(m->tid);

	memset(mad, 0, CM_MAD_SIZE);
	mad[0] = 1;
	mad[1] = CM_MGMT_CLASS;
	mad[2] = CM_CLASS_VERSION;
	mad[3] = CM_METHOD_SEND;
	memcpy(mad + 8, &tid, 8);
	mad[16] = (uint8_t)(m->attr >> 8);
	mad[17] = (uint8_t)m->attr;
	if (!d)
		return;

	for (f = d->fields; f < d->fields + d->nfields; f++) {
		if (f->width == 128)
			memcpy(mad + CM_DATA + f->off,
			       (const uint8_t *)m + f->member, 16);
		else
			put_bits(mad + CM_DATA, f, load(m, f));
	}
	if (m->pdata && m->pdata_len)
		memcpy(mad + CM_DATA + d->pdata_off, m->pdata,
		       m->pdata_len < d->pdata_len ? m->pdata_len :
						     d->pdata_len);
}
