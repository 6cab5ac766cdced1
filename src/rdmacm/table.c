// SPDX-License-Identifier: MIT
/*
 * The CM's lookup structures, so that no MAD, timer or API call walks
 * every id (docs/scale.md): hash tables with doubly linked chains (comm
 * IDs, repeated requests, bound ports) and timer queues (retransmissions
 * and time waits).  All of it under cm.lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"

#define HASH_MIN_BITS 6 /* 64 buckets */

/*
 * Fibonacci hashing: the slot is the top bits of key * 2^64/phi.  Keys
 * are runs of consecutive numbers (comm IDs from a counter under a
 * per-process prefix, the peer's comm IDs, ports); the product's top
 * bits spread a run evenly over every slot, where its middle bits (the
 * slot before) left 7 of 8 slots empty and chains of 15 at 100 000
 * ids, each link a cache miss (docs/scale.md).
 */
static size_t slot_of(const struct cm_hash *h, uint64_t key)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - h->bits));
}

static void hash_insert(struct cm_hnode **head, struct cm_hnode *n)
{
	n->next = *head;
	if (*head)
		(*head)->pprev = &n->next;
	*head = n;
	n->pprev = head;
}

/* Doubles the table when it holds as many nodes as buckets; on failure
 * the chains just grow longer. */
static void hash_grow(struct cm_hash *h)
{
	unsigned int bits = h->b ? h->bits + 1 : HASH_MIN_BITS;
	size_t nb = (size_t)1 << bits, i;
	struct cm_hnode **b = calloc(nb, sizeof(*b)), *n, *next;
	struct cm_hash nh = { .b = b, .mask = nb - 1, .bits = bits };

	if (!b)
		return;
	for (i = 0; h->b && i <= h->mask; i++)
		for (n = h->b[i]; n; n = next) {
			next = n->next;
			hash_insert(&b[slot_of(&nh, n->key)], n);
		}
	free(h->b);
	h->b = b;
	h->mask = nb - 1;
	h->bits = bits;
}

int cm_hash_add(struct cm_hash *h, struct cm_hnode *n, uint64_t key)
{
	if (!h->b || h->n >= h->mask + 1)
		hash_grow(h);
	if (!h->b)
		return -ENOMEM;
	n->key = key;
	hash_insert(&h->b[slot_of(h, key)], n);
	h->n++;
	return 0;
}

void cm_hash_del(struct cm_hash *h, struct cm_hnode *n)
{
	if (!n->pprev)
		return;
	*n->pprev = n->next;
	if (n->next)
		n->next->pprev = n->pprev;
	n->next = NULL;
	n->pprev = NULL;
	h->n--;
}

struct cm_hnode *cm_hash_first(const struct cm_hash *h, uint64_t key)
{
	struct cm_hnode *n;

	if (!h->b)
		return NULL;
	for (n = h->b[slot_of(h, key)]; n && n->key != key; n = n->next)
		;
	return n;
}

struct cm_hnode *cm_hash_next(const struct cm_hnode *n)
{
	uint64_t key = n->key;

	for (n = n->next; n && n->key != key; n = n->next)
		;
	return (struct cm_hnode *)n;
}

/* ---- timers (cm.h) ---- */

static struct cm_link *timer_queue(struct cm_timers *ts, uint64_t dur_ns)
{
	struct cm_timer_queue *free_q = NULL;
	unsigned int i;

	for (i = 0; i < CM_TIMER_QUEUES; i++) {
		struct cm_timer_queue *q = &ts->q[i];

		if (q->dur_ns == dur_ns)
			return &q->q;
		if (!free_q && (!q->dur_ns || cm_link_empty(&q->q)))
			free_q = q;
	}
	if (!free_q)
		return NULL;
	free_q->dur_ns = dur_ns;
	cm_link_init(&free_q->q);
	return &free_q->q;
}

