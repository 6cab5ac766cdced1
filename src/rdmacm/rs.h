/* SPDX-License-Identifier: MIT */
/*
 * rsockets (rdma/rsocket.h, docs/rsocket.md): socket calls over RC QPs.
 *
 * An rsocket's number is a kernel descriptor that it owns, so that it can
 * never collide with a descriptor of the application: every r* call looks
 * its descriptor up in rs_table and, when it is not an rsocket, makes the
 * kernel call it stands for.
 *
 *   rsocket.c   the entry points: lookup, pass-through, argument checks
 *   rs_poll.c   rpoll / rselect over rsockets and ordinary descriptors
 *
 * Locking: rs_table_lock guards the table.
 */
#ifndef UROCE_RDMACM_RS_H
#define UROCE_RDMACM_RS_H

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

struct rsocket;

/* rsocket.c */
struct rsocket *rs_lookup(int fd);

#endif
