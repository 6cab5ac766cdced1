// SPDX-License-Identifier: MIT
/* The multicast group list: finding a group by GID. */
#include <string.h>

#include "dev.h"

/* dev->lock (or rx_lock) held */
struct uroce_mcast_grp *uroce_mcast_grp_find(struct uroce_dev *dev,
					     const union ibv_gid *gid)
{
	uroce_assert_held_either(&dev->lock, &dev->prog.rx_lock);
	struct uroce_mcast_grp *grp;

	for (grp = dev->obj.mcast; grp; grp = grp->next)
		if (!memcmp(grp->gid.raw, gid->raw, sizeof(gid->raw)))
			return grp;
	return NULL;
}