void cm_timer_set(struct cm_timers *ts, struct cm_timer *t, uint64_t now,
		  uint64_t dur_ns)
{
	struct cm_link *q, *pos;

	uroce_assert_held(&cm.lock);
	cm_timer_cancel(t);
	t->deadline_ns = now + dur_ns; /* (now > 0: 0 means not armed) */
	q = timer_queue(ts, dur_ns);
	if (q) {
		cm_link_add_tail(q, &t->link);
		return;
	}
	/* the sorted queue: after the last timer due no later */
	for (pos = ts->odd.prev; pos != &ts->odd; pos = pos->prev)
		if (cm_link_entry(pos, struct cm_timer, link)->deadline_ns <=
		    t->deadline_ns)
			break;
	cm_link_add_tail(pos->next, &t->link);
}

void cm_timer_cancel(struct cm_timer *t)
{
	cm_link_del(&t->link);
	t->deadline_ns = 0;
}

static struct cm_timer *head_of(const struct cm_link *q)
{
	return cm_link_empty(q) ? NULL :
				  cm_link_entry(q->next, struct cm_timer, link);
}

struct cm_timer *cm_timer_first(const struct cm_timers *ts)
{
	struct cm_timer *first = head_of(&ts->odd), *t;
	unsigned int i;

	for (i = 0; i < CM_TIMER_QUEUES; i++) {
		if (!ts->q[i].dur_ns)
			continue;
		t = head_of(&ts->q[i].q);
		if (t && (!first || t->deadline_ns < first->deadline_ns))
			first = t;
	}
	return first;
}

/* ---- the ids' indexes ---- */

struct cm_id *cm_find_local(uint32_t local_id)
{
	struct cm_hnode *n;

	uroce_assert_held(&cm.lock);
	if (!local_id)
		return NULL;
	n = cm_hash_first(&cm.by_local, local_id);
	return n ? container_of(n, struct cm_id, local_node) : NULL;
}

void cm_set_local_id(struct cm_id *id, uint32_t local_id)
{
	uroce_assert_held(&cm.lock);
	cm_hash_del(&cm.by_local, &id->local_node);
	id->local_id = local_id;
	if (local_id)
		cm_hash_add(&cm.by_local, &id->local_node, local_id);
}

static uint64_t dup_key(uint32_t remote_id, const union ibv_gid *peer)
{
	uint64_t g;

	memcpy(&g, &peer->raw[8], sizeof(g));
	return (uint64_t)remote_id ^ g;
}

void cm_index_passive(struct cm_id *id)
{
	uroce_assert_held(&cm.lock);
	cm_hash_add(&cm.by_remote, &id->remote_node,
		    dup_key(id->remote_id, &id->peer_gid));
}

/*
 * Tombstones.  A copy of a REQ can arrive after its passive id is gone:
 * a retransmission that waited in a queue (QP1's, a shared address's
 * forwarding socket) while the connection was made, used and ended, or
 * rejected.  Found by no id, it would make a new connection and a second
 * CONNECT_REQUEST for one request (cmtime's server indexes an array by
 * those).  So a freed passive id leaves its peer's comm ID and GID here
 * for as long as the peer may still be sending its REQ (its retries),
 * and such a REQ is dropped, as the kernel's CM does for a connection in
 * time wait.  Comm IDs come back only after 2^24 others (proto.c), so a
 * new connection from the peer does not hit one.  Constant lifetime:
 * the FIFO is in expiry order, and each insert drops the expired.
 */
#define CM_TOMB_NS (12 * 1000000000ull)

struct cm_tomb {
	struct cm_hnode node; /* cm.tombs, by dup_key */
	struct cm_link fifo;  /* cm.tomb_fifo */
	union ibv_gid gid;
	uint32_t remote_id;
	uint64_t expires_ns;
};

static void tomb_sweep(uint64_t now)
{
	while (!cm_link_empty(&cm.tomb_fifo)) {
		struct cm_tomb *t = cm_link_entry(cm.tomb_fifo.next,
						  struct cm_tomb, fifo);

		if (t->expires_ns > now)
			break;
		cm_link_del(&t->fifo);
		cm_hash_del(&cm.tombs, &t->node);
		free(t);
	}
}

static void tomb_add(const struct cm_id *id)
{
	struct cm_tomb *t;
	uint64_t now = cm_now_ns();

	tomb_sweep(now);
	t = calloc(1, sizeof(*t));
	if (!t)
		return; /* (a late REQ copy then makes a connection) */
	t->gid = id->peer_gid;
	t->remote_id = id->remote_id;
	t->expires_ns = now + CM_TOMB_NS;
	if (cm_hash_add(&cm.tombs, &t->node, dup_key(t->remote_id, &t->gid))) {
		free(t);
		return;
	}
	cm_link_add_tail(&cm.tomb_fifo, &t->fifo);
}

