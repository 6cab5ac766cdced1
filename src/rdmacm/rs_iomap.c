// SPDX-License-Identifier: MIT
/*
 * riomap / riowrite: direct placement (rdma-core's protocol, rsocket(7)).
 *
 * Each side registers, behind its target SGL, a table of iomap_size
 * entries (RDMA_IOMAPSIZE, 0 unless asked for) that the peer fills.  A
 * riomap(PROT_WRITE) registers the application's buffer for remote
 * writes and writes {offset, address, rkey, length} into a free entry of
 * the peer's table, as a message RS_OP_IOMAP_SGL whose datum is the
 * index (it uses a credit, as data does).  riowrite then RDMA-WRITEs
 * (without immediate: the peer is not told) straight into the buffer the
 * peer mapped at that offset; a later message on the stream orders it.
 *
 * Called with rs->lock held.
 */
#include <byteswap.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "rs.h"

/* 8-bit sizes in the connect data: small values as is, large ones >> 8 */
int rs_value_to_scale(int value, int bits)
{
	return value <= (1 << (bits - 1)) ? value :
					    (1 << (bits - 1)) | (value >> bits);
}

int rs_scale_to_value(int value, int bits)
{
	return value <= (1 << (bits - 1)) ? value :
					    (value & ~(1 << (bits - 1))) << bits;
}

void rs_iomap_free(struct rsocket *rs)
{
	uroce_assert_held(&rs->lock);
	for (uint32_t i = 0; rs->maps && i < rs->remote_iomap.length; i++)
		if (rs->maps[i].mr)
			ibv_dereg_mr(rs->maps[i].mr);
	for (int i = 0; i < rs->nlocal_maps; i++)
		ibv_dereg_mr(rs->local_maps[i].mr);
	free(rs->maps);
	free(rs->local_maps);
	rs->maps = NULL;
	rs->local_maps = NULL;
	rs->nlocal_maps = 0;
}

off_t rs_iomap_add(struct rsocket *rs, void *buf, size_t len, int prot,
		   off_t offset)
{
	struct rs_iomr *m = NULL;
	int access = IBV_ACCESS_LOCAL_WRITE;

	uroce_assert_held(&rs->lock);
	if (!rs->pd || (prot & ~PROT_WRITE))
		return -EINVAL;
	if (!buf || !len || len > UINT32_MAX || offset < -1)
		return -EINVAL;
	if (prot & PROT_WRITE) {
		if (!rs->maps && rs->remote_iomap.length) {
			rs->maps = calloc(rs->remote_iomap.length,
					  sizeof(*rs->maps));
			if (!rs->maps)
				return -ENOMEM;
		}
		for (uint32_t i = 0; rs->maps && i < rs->remote_iomap.length;
		     i++) {
			if (!rs->maps[i].mr) {
				m = &rs->maps[i];
				break;
			}
		}
		/* the peer's table is full, or it has none */
		if (!m)
			return -ENOMEM;
		access |= IBV_ACCESS_REMOTE_WRITE;
	} else {
		struct rs_iomr *t = realloc(rs->local_maps,
					    (size_t)(rs->nlocal_maps + 1) *
						    sizeof(*t));

		if (!t)
			return -ENOMEM;
		rs->local_maps = t;
		m = &t[rs->nlocal_maps];
		memset(m, 0, sizeof(*m));
	}
	m->mr = ibv_reg_mr(rs->pd, buf, len, access);
	if (!m->mr)
		return -(errno ? errno : ENOMEM);
	if (offset == -1)
		offset = (off_t)(uintptr_t)buf;
	m->offset = (uint64_t)offset;
	if (prot & PROT_WRITE) {
		m->pending = true;
		rs->iomap_pending = true;
		/* tell the peer now if we may, else with the next send */
		if ((rs->state & RS_WRITABLE) && rs_can_send(rs))
			rs_iomap_send(rs, true);
	} else {
		rs->nlocal_maps++;
	}
	return offset;
}

int rs_iomap_remove(struct rsocket *rs, void *buf, size_t len)
{
	uroce_assert_held(&rs->lock);
	for (uint32_t i = 0; rs->maps && i < rs->remote_iomap.length; i++) {
		struct rs_iomr *m = &rs->maps[i];

		if (m->mr && m->mr->addr == buf && m->mr->length == len) {
			ibv_dereg_mr(m->mr);
			memset(m, 0, sizeof(*m));
			return 0;
		}
	}
	for (int i = 0; i < rs->nlocal_maps; i++) {
		struct rs_iomr *m = &rs->local_maps[i];

		if (m->mr->addr == buf && m->mr->length == len) {
			ibv_dereg_mr(m->mr);
			*m = rs->local_maps[--rs->nlocal_maps];
			return 0;
		}
	}
	return -EINVAL;
}

