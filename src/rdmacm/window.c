// SPDX-License-Identifier: MIT
/*
 * A window of requests per peer address: at most CM_WINDOW REQs, DREQs
 * and SIDR_REQs of this process wait for their answers from one peer at
 * a time; more wait here, unsent, and go out in order as answers come.
 * A peer's QP1 has a fixed receive queue (NRECV in gsi.c), and a program
 * that connects 100 000 ids in a loop (cmtime) otherwise sends faster
 * than the peer's CM thread drains it: the MADs it drops come back only
 * after the 1.07 s response timeout, and their retransmissions add to
 * the flood (docs/scale.md).  The answers (REP, REJ, MRA, DREP, SIDR_REP)
 * and the RTUs that follow a REP are bounded by the window too.
 * cm.lock held throughout.
 */
#include <stdlib.h>
#include <string.h>

#include "cm.h"

struct cm_peer {
	struct cm_hnode node; /* cm.peers, by gid_key */
	union ibv_gid gid;
	unsigned int inflight; /* sent, answer not yet come */
	struct cm_link wait;   /* ids whose request waits */
};

static uint64_t gid_key(const union ibv_gid *gid)
{
	uint64_t a, b;

	memcpy(&a, gid->raw, 8);
	memcpy(&b, gid->raw + 8, 8);
	return a ^ b;
}

static struct cm_peer *peer_get(const union ibv_gid *gid, bool create)
{
	struct cm_hnode *n;
	struct cm_peer *p;

	for (n = cm_hash_first(&cm.peers, gid_key(gid)); n; n = cm_hash_next(n)) {
		p = container_of(n, struct cm_peer, node);
		if (!memcmp(p->gid.raw, gid->raw, 16))
			return p;
	}
	if (!create)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->gid = *gid;
	cm_link_init(&p->wait);
	if (cm_hash_add(&cm.peers, &p->node, gid_key(gid))) {
		free(p);
		return NULL;
	}
	return p;
}

bool cm_window_wait(struct cm_id *id)
{
	struct cm_peer *p = peer_get(&id->peer_gid, true);

	uroce_assert_held(&cm.lock);
	/* without memory for the peer, no window: send at once */
	if (!p)
		return false;
	id->win_peer = p;
	if (p->inflight < CM_WINDOW) {
		p->inflight++;
		return false;
	}
	id->win_waiting = true;
	cm_link_add_tail(&p->wait, &id->win_node);
	return true;
}

void cm_window_leave(struct cm_id *id)
{
	struct cm_peer *p = id->win_peer;

	uroce_assert_held(&cm.lock);
	if (!p)
		return;
	id->win_peer = NULL;
	if (id->win_waiting) {
		id->win_waiting = false;
		cm_link_del(&id->win_node);
	} else {
		p->inflight--;
	}
	while (p->inflight < CM_WINDOW && !cm_link_empty(&p->wait)) {
		struct cm_id *next = cm_link_entry(p->wait.next, struct cm_id,
						   win_node);

		cm_link_del(&next->win_node);
		next->win_waiting = false;
		p->inflight++;
		cm_mad_start(next);
	}
	if (!p->inflight && cm_link_empty(&p->wait)) {
		cm_hash_del(&cm.peers, &p->node);
		free(p);
	}
}

void cm_mad_done(struct cm_id *id)
{
	uroce_assert_held(&cm.lock);
	id->mad_pending = false;
	cm_timer_cancel(&id->mad_timer);
	cm_window_leave(id);
}
