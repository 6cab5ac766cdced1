/* SPDX-License-Identifier: MIT */
/*
 * obj/mr.h: protection domains, memory regions and memory windows, and
 * the key table they share (dev->obj.mr_tbl).
 *
 * Owns: struct uroce_pd, struct uroce_mr, struct uroce_mw, the key layout.
 * Exports: uroce_mr_check (the one key/range/access check, obj/mr.c), the
 * window bind and invalidation the requester runs (obj/mw.c).
 * Locking: the key table and every MR/MW field are under dev->lock;
 * pd->refs and mr->mw_refs are atomics.
 */
#ifndef UROCE_OBJ_MR_H
#define UROCE_OBJ_MR_H

#include "core/core.h"

/* ---- PD ---- */
struct uroce_pd {
	struct ibv_pd ibpd;
	uint32_t pdn;
	_Atomic int refs; /* MRs, QPs, AHs using it */
};

static inline struct uroce_pd *to_upd(struct ibv_pd *pd)
{
	return container_of(pd, struct uroce_pd, ibpd);
}

/* ---- MR ---- */
struct uroce_mr {
	struct ibv_mr ibmr; /* lkey, rkey, addr, length (verbs_mr is not public) */
	struct uroce_pd *pd;
	uint64_t iova; /* what remote addresses are relative to */
	uint8_t *addr; /* where iova maps to */
	uint64_t length;
	unsigned int access; /* enum ibv_access_flags */
	uint32_t key;	     /* lkey == rkey */
	/* memory windows live in the same key table (verbs/mw.c) */
	struct uroce_mr *parent; /* MW: the MR it is bound over */
	uint8_t mw_type;	 /* 0: an MR; 1 or 2: a window */
	bool mw_bound;
	uint32_t mw_qpn;     /* type 2: the QP it is bound to */
	_Atomic int mw_refs; /* MR: windows bound over it */
};

static inline struct uroce_mr *to_umr(struct ibv_mr *mr)
{
	return container_of(mr, struct uroce_mr, ibmr);
}

/*
 * Keys (lkey == rkey): bits 8..23 index the key table; bits 24..31 and
 * 0..7 are random for an MR.  IBA leaves the low 8 bits to the consumer
 * for windows (ibv_inc_rkey), so a window's key keeps its upper 24 bits.
 */
#define UROCE_KEY_INDEX_SHIFT 8
static inline uint32_t uroce_key_index(uint32_t key)
{
	return (key >> UROCE_KEY_INDEX_SHIFT) & (UROCE_MAX_MR - 1);
}

struct uroce_mw {
	struct ibv_mw ibmw;
	struct uroce_mr win; /* the key table entry */
};

static inline struct uroce_mw *to_umw(struct ibv_mw *mw)
{
	return container_of(mw, struct uroce_mw, ibmw);
}

/* obj/mr.c: caller holds dev->lock.  Returns the MR if key names a
 * live MR in pd granting every bit of access and covering
 * [va, va + len) without wrapping, else NULL. */
struct uroce_mr *uroce_mr_check(struct uroce_dev *dev, struct uroce_pd *pd,
				uint32_t key, uint64_t va, uint64_t len,
				unsigned int access);
/* verbs/mr.c: put mr in a free key-table slot and give it a key;
 * dev->lock held */
int uroce_mr_insert(struct uroce_dev *dev, struct uroce_mr *mr);
/* pointer to iova va inside mr (caller checked the range) */
static inline uint8_t *uroce_mr_ptr(struct uroce_mr *mr, uint64_t va)
{
	return mr->addr + (va - mr->iova);
}

struct uroce_qp;
/* obj/mw.c: run a bind / an invalidation; dev->lock held */
enum ibv_wc_status uroce_mw_bind(struct uroce_qp *qp, struct ibv_mw *mw,
				 uint32_t new_key,
				 const struct ibv_mw_bind_info *info);
enum ibv_wc_status uroce_invalidate(struct uroce_qp *qp, uint32_t key);
/* drop a window's binding (its MR's mw_refs); dev->lock held */
void uroce_mw_unbind(struct uroce_mr *win);

#endif /* UROCE_OBJ_MR_H */
