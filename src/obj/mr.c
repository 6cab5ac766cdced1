// SPDX-License-Identifier: MIT
/* The key table's one check: a key, a range and the access asked for. */
#include "dev.h"

/*
 * A zero-length range is not range-checked (any va passes), but the key
 * must still name a live MR of pd with the access asked for.  A zero-length
 * RDMA READ or WRITE needs no valid R_Key (IBA chapter 9), so the engine
 * skips this check for those altogether.  A NULL pd matches any PD.
 */
struct uroce_mr *uroce_mr_check(struct uroce_dev *dev, struct uroce_pd *pd,
				uint32_t key, uint64_t va, uint64_t len,
				unsigned int access)
{
	struct uroce_mr *mr = dev->obj.mr_tbl[uroce_key_index(key)];

	if (!mr || mr->key != key)
		return NULL;
	if (mr->mw_type && !mr->mw_bound)
		return NULL;
	if (pd && mr->pd != pd)
		return NULL;
	if ((mr->access & access) != access)
		return NULL;
	if (!len)
		return mr;
	/* va >= iova and va + len <= iova + length, with no sum that wraps */
	if (va < mr->iova || len > mr->length ||
	    va - mr->iova > mr->length - len)
		return NULL;
	return mr;
}
