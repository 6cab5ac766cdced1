/* SPDX-License-Identifier: MIT */
/*
 * What the library and the uroce tool (`uroce run`, `uroce doctor`) must
 * agree on about the host.
 *
 * The socket buffers the datapath asks for on its UDP socket: without
 * CAP_NET_ADMIN it gets at most net.core.rmem_max / wmem_max, which
 * `uroce doctor` compares with this.
 *
 * Addresses that `uroce run` has chosen for a program which has not bound
 * them yet (docs/run.md, "The address is held for the program"):
 *
 * `uroce run` learns the address a program's device will own by opening
 * the device itself before it execs the program, and passes it on in
 * UROCE_ADDR.  Between the exec and the program's own bind (which a
 * server may put off until a client connects) the address is free, and
 * another process scanning for a free loopback address would take it.  So
 * `uroce run` holds an abstract unix socket named after the address for
 * the program's whole life (the program inherits it), and the library's
 * scan and `uroce run`'s skip an address whose name is held.  Abstract
 * names cost no file and vanish when the last holder dies, however it
 * dies.
 */
#ifndef UROCE_HOST_H
#define UROCE_HOST_H

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define UROCE_SOCK_BUF_BYTES (32 << 20) /* the receive buffer */

/*
 * UROCE_SNDBUF_KB (value v, NULL if unset): the send buffer in KiB, 128
 * by default, 16 KiB to 1 GiB (docs/transport.md, "A full send buffer").
 * The socket asks for half of it: the kernel doubles what it is given.
 */
static inline unsigned long long uroce_sndbuf_kb(const char *v)
{
	unsigned long long kb = v && *v ? strtoull(v, NULL, 0) : 128;

	return kb < 16 ? 16 : kb > (1ull << 20) ? 1ull << 20 : kb;
}
#define UROCE_ADDR_RESERVE_FMT "uroce-addr:%s"

/*
 * Take the name that reserves the address written as ip (inet_ntop
 * form): a socket, or -EADDRINUSE if someone holds it already.
 */
static inline int uroce_addr_reserve(const char *ip)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	socklen_t len;
	int fd, n, err;

	n = snprintf(un.sun_path + 1, sizeof(un.sun_path) - 1,
		     UROCE_ADDR_RESERVE_FMT, ip);
	if (n < 0 || (size_t)n >= sizeof(un.sun_path) - 1)
		return -ENAMETOOLONG;
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&un, len)) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

#endif
