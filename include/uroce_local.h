/* SPDX-License-Identifier: MIT */
/*
 * The same-host path's shared memory and handshake (src/net/local.c),
 * here so that tests can play a hostile peer without copying it.
 *
 * A sender connects to the abstract AF_UNIX SOCK_SEQPACKET name
 * "uroce/local/<uid>/<address>/<slot>" and sends a struct lr_hello; the
 * receiver answers with a struct lr_answer and, by SCM_RIGHTS, a memfd
 * holding one struct lr_shared (sealed: F_SEAL_SHRINK | F_SEAL_SEAL) and
 * its doorbell eventfd.  The hello may carry, by SCM_RIGHTS, the sender's
 * eventfd: the receiver writes it when it freed slots of a ring whose
 * sender said it waits for room (want_room).  Host order: it never
 * leaves the host.
 */
#ifndef UROCE_LOCAL_H
#define UROCE_LOCAL_H

#include <stdint.h>
#include <sys/socket.h>

#include "wire/wire.h"

#define LR_SLOTS   128u	  /* power of two */
#define LR_PAYLOAD 32768u /* a packet's, UROCE_RING_MTU (net/net.h) */
#define LR_DATA	   (UROCE_MAX_HDR_LEN + LR_PAYLOAD + 8 + UROCE_ICRC_LEN)
#define LR_MAGIC   0x75726c31u /* "url1" */

struct lr_slot {
	uint32_t len;
	uint16_t ip_id; /* the ICRC's IPv4 identification */
	uint16_t rsvd;
	uint8_t data[LR_DATA];
} __attribute__((aligned(64)));

/* the shared memory of one direction: written by the sender but tail
 * and sleeping, which the receiver writes.  want_room: the sender has
 * packets queued behind a full ring and asks to be woken when the
 * receiver takes some (as sleeping asks the sender to ring). */
struct lr_shared {
	_Alignas(64) _Atomic uint32_t head;
	_Atomic uint32_t want_room;
	_Alignas(64) _Atomic uint32_t tail;
	_Atomic uint32_t sleeping;
	_Alignas(64) struct lr_slot slot[LR_SLOTS];
};

struct lr_hello {
	uint32_t magic;
	uint32_t slot;		      /* the sender's shared-device slot */
	struct sockaddr_storage addr; /* its address (packets' source) */
};

struct lr_answer {
	uint32_t magic;
	uint32_t slot;	/* the receiver's slot */
	uint32_t alone; /* it has the address to itself */
	uint32_t size;	/* sizeof(struct lr_shared) */
};

#endif /* UROCE_LOCAL_H */
