/* SPDX-License-Identifier: MIT */
/*
 * What our librdmacm needs from our libibverbs beyond the verbs ABI.
 * Exported under the version node UROCE_PRIVATE_1, which no other
 * program uses; the ABI test allows exactly these extra symbols.
 */
#ifndef UROCE_PRIVATE_H
#define UROCE_PRIVATE_H

#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/socket.h>

#define UROCE_GSI_QPN  1
#define UROCE_GSI_QKEY 0x80010000u

/*
 * The device's GSI QP (QP1): a UD QP, already in RTS, with Q_Key
 * 0x80010000, receiving every datagram sent to QPN 1 (IB CM MADs).  One
 * per process; EBUSY if it exists.  Destroy it with ibv_destroy_qp.
 * cap is in/out as for ibv_create_qp.
 */
struct ibv_qp *uroce_gsi_create(struct ibv_pd *pd, struct ibv_cq *send_cq,
				struct ibv_cq *recv_cq, struct ibv_qp_cap *cap);

/*
 * Move the device to a given local IP address (UDP port 4791), as
 * rdma_bind_addr to a specific address asks.  Fails with EBUSY once QPs
 * exist, EADDRINUSE if another process owns the address.  Returns 0 or a
 * positive errno.
 */
int uroce_dev_set_addr(struct ibv_context *ctx, const struct sockaddr *addr);

/* The address the device owns now (port 4791). */
int uroce_dev_get_addr(struct ibv_context *ctx, struct sockaddr_storage *addr);

/*
 * A device that shares its address with other processes (docs/shared.md,
 * "QP1 by content") demultiplexes QP1 by content: the top byte of every
 * comm ID and SIDR request ID this process chooses must be
 * uroce_dev_id_prefix() >> 24 (0 on a device alone: any ID), and a
 * listener's service ID must be registered with uroce_dev_listen (on 1)
 * so that REQs for it reach this process.  uroce_dev_listen returns 0,
 * EADDRINUSE if another live process on the address listens on sid, or
 * another positive errno.
 */
uint32_t uroce_dev_id_prefix(struct ibv_context *ctx);
int uroce_dev_listen(struct ibv_context *ctx, uint64_t sid, int on);

/*
 * Receive every packet that has reached the device by now (each
 * same-host ring and the socket), after any receive already under way.
 * A MAD from QP1 travels on another ring than the QPs' packets a peer
 * sent before it (docs/rdmacm.md, "Disconnecting"): the CM drains before
 * it acts on a DREQ, so that the ACKs the peer sent first complete
 * their sends first, as on one wire.
 */
void uroce_dev_rx_drain(struct ibv_context *ctx);

/*
 * Send now the ACKs the device holds for an application's next call
 * (docs/datapath.md, "ACKs"): the CM does before a DREQ, which a NIC
 * would send after ACKs it sent at once.
 */
void uroce_dev_send_acks(struct ibv_context *ctx);

/*
 * Whether a completion of QP qpn (of this process's device) waits in its
 * send or receive CQ for the application's poll: the CM holds a peer's
 * disconnect back while one does (docs/rdmacm.md, "Disconnecting").
 */
int uroce_dev_qp_unpolled(struct ibv_context *ctx, uint32_t qpn);

/*
 * poll(2) over fds that also watches the device's packets: a packet that
 * wakes the caller is received by the caller itself, so the completion
 * it brings, and the completion channel in fds that it makes readable,
 * cost one wake-up (the caller's), not the progress thread's and then
 * the caller's (docs/events.md, "Who does the receive work while the
 * application sleeps").  After a short wait the caller spins first, as
 * in ibv_get_cq_event.  Returns as poll: the count of fds with revents,
 * 0 after timeout_ms (-1: none), -1 with errno (EINTR after any signal
 * handler).
 */
int uroce_dev_poll(struct ibv_context *ctx, struct pollfd *fds, nfds_t nfds,
		   int timeout_ms);

/*
 * Have fn(arg) take the channel's events where a receive raises them
 * (the progress thread's, or whichever thread received the packets), in
 * place of the doorbell that would wake the channel's own thread: the
 * CM handles a MAD in the thread that received it.  fn runs with no
 * lock of the engine's held but the receive lock, so it must not wait
 * on anything a receive needs; it returns 0 when it could not take them
 * (its lock was busy), and the doorbell rings as before.  fn NULL: the
 * doorbell always.  0, or EINVAL.
 */
int uroce_channel_direct(struct ibv_comp_channel *ch, int (*fn)(void *),
			 void *arg);

#endif /* UROCE_PRIVATE_H */
