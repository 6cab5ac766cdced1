/* SPDX-License-Identifier: MIT */
/*
 * The out-of-band TCP channel the C test programs that run as a pair
 * (uroce_traffic, fault_peer) exchange their QP numbers, keys and
 * verdicts on: listen (announcing the port on stdout and in a file the
 * test script polls), connect (retrying while the server starts), and
 * whole-buffer send/receive.  Errors are reported through the program's
 * own log function, given to uroce_oob_init.
 */
#ifndef UROCE_TEST_OOB_H
#define UROCE_TEST_OOB_H

#include <stddef.h>

/* where oob.c reports its errors: one line, no newline */
void uroce_oob_init(void (*say)(const char *line));

/*
 * Listens on PORT (0: any; IPv6 and IPv4), prints "NAME: listening on
 * port N", writes N to port_file (if not NULL) and accepts one peer,
 * waiting at most timeout_s seconds (0: as long as it takes).  Returns
 * the connected socket (TCP_NODELAY), or -1.
 */
int uroce_oob_listen(const char *name, const char *port, const char *port_file,
		     unsigned int timeout_s);

/* Connects to host:port, retrying refused connects for up to 10 s (the
 * server may still be starting).  Returns the socket, or -1. */
int uroce_oob_connect(const char *host, const char *port);

/* what uroce_oob_recv found */
enum {
	UROCE_OOB_OK = 0,
	UROCE_OOB_ERR = -1,
	UROCE_OOB_CLOSED = -2
};

/* all len bytes, or UROCE_OOB_ERR */
int uroce_oob_send(int fd, const void *buf, size_t len);
/* all len bytes, each wait at most timeout_s (0: forever); or
 * UROCE_OOB_ERR, or UROCE_OOB_CLOSED when the peer closed first */
int uroce_oob_recv(int fd, void *buf, size_t len, unsigned int timeout_s);

/* Writes text to path as a whole (a temporary file renamed over it), so
 * that a script polling for it never reads half.  0 or -1. */
int uroce_oob_write_file(const char *path, const char *text);

#endif
