// SPDX-License-Identifier: MIT
/* Scatter/gather lists: checks against MRs, copies in, iovecs out. */
#include <errno.h>
#include <string.h>

#include "dev.h"

int uroce_sge_check(struct uroce_dev *dev, struct uroce_pd *pd,
		    const struct ibv_sge *sge, uint32_t n, unsigned int access)
{
	uint32_t i;

	uroce_assert_held(&dev->lock);
	for (i = 0; i < n; i++) {
		if (!sge[i].length)
			continue;
		struct uroce_mr *mr = uroce_mr_check(dev, pd, sge[i].lkey,
						     sge[i].addr, sge[i].length,
						     access);

		/* a window's key is remote only (IBA 10.6.7) */
		if (!mr || mr->mw_type)
			return -EACCES;
	}
	return 0;
}

/* find the SGE holding byte off; *skip gets the offset inside it */
static uint32_t sge_seek(const struct ibv_sge *sge, uint32_t n, uint64_t off,
			 uint64_t *skip)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		if (off < sge[i].length)
			break;
		off -= sge[i].length;
	}
	*skip = off;
	return i;
}

void uroce_sge_scatter(const struct ibv_sge *sge, uint32_t n, uint64_t off,
		       const uint8_t *data, uint32_t len)
{
	uint64_t skip;
	uint32_t i = sge_seek(sge, n, off, &skip);

	for (; i < n && len; i++) {
		uint64_t room = sge[i].length - skip;
		uint32_t chunk = len < room ? len : (uint32_t)room;

		memcpy((uint8_t *)(uintptr_t)sge[i].addr + skip, data, chunk);
		data += chunk;
		len -= chunk;
		skip = 0;
	}
}

int uroce_sge_iov(const struct ibv_sge *sge, uint32_t n, uint64_t off,
		  uint32_t len, struct iovec *iov, int max)
{
	uint64_t skip;
	uint32_t i = sge_seek(sge, n, off, &skip);
	int k = 0;

	for (; i < n && len && k < max; i++) {
		uint64_t room = sge[i].length - skip;
		uint32_t chunk = len < room ? len : (uint32_t)room;

		if (!chunk)
			continue;
		iov[k].iov_base = (uint8_t *)(uintptr_t)sge[i].addr + skip;
		iov[k].iov_len = chunk;
		k++;
		len -= chunk;
		skip = 0;
	}
	return k;
}
