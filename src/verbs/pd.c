// SPDX-License-Identifier: MIT
/*
 * Protection domains.  A PD is only a tag that MRs, QPs and AHs carry and
 * that the responder compares; it owns nothing.
 */
#include <errno.h>
#include <stdlib.h>

#include "uroce.h"

static _Atomic uint32_t next_pdn = 1;

UROCE_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	struct uroce_dev *dev = ctx_dev(ctx);
	struct uroce_pd *pd;

	if (atomic_fetch_add(&dev->obj.npds, 1) >= UROCE_MAX_PD) {
		errno = ENOMEM;
		goto err;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		goto err;
	}
	pd->pdn = atomic_fetch_add(&next_pdn, 1);
	pd->ibpd.context = ctx;
	pd->ibpd.handle = pd->pdn;
	return &pd->ibpd;

err:
	atomic_fetch_sub(&dev->obj.npds, 1);
	return NULL;
}

UROCE_EXPORT int ibv_dealloc_pd(struct ibv_pd *ibpd)
{
	struct uroce_pd *pd = to_upd(ibpd);
	struct uroce_dev *dev = ctx_dev(ibpd->context);

	if (atomic_load(&pd->refs) > 0)
		return EBUSY;
	atomic_fetch_sub(&dev->obj.npds, 1);
	free(pd);
	return 0;
}
