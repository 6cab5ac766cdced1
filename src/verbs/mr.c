// SPDX-License-Identifier: MIT
/*
 * Memory regions and the key check the engine runs on every lkey/rkey.
 *
 * A key (lkey == rkey) is the MR's slot in dev->obj.mr_tbl in its low 16 bits
 * and 16 fresh random bits, never all zero, above.  A forged or stale rkey
 * therefore names a live MR with probability 2^-16 at most, and a slot
 * that is reused gets new upper bits.  The table changes under dev->lock,
 * which is what the engine holds while it reads it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "uroce.h"

#define KEY_INDEX_BITS 16
#define KEY_INDEX_MASK ((1u << KEY_INDEX_BITS) - 1)

_Static_assert(UROCE_MAX_MR == 1u << KEY_INDEX_BITS,
	       "an MR key table index has 16 bits");

/* What ibv_reg_mr accepts, as the kernel's ib_check_mr_access does:
 * the eight classic bits and the optional range, which we may ignore. */
#define ACCESS_SUPPORTED \
	(((IBV_ACCESS_HUGETLB << 1) - 1) | IBV_ACCESS_ON_DEMAND | \
	 UROCE_ACCESS_FLUSH_GLOBAL | UROCE_ACCESS_FLUSH_PERSISTENT | \
	 IBV_ACCESS_OPTIONAL_RANGE)

static int check_access(unsigned int access)
{
	if (access & ~(unsigned int)ACCESS_SUPPORTED)
		return EINVAL;
	/* IBA 10.6.3.1: remote write or atomic needs local write */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return EINVAL;
	/*
	 * IBV_ACCESS_ON_DEMAND: every MR is on demand to us (we pin
	 * nothing; the CPU faults pages in as we copy).  Explicit ODP only:
	 * the range is still checked to be mapped at registration, as a
	 * remote WRITE into a hole would be our SIGSEGV, not a NAK; an
	 * implicit MR (NULL, SIZE_MAX) fails that check with EINVAL, as on
	 * a device without IBV_ODP_SUPPORT_IMPLICIT.
	 */
	return 0;
}

/*
 * The kernel pins the pages and answers EFAULT for a hole; we cannot pin,
 * but we can refuse a range that is not mapped, before a remote WRITE
 * lands in it.
 */
static int check_mapped(const void *addr, size_t length)
{
	static const size_t chunk_pages = 4096;
	unsigned char vec[4096];
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)addr & ~(page - 1);
	uintptr_t end = (uintptr_t)addr + length;
	uintptr_t n;

	while (start < end) {
		n = (end - start + page - 1) / page;
		if (n > chunk_pages)
			n = chunk_pages;
		if (mincore((void *)start, n * page, vec))
			return errno == ENOMEM ? EFAULT : errno;
		start += n * page;
	}
	return 0;
}

static int check_range(const void *addr, size_t length, uint64_t iova)
{
	if (!length || length > UROCE_MAX_MR_SIZE)
		return EINVAL;
	if (!addr)
		return EFAULT;
	if ((uintptr_t)addr > UINTPTR_MAX - length || iova > UINT64_MAX - length)
		return EINVAL;
	return check_mapped(addr, length);
}

/* 16 random bits, never zero, and different from old */
static uint32_t key_tag(uint32_t old)
{
	static _Atomic uint64_t fallback;
	uint16_t r;

	do {
		if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r)) {
			uint64_t x = atomic_fetch_add(&fallback,
						      0x9e3779b97f4a7c15ull);

			x ^= uroce_now_ns();
			x ^= x >> 29;
			x *= 0xbf58476d1ce4e5b9ull;
			r = (uint16_t)(x >> 32);
		}
	} while (!r || r == old);
	return r;
}

static uint32_t make_key(uint32_t index, uint32_t old_key)
{
	uint32_t old_tag = (old_key >> 24) << 8 | (old_key & 0xff);
	uint32_t tag = key_tag((uint16_t)old_tag);

	return (tag >> 8) << 24 | index << UROCE_KEY_INDEX_SHIFT | (tag & 0xff);
}

/* Put mr in a free slot, searching on from the last one handed out so a
 * freed slot rests as long as possible.  dev->lock held. */
int uroce_mr_insert(struct uroce_dev *dev, struct uroce_mr *mr)
{
	uint32_t i, idx = 0;

	uroce_assert_held(&dev->lock);
	if (dev->obj.nmrs >= UROCE_MAX_MR)
		return ENOMEM;
	for (i = 0; i < UROCE_MAX_MR; i++) {
		idx = (dev->obj.next_mr_index + i) & KEY_INDEX_MASK;
		if (!dev->obj.mr_tbl[idx])
			break;
	}
	dev->obj.next_mr_index = (idx + 1) & KEY_INDEX_MASK;
	/* never the key this slot had last: a stale rkey must not revive */
	mr->key = make_key(idx, dev->obj.mr_last_key[idx]);
	dev->obj.mr_last_key[idx] = mr->key;
	dev->obj.mr_tbl[idx] = mr;
	dev->obj.nmrs++;
	return 0;
}

static void set_keys(struct uroce_mr *mr)
{
	mr->ibmr.handle = mr->key;
	mr->ibmr.lkey = mr->key;
	mr->ibmr.rkey = mr->key;
}