/* writes our pending mappings into the peer's table */
int rs_iomap_send(struct rsocket *rs, bool nonblock)
{
	int err = 0;

	uroce_assert_held(&rs->lock);
	for (uint32_t i = 0; rs->maps && i < rs->remote_iomap.length; i++) {
		struct rs_iomr *m = &rs->maps[i];
		struct rs_iomap iom;
		struct iovec v = { &iom, sizeof(iom) };
		size_t voff = 0;
		int vi = 0;

		if (!m->pending)
			continue;
		if (!rs_can_send(rs)) {
			err = rs_wait(rs, rs_can_send_or_closed, nonblock);
			if (err)
				return err;
			if (!(rs->state & RS_WRITABLE))
				return -rs_closed_errno(rs);
		}
		iom.offset = m->offset;
		iom.sge.addr = (uintptr_t)m->mr->addr;
		iom.sge.key = m->mr->rkey;
		iom.sge.length = (uint32_t)m->mr->length;
		if (rs->swap_sgl) {
			iom.offset = bswap_64(iom.offset);
			iom.sge.addr = bswap_64(iom.sge.addr);
			iom.sge.key = bswap_32(iom.sge.key);
			iom.sge.length = bswap_32(iom.sge.length);
		}
		rs->sseq_no++;
		err = rs_post_data(rs, &v, &vi, &voff, sizeof(iom),
				   rs_msg(RS_OP_IOMAP_SGL, i),
				   rs->remote_iomap.addr + i * sizeof(iom),
				   rs->remote_iomap.key);
		if (err) {
			rs_set_error(rs, -err);
			return err;
		}
		m->pending = false;
	}
	rs->iomap_pending = false;
	return 0;
}

/* an entry of our table was written: take our copy */
void rs_iomap_arrived(struct rsocket *rs, uint32_t index, uint32_t len)
{
	uroce_assert_held(&rs->lock);
	if (index < rs->iomap_size && len >= sizeof(struct rs_iomap))
		rs->iomap[index] = rs->target_iomap[index];
}

static struct rs_iomap *find_iomap(struct rsocket *rs, uint64_t off)
{
	for (uint16_t i = 0; i < rs->iomap_size; i++) {
		struct rs_iomap *m = &rs->iomap[i];

		if (m->sge.length && off >= m->offset &&
		    off - m->offset < m->sge.length)
			return m;
	}
	return NULL;
}

ssize_t rs_iowrite(struct rsocket *rs, const void *buf, size_t len,
		   off_t offset, int flags)
{
	bool nonblock = rs->nonblock || (flags & MSG_DONTWAIT);
	struct iovec v = { (void *)buf, len };
	uint32_t olen = RS_OLAP_START;
	size_t sent = 0, voff = 0;
	int vi = 0, err = 0;

	uroce_assert_held(&rs->lock);
	if (offset < 0)
		return -EINVAL;
	if (!(rs->state & RS_WRITABLE))
		return -rs_closed_errno(rs);
	if (rs->iomap_pending) {
		err = rs_iomap_send(rs, nonblock);
		if (err)
			return err;
	}
	while (sent < len) {
		uint64_t off = (uint64_t)offset + sent;
		struct rs_iomap *m = find_iomap(rs, off);
		uint32_t x;

		if (!m) {
			err = -EINVAL;
			break;
		}
		err = rs_wait_sendable(rs, nonblock);
		if (err)
			break;
		x = olen < len - sent ? olen : (uint32_t)(len - sent);
		if (olen < RS_MAX_TRANSFER)
			olen <<= 1;
		if (x > rs->sbuf_avail)
			x = rs->sbuf_avail;
		if (x > m->offset + m->sge.length - off)
			x = (uint32_t)(m->offset + m->sge.length - off);
		err = rs_post_data(rs, &v, &vi, &voff, x, rs_msg(RS_OP_WRITE, x),
				   m->sge.addr + (off - m->offset), m->sge.key);
		if (err) {
			rs_set_error(rs, -err);
			break;
		}
		sent += x;
	}
	if (sent)
		return (ssize_t)sent;
	return err;
}