bool cm_tomb_find(uint32_t remote_id, const union ibv_gid *peer)
{
	struct cm_hnode *n;

	uroce_assert_held(&cm.lock);
	tomb_sweep(cm_now_ns());
	for (n = cm_hash_first(&cm.tombs, dup_key(remote_id, peer)); n;
	     n = cm_hash_next(n)) {
		struct cm_tomb *t = container_of(n, struct cm_tomb, node);

		if (t->remote_id == remote_id &&
		    !memcmp(t->gid.raw, peer->raw, 16))
			return true;
	}
	return false;
}

struct cm_id *cm_find_passive(uint32_t remote_id, const union ibv_gid *peer,
			      uint64_t tid)
{
	struct cm_hnode *n;

	uroce_assert_held(&cm.lock);
	for (n = cm_hash_first(&cm.by_remote, dup_key(remote_id, peer)); n;
	     n = cm_hash_next(n)) {
		struct cm_id *id = container_of(n, struct cm_id, remote_node);

		if (id->remote_id == remote_id && id->tid == tid &&
		    !memcmp(id->peer_gid.raw, peer->raw, 16))
			return id;
	}
	return NULL;
}

static uint64_t port_key(uint16_t ps, uint16_t port)
{
	return (uint64_t)ps << 16 | port;
}

void cm_index_port(struct cm_id *id, bool passive)
{
	uroce_assert_held(&cm.lock);
	if (id->port_table)
		cm_hash_del(id->port_table, &id->port_node);
	id->port_table = passive ? &cm.child_ports : &cm.ports;
	cm_hash_add(id->port_table, &id->port_node,
		    port_key((uint16_t)id->id.ps, id->port));
}

struct cm_id *cm_port_first(bool passive, uint16_t ps, uint16_t port)
{
	struct cm_hnode *n = cm_hash_first(passive ? &cm.child_ports : &cm.ports,
					   port_key(ps, port));

	uroce_assert_held(&cm.lock);
	return n ? container_of(n, struct cm_id, port_node) : NULL;
}

struct cm_id *cm_port_next(struct cm_id *id)
{
	struct cm_hnode *n = cm_hash_next(&id->port_node);

	uroce_assert_held(&cm.lock);
	return n ? container_of(n, struct cm_id, port_node) : NULL;
}

void cm_id_link(struct cm_id *id)
{
	uroce_assert_held(&cm.lock);
	cm_link_init(&id->children);
	cm_link_init(&id->deferred_q);
	cm_link_init(&id->child_node);
	cm_link_init(&id->deferred_node);
	cm_link_init(&id->listen_node);
	cm_link_init(&id->win_node);
	cm_link_init(&id->mad_timer.link);
	cm_link_init(&id->tw_timer.link);
	cm_link_init(&id->disc_timer.link);
	cm_link_init(&id->disc_node);
	id->mad_timer.kind = CM_TIMER_MAD;
	id->tw_timer.kind = CM_TIMER_TIMEWAIT;
	id->disc_timer.kind = CM_TIMER_DISC;
	cm_link_add_tail(&cm.ids, &id->node);
}

void cm_id_unlink(struct cm_id *id)
{
	uroce_assert_held(&cm.lock);
	cm_window_leave(id);
	cm_timer_cancel(&id->mad_timer);
	cm_timer_cancel(&id->tw_timer);
	cm_timer_cancel(&id->disc_timer);
	cm_link_del(&id->disc_node);
	cm_link_del(&id->node);
	cm_link_del(&id->child_node);
	cm_link_del(&id->deferred_node);
	cm_link_del(&id->listen_node);
	cm_hash_del(&cm.by_local, &id->local_node);
	if (id->remote_node.pprev && id->state != CM_SIDR_REQ_RCVD &&
	    id->state != CM_SIDR_DONE)
		tomb_add(id);
	cm_hash_del(&cm.by_remote, &id->remote_node);
	if (id->port_table)
		cm_hash_del(id->port_table, &id->port_node);
}