UROCE_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *ibpd, void *addr,
					     size_t length, uint64_t iova,
					     unsigned int access)
{
	struct uroce_dev *dev;
	struct uroce_mr *mr;
	int ret;

	if (!ibpd) {
		errno = EINVAL;
		return NULL;
	}
	dev = ctx_dev(ibpd->context);
	ret = check_access(access);
	if (!ret)
		ret = check_range(addr, length, iova);
	if (ret) {
		errno = ret;
		return NULL;
	}

	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	mr->pd = to_upd(ibpd);
	mr->iova = iova;
	mr->addr = addr;
	mr->length = length;
	mr->access = access;
	mr->ibmr.context = ibpd->context;
	mr->ibmr.pd = ibpd;
	mr->ibmr.addr = addr;
	mr->ibmr.length = length;

	pthread_mutex_lock(&dev->lock);
	ret = uroce_mr_insert(dev, mr);
	if (!ret)
		set_keys(mr);
	uroce_dev_unlock(dev);
	if (ret) {
		free(mr);
		errno = ret;
		return NULL;
	}
	atomic_fetch_add(&mr->pd->refs, 1);
	return &mr->ibmr;
}

#undef ibv_reg_mr
UROCE_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr,
				       size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr,
				(unsigned int)access);
}

#undef ibv_reg_mr_iova
UROCE_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr,
					    size_t length, uint64_t iova,
					    int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned int)access);
}

/*
 * The Reregister Memory Region verb, as the kernel's rereg_mr: any of
 * translation, PD and access may change, and the MR keeps its lkey and
 * rkey, as rxe and mlx5 keep them (programs reuse the keys they handed
 * out).  An MR with windows bound over it is not reregistered (EBUSY):
 * a window would go on granting the old range.  On an error the old
 * registration is untouched (IBV_REREG_MR_ERR_INPUT, errno set).
 */
UROCE_EXPORT int ibv_rereg_mr(struct ibv_mr *ibmr, int flags,
			      struct ibv_pd *ibpd, void *addr, size_t length,
			      int access)
{
	struct uroce_mr *mr = to_umr(ibmr);
	struct uroce_dev *dev = ctx_dev(ibmr->context);
	struct uroce_pd *old_pd = mr->pd, *new_pd = mr->pd;
	unsigned int new_access = mr->access;
	int ret = EINVAL;

	if (!flags || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED))
		goto err;
	if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!addr || !length))
		goto err;
	if (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))
		goto err;
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		if (!ibpd || ibpd->context != ibmr->context)
			goto err;
		new_pd = to_upd(ibpd);
	}
	if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
		new_access = (unsigned int)access;
		ret = check_access(new_access);
		if (ret)
			goto err;
	}
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		ret = check_range(addr, length, (uintptr_t)addr);
		if (ret)
			goto err;
	}

	pthread_mutex_lock(&dev->lock);
	if (atomic_load(&mr->mw_refs)) {
		uroce_dev_unlock(dev);
		errno = EBUSY;
		return IBV_REREG_MR_ERR_CMD; /* the kernel's answer */
	}
	if (new_pd != old_pd)
		atomic_fetch_add(&new_pd->refs, 1);
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		mr->addr = addr;
		mr->iova = (uintptr_t)addr;
		mr->length = length;
	}
	mr->pd = new_pd;
	mr->access = new_access;
	uroce_dev_unlock(dev);

	if (new_pd != old_pd)
		atomic_fetch_sub(&old_pd->refs, 1);
	ibmr->pd = &new_pd->ibpd;
	ibmr->addr = mr->addr;
	ibmr->length = mr->length;
	return 0;

err:
	errno = ret;
	return IBV_REREG_MR_ERR_INPUT;
}

UROCE_EXPORT int ibv_dereg_mr(struct ibv_mr *ibmr)
{
	struct uroce_mr *mr = to_umr(ibmr);
	struct uroce_dev *dev = ctx_dev(ibmr->context);
	uint32_t idx = uroce_key_index(mr->key);

	pthread_mutex_lock(&dev->lock);
	if (dev->obj.mr_tbl[idx] != mr) {
		uroce_dev_unlock(dev);
		return EINVAL;
	}
	/* IBA 10.6.7.2.5: not while windows are bound over it */
	if (atomic_load(&mr->mw_refs)) {
		uroce_dev_unlock(dev);
		return EBUSY;
	}
	dev->obj.mr_tbl[idx] = NULL;
	dev->obj.nmrs--;
	uroce_dev_unlock(dev);

	atomic_fetch_sub(&mr->pd->refs, 1);
	free(mr);
	return 0;
}

/*
 * ibv_advise_mr: prefetching is what every access does here, so the
 * advice is checked and nothing else happens.  The SGEs must lie in ODP
 * MRs of pd (PREFETCH_WRITE: writable ones), as the kernel requires.
 */
int uroce_advise_mr(struct ibv_pd *ibpd, enum ibv_advise_mr_advice advice,
		    uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge)
{
	struct uroce_dev *dev = ctx_dev(ibpd->context);
	unsigned int access = IBV_ACCESS_ON_DEMAND;
	uint32_t i;
	int err = 0;

	if (advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE)
		access |= IBV_ACCESS_LOCAL_WRITE;
	else if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH &&
		 advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return EINVAL;
	if (flags & ~(uint32_t)IBV_ADVISE_MR_FLAG_FLUSH)
		return EOPNOTSUPP;
	if (!sg_list || !num_sge)
		return EINVAL;
	pthread_mutex_lock(&dev->lock);
	for (i = 0; i < num_sge && !err; i++) {
		struct uroce_mr *mr = uroce_mr_check(dev, to_upd(ibpd),
						     sg_list[i].lkey,
						     sg_list[i].addr,
						     sg_list[i].length, access);

		if (!mr || mr->mw_type)
			err = EINVAL;
	}
	uroce_dev_unlock(dev);
	return err;
}
