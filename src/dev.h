/* SPDX-License-Identifier: MIT */
/*
 * The device: struct uroce_dev, one sub-struct per owning module, and the
 * few inlines that reach into it.  Every .c file below the verbs front
 * includes this header (and through it its own module's); module headers
 * do not, so that each says only what its module owns.
 *
 *	identity	ibdev, guid			core/dev.c
 *	dev->lock	the engine lock			(see engine/engine.h)
 *	dev->stats	the counters			core/stats.c, engine/shm.c
 *	dev->net	socket, address, packet IO	net/udp.c
 *	dev->port	the port LID			engine/lid.c
 *	dev->tx		transmit batches		engine/xmit.c
 *	dev->ack	ACKs held over a receive burst	engine/resp.c
 *	dev->prog	progress thread, timers		engine/progress.c
 *	dev->flow	in-flight budget, pacing	engine/req.c
 *	dev->cc		ECN, congestion control		engine/cc.c
 *	dev->obj	QP/MR/SRQ/group tables		obj/, verbs/
 *
 * There is one device per process (uroce_dev_get); a device built by hand
 * (engine tests) must point stats.cnt at stats.cnt_private.
 */
#ifndef UROCE_DEV_H
#define UROCE_DEV_H

#include "core/core.h"
#include "net/net.h"
#include "obj/qp.h"
#include "engine/engine.h"

/*
 * dev->stats: cnt points into the process's stats segment (engine/shm.c)
 * so that other processes can read them; before that exists, or if it
 * cannot, at cnt_private.
 */
struct uroce_stats {
	_Atomic uint64_t *cnt;
	_Atomic uint64_t cnt_private[UROCE_CNT_NUM];
};

struct uroce_dev {
	struct ibv_device ibdev; /* what ibv_get_device_list hands out */
	uint64_t guid;		 /* node GUID, big-endian */

	pthread_mutex_t lock; /* the engine lock */
	/* socket bound, progress thread running (verbs/device.c: set and
	 * cleared under its dev_up_lock, read by any thread) */
	_Atomic bool net_up;
	_Atomic bool been_up; /* it came up once: UROCE_STATS=1 prints */

	struct uroce_net net;
	struct uroce_port port;
	struct uroce_tx tx;
	struct uroce_ack_hold ack;
	struct uroce_progress prog;
	struct uroce_objs obj;
	struct uroce_flow flow;
	struct uroce_cc_dev cc;
	struct uroce_stats stats;
};

static inline void uroce_count(struct uroce_dev *dev, enum uroce_counter c,
			       uint64_t n)
{
	atomic_fetch_add_explicit(&dev->stats.cnt[c], n, memory_order_relaxed);
}

/* the application found what it polled for: it may stop polling now, so
 * the progress thread must not wait for it (engine/progress.c) */
void uroce_progress_poll_done(struct uroce_dev *dev);

/* the UDP socket, for a reader that holds neither rx_lock nor tx_lock
 * (the progress thread's dispatch): net/udp.c stores it atomically when
 * the device moves (uroce_net_rebind) */
static inline int uroce_net_sock(const struct uroce_dev *dev)
{
	return __atomic_load_n(&dev->net.sock, __ATOMIC_RELAXED);
}

/* release the engine lock and send what was queued under it */
static inline void uroce_dev_unlock(struct uroce_dev *dev)
{
	pthread_mutex_unlock(&dev->lock);
	uroce_tx_drain(dev);
}

#endif /* UROCE_DEV_H */
