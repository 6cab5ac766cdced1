// SPDX-License-Identifier: MIT
/*
 * A small rdma_cm program for the cases the Debian tools do not reach:
 * reject with private data, a closed port, a backlog under many
 * concurrent connects, disconnect from either side, a peer that dies
 * mid-handshake, and the API's error paths.  Prints "PASS: ..." and
 * exits 0, or prints "FAIL: ..." and exits 1.
 *
 *   cm_probe server ADDR PORT accept N BACKLOG [server-disconnects] [timewait]
 *                                                [peer-exits]
 *   cm_probe server ADDR PORT reject
 *   cm_probe server ADDR PORT die            (_exit on CONNECT_REQUEST)
 *   cm_probe server ADDR PORT expect-unreachable
 *   cm_probe server ADDR PORT hold-listen     (see early requests below)
 *   cm_probe server ADDR PORT hold-destroy
 *   cm_probe server ADDR PORT hold-expire
 *   cm_probe server ADDR PORT hold-relisten
 *   cm_probe server ADDR PORT afonly          (0.0.0.0 and [::] AFONLY)
 *   cm_probe server ADDR PORT v6-any          ([::] not AFONLY)
 *   cm_probe server ADDR PORT v6-only         ([::] AFONLY)
 *   cm_probe server ADDR PORT unpolled        (see below)
 *   cm_probe client ADDR PORT connect N [client-disconnects] [timewait]
 *   cm_probe client ADDR PORT exit-connected N  (exit() once connected)
 *   cm_probe client ADDR PORT reconnect
 *   cm_probe client ADDR PORT expect-reject
 *   cm_probe client ADDR PORT expect-refused
 *   cm_probe client ADDR PORT expect-refused-late
 *   cm_probe client ADDR PORT expect-unreachable
 *   cm_probe client ADDR PORT die-after-connect
 *   cm_probe client ADDR PORT unpolled
 *   cm_probe api
 *
 * unpolled: the client sends one message, sees it complete (the
 * server's receive has completed: its ACK came), disconnects, waits for
 * DISCONNECTED (the server's CM has taken the DREQ: its DREP came) and
 * writes "drep PORT" to $UROCE_CM_LISTEN_FILE.  The server, which has
 * not polled its CQ, must have no event then (the CM holds DISCONNECTED
 * for that poll: run it with UROCE_CM_DISC_HOLD_MS long), and must get
 * DISCONNECTED once it has polled the receive.
 *
 * Early requests (a REQ for a port bound here before rdma_listen): the
 * hold-* servers listen once on another port (QP1 comes up, as with
 * perftest -R's first listen), bind PORT, write "bound PORT" to
 * $UROCE_CM_LISTEN_FILE (the runner then starts the client) and wait
 * until our librdmacm writes "hold PORT" there: the client's REQ has
 * come and is held.  Then hold-listen calls rdma_listen and accepts one
 * connection; hold-destroy destroys the bound id and hold-expire waits,
 * and both wait for "reject PORT" (the held REQ refused).  hold-relisten
 * is perftest -R's order: it listens and accepts a first connection,
 * destroys the listener and disconnects that connection (its id, still
 * there, keeps the port in use), waits for the client's second REQ to be
 * held, then listens again on PORT and accepts it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#define REJ_DATA "no-thanks"
#define MAXC	 512

static struct rdma_event_channel *ch;
static struct ibv_pd *pd;
static struct ibv_cq *cq;

static void __attribute__((format(printf, 1, 2), noreturn))
fail(const char *fmt, ...)
{
	va_list ap;

	printf("FAIL: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	exit(1);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Next event, through poll on the channel's fd (it must be pollable). */
static struct rdma_cm_event *next_event(int timeout_s)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *e;

	if (poll(&p, 1, timeout_s * 1000) != 1)
		fail("no event within %d seconds", timeout_s);
	if (rdma_get_cm_event(ch, &e))
		fail("rdma_get_cm_event: %s", strerror(errno));
	return e;
}

static void make_addr(const char *a, const char *port, struct sockaddr_in *sin)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)atoi(port));
	if (inet_pton(AF_INET, a, &sin->sin_addr) != 1)
		fail("bad address %s", a);
}

static void make_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 4,
			 .max_recv_wr = 4,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};

	if (!pd) {
		pd = ibv_alloc_pd(id->verbs);
		cq = ibv_create_cq(id->verbs, 4 * MAXC, NULL, NULL, 0);
		if (!pd || !cq)
			fail("pd/cq: %s", strerror(errno));
	}
	qa.send_cq = qa.recv_cq = cq;
	if (rdma_create_qp(id, pd, &qa))
		fail("rdma_create_qp: %s", strerror(errno));
}

static bool file_has_line(const char *path, const char *want)
{
	char line[128];
	bool found = false;
	FILE *f = fopen(path, "r");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = !strcmp(line, want);
	fclose(f);
	return found;
}

/* Waits (inotify, bounded) until $UROCE_CM_LISTEN_FILE has "WHAT PORT". */
static void wait_line(const char *what, const char *port, int timeout_s)
{
	const char *path = getenv("UROCE_CM_LISTEN_FILE");
	double end = now() + timeout_s;
	char want[64], buf[4096];
	int fd;

	if (!path || !*path)
		fail("UROCE_CM_LISTEN_FILE is not set");
	snprintf(want, sizeof(want), "%s %s\n", what, port);
	fd = inotify_init1(IN_CLOEXEC);
	if (fd < 0 || inotify_add_watch(fd, path, IN_MODIFY) < 0)
		fail("inotify on %s: %s", path, strerror(errno));
	/* watched first, then read: no write can slip between */
	while (!file_has_line(path, want)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int left = (int)((end - now()) * 1000);

		if (left <= 0 || poll(&p, 1, left) == 0)
			fail("no '%s %s' in %s within %d s", what, port, path,
			     timeout_s);
		if (read(fd, buf, sizeof(buf)) < 0 && errno != EINTR)
			fail("inotify read: %s", strerror(errno));
	}
	close(fd);
}

static void append_line(const char *what, const char *port)
{
	const char *path = getenv("UROCE_CM_LISTEN_FILE");
	FILE *f = path && *path ? fopen(path, "a") : NULL;

	if (!f)
		fail("cannot append to UROCE_CM_LISTEN_FILE '%s'",
		     path ? path : "");
	fprintf(f, "%s %s\n", what, port);
	fclose(f);
}

/*
 * The early-request cases: returns the bound, not listening, id once the
 * client's REQ for it is held; for hold-destroy and hold-expire, all is
 * done and NULL is returned.
 */
static struct rdma_cm_id *held_request(const char *mode, const char *addr,
				       const char *port)
{
	struct rdma_cm_id *first, *lid;
	struct sockaddr_in sin;
	char want[64];
	double t;

	/* a first listener brings QP1 up, as perftest -R's first one does */
	make_addr(addr, "0", &sin);
	if (rdma_create_id(ch, &first, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(first, (struct sockaddr *)&sin) ||
	    rdma_listen(first, 0) || rdma_destroy_id(first))
		fail("first listen: %s", strerror(errno));
	make_addr(addr, port, &sin);
	if (rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(lid, (struct sockaddr *)&sin))
		fail("bind: %s", strerror(errno));
	snprintf(want, sizeof(want), "reject %s\n", port);
	append_line("bound", port);
	wait_line("hold", port, 60);
	printf("the client's REQ is held\n");
	if (!strcmp(mode, "hold-listen"))
		return lid;
	t = now();
	if (!strcmp(mode, "hold-destroy")) {
		if (rdma_destroy_id(lid))
			fail("rdma_destroy_id: %s", strerror(errno));
		/* refused within the call, not later by a timer */
		if (!file_has_line(getenv("UROCE_CM_LISTEN_FILE"), want))
			fail("rdma_destroy_id returned, the REQ still held");
	}
	wait_line("reject", port, 30);
	if (!strcmp(mode, "hold-expire") && rdma_destroy_id(lid))
		fail("rdma_destroy_id: %s", strerror(errno));
	printf("PASS: held REQ rejected %.2f s after %s\n", now() - t,
	       !strcmp(mode, "hold-destroy") ? "the id was destroyed" :
					       "it was held");
	return NULL;
}

/*
 * perftest -R's way: the listener goes, its connection stays (here it is
 * also disconnected, which tells the client to connect again), and a new
 * listener comes on the same port once the client's REQ is held.
 */
static struct rdma_cm_id *relisten_after(struct rdma_cm_id *lid,
					 struct rdma_cm_id *conn,
					 const char *addr, const char *port)
{
	struct sockaddr_in sin;

	if (rdma_destroy_id(lid) || rdma_disconnect(conn))
		fail("destroy listener, disconnect: %s", strerror(errno));
	wait_line("hold", port, 60);
	printf("the client's second REQ is held\n");
	make_addr(addr, port, &sin);
	if (rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(lid, (struct sockaddr *)&sin) || rdma_listen(lid, 0))
		fail("listen again: %s", strerror(errno));
	return lid;
}

/*
 * RDMA_OPTION_ID_AFONLY, as the kernel's rdma_cm has it (cma_check_port,
 * cma_match_private_data).  "afonly": tgtd's listeners, 0.0.0.0:PORT
 * (AF_INET: AFONLY by default) and [::]:PORT with AFONLY 1 on the same
 * port; the option after the bind is EINVAL, a third id on [::]:PORT
 * that is not AFONLY overlaps both, and a second of either family is
 * refused too (EADDRINUSE).  The IPv4 listener is
 * returned: the client's request must reach it.  "v6-any": [::]:PORT
 * with AFONLY 0 alone, returned: it takes IPv4 requests too.  "v6-only":
 * [::]:PORT with AFONLY 1 alone: an IPv4 request is refused.  *other:
 * a listener to destroy at the end.
 */
static struct rdma_cm_id *family_listeners(const char *mode, const char *port,
					   struct rdma_cm_id **other)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6 };
	struct rdma_cm_id *id4 = NULL, *id6, *id6b;
	int afonly = strcmp(mode, "v6-any") != 0, zero = 0;
	bool both = !strcmp(mode, "afonly");

	sin.sin_port = htons((uint16_t)atoi(port));
	sin6.sin6_port = sin.sin_port;
	if (rdma_create_id(ch, &id6, NULL, RDMA_PS_TCP) ||
	    rdma_set_option(id6, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &afonly,
			    sizeof(afonly)))
		fail("AFONLY %d on a new id: %s", afonly, strerror(errno));
	if (both && (rdma_create_id(ch, &id4, NULL, RDMA_PS_TCP) ||
		     rdma_bind_addr(id4, (struct sockaddr *)&sin) ||
		     rdma_listen(id4, 0)))
		fail("listen on 0.0.0.0:%s: %s", port, strerror(errno));
	if (rdma_bind_addr(id6, (struct sockaddr *)&sin6) || rdma_listen(id6, 0))
		fail("listen on [::]:%s with AFONLY %d: %s", port, afonly,
		     strerror(errno));
	if (rdma_set_option(id6, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &afonly,
			    sizeof(afonly)) != -1 ||
	    errno != EINVAL)
		fail("AFONLY after the bind: %s", strerror(errno));
	if (both) {
		if (rdma_create_id(ch, &id6b, NULL, RDMA_PS_TCP) ||
		    rdma_set_option(id6b, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY,
				    &zero, sizeof(zero)))
			fail("AFONLY 0: %s", strerror(errno));
		if (rdma_bind_addr(id6b, (struct sockaddr *)&sin6) != -1 ||
		    errno != EADDRINUSE)
			fail("[::]:%s not AFONLY next to both: %s", port,
			     strerror(errno));
		rdma_destroy_id(id6b);
		/* a family still has the port once */
		if (rdma_create_id(ch, &id6b, NULL, RDMA_PS_TCP))
			fail("create: %s", strerror(errno));
		if (rdma_bind_addr(id6b, (struct sockaddr *)&sin) != -1 ||
		    errno != EADDRINUSE)
			fail("0.0.0.0:%s bound twice: %s", port,
			     strerror(errno));
		rdma_destroy_id(id6b);
		if (rdma_create_id(ch, &id6b, NULL, RDMA_PS_TCP) ||
		    rdma_set_option(id6b, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY,
				    &afonly, sizeof(afonly)))
			fail("AFONLY 1: %s", strerror(errno));
		if (rdma_bind_addr(id6b, (struct sockaddr *)&sin6) != -1 ||
		    errno != EADDRINUSE)
			fail("[::]:%s AFONLY bound twice: %s", port,
			     strerror(errno));
		rdma_destroy_id(id6b);
	}
	printf("listening on %s port %s\n", both ? "0.0.0.0 and [::]" : "[::]",
	       port);
	*other = both ? id6 : NULL;
	return both ? id4 : id6;
}

/* Whether the word opt is among the mode's options. */
static bool has_opt(int argc, char **argv, int from, const char *opt)
{
	int i;

	for (i = from; i < argc; i++)
		if (!strcmp(argv[i], opt))
			return true;
	return false;
}

/* TIMEWAIT_EXIT for connection i: after its DISCONNECTED, once. */
static void timewait_exit(bool *disc_seen, bool *tw_seen, int i, int *tw)
{
	if (!disc_seen[i])
		fail("TIMEWAIT_EXIT before DISCONNECTED on connection %d", i);
	if (tw_seen[i])
		fail("TIMEWAIT_EXIT twice on connection %d", i);
	tw_seen[i] = true;
	(*tw)++;
}

static int conn_index(struct rdma_cm_id **conns, int n, struct rdma_cm_id *id)
{
	int i;

	for (i = 0; i < n; i++)
		if (conns[i] == id)
			return i;
	fail("event for an id never accepted");
	return -1;
}

static int server(const char *addr, const char *port, int argc, char **argv)
{
	const char *mode = argv[0];
	struct rdma_cm_id *lid, *conns[MAXC], *other = NULL, *want_lid = NULL;
	bool up[MAXC] = { false }, down[MAXC] = { false },
	     tw_seen[MAXC] = { false };
	struct sockaddr_in sin;
	int n = 1, backlog = 0, nconn = 0, est = 0, early = 0, disc = 0, tw = 0,
	    i;
	double t_rep = now();
	bool server_disc = has_opt(argc, argv, 3, "server-disconnects");
	bool want_tw = has_opt(argc, argv, 3, "timewait");
	/* the client exits connected: its DREQ must come at once */
	bool peer_exits = has_opt(argc, argv, 3, "peer-exits");
	bool relisten = !strcmp(mode, "hold-relisten");

	if (!strcmp(mode, "accept")) {
		n = argc > 1 ? atoi(argv[1]) : 1;
		backlog = argc > 2 ? atoi(argv[2]) : 0;
	}
	if (n > MAXC)
		fail("too many connections: %s", argv[1]);
	if (relisten) {
		n = 2;
		mode = "accept";
	}
	if (!strcmp(mode, "afonly") || !strncmp(mode, "v6-", 3)) {
		lid = want_lid = family_listeners(mode, port, &other);
		mode = "accept";
	} else if (!strncmp(mode, "hold-", 5)) {
		lid = held_request(mode, addr, port);
		if (!lid)
			return 0;
		/* the held REQ becomes this listener's CONNECT_REQUEST */
		if (rdma_listen(lid, 0))
			fail("listen: %s", strerror(errno));
		mode = "accept";
	} else {
		make_addr(addr, port, &sin);
		if (rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP) ||
		    rdma_bind_addr(lid, (struct sockaddr *)&sin) ||
		    rdma_listen(lid, backlog))
			fail("listen: %s", strerror(errno));
	}
	printf("listening on %s:%s\n", addr, port);
	fflush(stdout);
	while (est + early < n || disc < n || (want_tw && tw < n)) {
		/* time wait is 67 ms, a DREQ milliseconds: 10 s is far
		 * beyond them on any host (the peer's retries would not
		 * tell an idle connection in a minute) */
		struct rdma_cm_event *e = next_event(
			disc == n || (peer_exits && est + early == n) ? 10 :
									120);
		struct rdma_cm_id *id = e->id;
		enum rdma_cm_event_type t = e->event;
		int status = e->status;

		if (t == RDMA_CM_EVENT_CONNECT_REQUEST && !strcmp(mode, "die"))
			_exit(3);
		if (t == RDMA_CM_EVENT_CONNECT_REQUEST && want_lid &&
		    e->listen_id != want_lid)
			fail("the request reached the wrong listener");
		rdma_ack_cm_event(e);
		switch (t) {
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			if (!strcmp(mode, "reject")) {
				if (rdma_reject(id, REJ_DATA, sizeof(REJ_DATA)))
					fail("rdma_reject: %s", strerror(errno));
				rdma_destroy_id(id);
				printf("PASS: rejected with private data\n");
				return 0;
			}
			make_qp(id);
			{
				struct rdma_conn_param cp = {
					.responder_resources = 1,
					.initiator_depth = 1,
					.rnr_retry_count = 7,
				};
				if (nconn == MAXC)
					fail("more than %d requests", MAXC);
				if (rdma_accept(id, &cp))
					fail("rdma_accept: %s", strerror(errno));
				conns[nconn++] = id;
				t_rep = now();
			}
			break;
		case RDMA_CM_EVENT_ESTABLISHED:
			i = conn_index(conns, nconn, id);
			if (up[i])
				fail("ESTABLISHED twice on connection %d", i);
			up[i] = true;
			est++;
			if (server_disc && rdma_disconnect(id))
				fail("rdma_disconnect: %s", strerror(errno));
			if (relisten && i == 0)
				lid = relisten_after(lid, id, addr, port);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
			/* a lost RTU, overtaken by the client's DREQ, gives
			 * DISCONNECTED with no ESTABLISHED, as the kernel's
			 * rdma_cm does (DREQ received in REP sent) */
			i = conn_index(conns, nconn, id);
			if (!up[i])
				early++;
			down[i] = true;
			disc++;
			if (!server_disc)
				rdma_disconnect(id);
			break;
		case RDMA_CM_EVENT_TIMEWAIT_EXIT:
			timewait_exit(down, tw_seen,
				      conn_index(conns, nconn, id), &tw);
			break;
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_CONNECT_ERROR:
			if (!strcmp(mode, "expect-unreachable")) {
				/* our REP's retries: 9 x 1.07 s, as the
				 * client's REQ asked; "timely" is well within
				 * a minute, however loaded the host */
				if (now() - t_rep > 60)
					fail("%s only %.1f s after the REP",
					     rdma_event_str(t), now() - t_rep);
				printf("PASS: %s (status %d) %.1f s after the REP, "
				       "the client having died\n",
				       rdma_event_str(t), status, now() - t_rep);
				return 0;
			}
			/* fall through */
		default:
			printf("FAIL: unexpected %s status %d\n",
			       rdma_event_str(t), status);
			return 1;
		}
	}
	if (nconn != n || disc != n)
		fail("%d accepted, %d disconnected, expected %d", nconn, disc,
		     n);
	for (i = 0; i < nconn; i++) {
		rdma_destroy_qp(conns[i]);
		if (rdma_destroy_id(conns[i]))
			fail("rdma_destroy_id: %s", strerror(errno));
	}
	rdma_destroy_id(lid);
	if (other)
		rdma_destroy_id(other);
	printf("PASS: %d connections accepted and disconnected (%s side "
	       "first; %d before their RTU came)%s\n",
	       n, server_disc ? "server" : "client", early,
	       want_tw ? ", each then out of time wait" : "");
	return 0;
}

static int client(const char *addr, const char *port, int argc, char **argv)
{
	const char *mode = argv[0];
	struct rdma_cm_id *ids[MAXC] = { NULL };
	struct sockaddr_in sin;
	bool again = !strcmp(mode, "reconnect");
	int n = argc > 1 && (!strcmp(mode, "connect") ||
			     !strcmp(mode, "exit-connected")) ?
			atoi(argv[1]) :
		again ? 2 :
			1;
	bool client_disc = has_opt(argc, argv, 2, "client-disconnects");
	bool want_tw = has_opt(argc, argv, 2, "timewait");
	bool down[MAXC] = { false }, tw_seen[MAXC] = { false };
	int est = 0, disc = 0, tw = 0, i;
	double t0 = now();

	if (n > MAXC)
		fail("too many connections: %s", argv[1]);
	make_addr(addr, port, &sin);
	/* reconnect: the second connection once the server has ended the
	 * first */
	for (i = 0; i < (again ? 1 : n); i++) {
		if (rdma_create_id(ch, &ids[i], NULL, RDMA_PS_TCP) ||
		    rdma_resolve_addr(ids[i], NULL, (struct sockaddr *)&sin,
				      2000))
			fail("resolve: %s", strerror(errno));
	}
	while (est + disc < 2 * n || (want_tw && tw < n)) {
		struct rdma_cm_event *e = next_event(disc == n ? 10 : 60);
		struct rdma_cm_id *id = e->id;
		enum rdma_cm_event_type t = e->event;
		int status = e->status;
		char pdata[64] = "";

		if (t == RDMA_CM_EVENT_REJECTED && e->param.conn.private_data)
			memcpy(pdata, e->param.conn.private_data,
			       sizeof(REJ_DATA));
		rdma_ack_cm_event(e);
		switch (t) {
		case RDMA_CM_EVENT_ADDR_RESOLVED:
			if (rdma_resolve_route(id, 2000))
				fail("rdma_resolve_route: %s", strerror(errno));
			break;
		case RDMA_CM_EVENT_ROUTE_RESOLVED: {
			struct rdma_conn_param cp = {
				.responder_resources = 1,
				.initiator_depth = 1,
				.retry_count = 7,
				.rnr_retry_count = 7,
			};

			if (!strcmp(mode, "die-after-connect")) {
				/* no QP: our side sends no RTU by itself, so
				 * the handshake stays half done however fast
				 * the server answers */
				cp.qp_num = 0x12345;
				if (rdma_connect(id, &cp))
					fail("rdma_connect: %s",
					     strerror(errno));
				break;
			}
			make_qp(id);
			if (rdma_connect(id, &cp))
				fail("rdma_connect: %s", strerror(errno));
			break;
		}
		case RDMA_CM_EVENT_CONNECT_RESPONSE:
			/* the server has our REQ and has sent its REP: die
			 * before the RTU */
			if (!strcmp(mode, "die-after-connect"))
				_exit(0);
			printf("FAIL: unexpected %s\n", rdma_event_str(t));
			return 1;
		case RDMA_CM_EVENT_ESTABLISHED:
			est++;
			if (!strcmp(mode, "exit-connected") && est == n) {
				/* exit() with the connections up: our
				 * librdmacm's DREQs tell the server */
				printf("PASS: exiting with %d connections up\n",
				       n);
				exit(0);
			}
			if ((client_disc || (again && id == ids[1])) &&
			    rdma_disconnect(id))
				fail("rdma_disconnect: %s", strerror(errno));
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
			down[conn_index(ids, n, id)] = true;
			disc++;
			if (!client_disc)
				rdma_disconnect(id);
			if (again && id == ids[0] &&
			    (rdma_create_id(ch, &ids[1], NULL, RDMA_PS_TCP) ||
			     rdma_resolve_addr(ids[1], NULL,
					       (struct sockaddr *)&sin, 2000)))
				fail("resolve: %s", strerror(errno));
			break;
		case RDMA_CM_EVENT_TIMEWAIT_EXIT:
			timewait_exit(down, tw_seen, conn_index(ids, n, id),
				      &tw);
			break;
		case RDMA_CM_EVENT_REJECTED:
			if (!strcmp(mode, "expect-reject")) {
				if (status != 28 || strcmp(pdata, REJ_DATA))
					fail("rejected, but not as expected: %s",
					     pdata);
				printf("PASS: REJECTED status 28 with '%s'\n",
				       pdata);
				return 0;
			}
			if (!strcmp(mode, "expect-refused")) {
				if (status != 8)
					fail("rejected with status %d, not 8",
					     status);
				if (now() - t0 > 3)
					fail("refusal took %.2f s", now() - t0);
				printf("PASS: REJECTED (invalid service ID) in "
				       "%.3f s\n",
				       now() - t0);
				return 0;
			}
			if (!strcmp(mode, "expect-refused-late")) {
				/* after the server held it: no bound but our
				 * REQ's retries (UNREACHABLE after ~10 s) */
				if (status != 8)
					fail("rejected with status %d, not 8",
					     status);
				printf("PASS: REJECTED (invalid service ID) after "
				       "%.3f s\n",
				       now() - t0);
				return 0;
			}
			printf("FAIL: REJECTED status %d\n", status);
			return 1;
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_CONNECT_ERROR:
			if (!strcmp(mode, "expect-unreachable")) {
				printf("PASS: %s (status %d) in %.1f s\n",
				       rdma_event_str(t), status, now() - t0);
				return 0;
			}
			/* fall through */
		default:
			printf("FAIL: unexpected %s status %d\n",
			       rdma_event_str(t), status);
			return 1;
		}
	}
	for (i = 0; i < n; i++) {
		rdma_destroy_qp(ids[i]);
		if (rdma_destroy_id(ids[i]))
			fail("rdma_destroy_id: %s", strerror(errno));
	}
	printf("PASS: %d connections established and disconnected in "
	       "%.2f s%s\n",
	       n, now() - t0, want_tw ? ", each then out of time wait" : "");
	return 0;
}

/* destroy_waits_for_ack: a thread that holds an event of the id */
struct holder {
	struct rdma_event_channel *ch;
	pthread_barrier_t got;
	_Atomic bool acked;
};

static void *hold_event(void *arg)
{
	struct holder *h = arg;
	struct rdma_cm_event *e;
	struct timespec hold = { 0, 200 * 1000 * 1000 };

	if (rdma_get_cm_event(h->ch, &e) ||
	    e->event != RDMA_CM_EVENT_ADDR_RESOLVED)
		fail("holder: no ADDR_RESOLVED: %s", strerror(errno));
	pthread_barrier_wait(&h->got);
	/* long enough for a destroy that does not wait to return first */
	nanosleep(&hold, NULL);
	h->acked = true;
	rdma_ack_cm_event(e);
	return NULL;
}

/*
 * An event another thread holds: rdma_destroy_id waits for its ack, as
 * the kernel's librdmacm does (DAPL's consumer destroys the id whose
 * event its CM thread is handling, then frees what the event points to).
 */
static void destroy_waits_for_ack(struct rdma_event_channel *c)
{
	struct holder h = { .ch = c };
	struct rdma_cm_id *id;
	struct sockaddr_in sin;
	pthread_t t;

	make_addr("127.0.0.1", "0", &sin);
	pthread_barrier_init(&h.got, NULL, 2);
	if (rdma_create_id(c, &id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 1000))
		fail("create, resolve: %s", strerror(errno));
	if (pthread_create(&t, NULL, hold_event, &h))
		fail("pthread_create: %s", strerror(errno));
	pthread_barrier_wait(&h.got);
	if (rdma_destroy_id(id))
		fail("rdma_destroy_id, the event held by another thread: %s",
		     strerror(errno));
	if (!h.acked)
		fail("rdma_destroy_id returned before the event was acked");
	pthread_join(t, NULL);
	pthread_barrier_destroy(&h.got);
}

/* Error paths of the API itself, in one process. */
static int api(void)
{
	struct rdma_event_channel *c2 = rdma_create_event_channel();
	struct rdma_cm_id *id, *id2;
	struct rdma_cm_event *e;
	struct sockaddr_in sin;

	if (!c2 || rdma_create_id(c2, &id, NULL, RDMA_PS_TCP))
		fail("create: %s", strerror(errno));
	/* a channel with ids on it is not destroyed */
	errno = 0;
	rdma_destroy_event_channel(c2);
	if (errno != EBUSY)
		fail("destroying a channel with ids: errno %s", strerror(errno));
	/* an event held unacknowledged keeps its id */
	make_addr("127.0.0.1", "0", &sin);
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 1000))
		fail("rdma_resolve_addr: %s", strerror(errno));
	if (rdma_get_cm_event(c2, &e) || e->event != RDMA_CM_EVENT_ADDR_RESOLVED)
		fail("no ADDR_RESOLVED: %s", strerror(errno));
	if (rdma_destroy_id(id) != -1 || errno != EBUSY)
		fail("rdma_destroy_id with an event held: %s", strerror(errno));
	rdma_ack_cm_event(e);
	if (rdma_destroy_id(id))
		fail("rdma_destroy_id: %s", strerror(errno));
	destroy_waits_for_ack(c2);
	rdma_destroy_event_channel(c2);
	/* non-blocking channel: EAGAIN, not a hang */
	if (rdma_create_id(ch, &id2, NULL, RDMA_PS_UDP))
		fail("create UDP id: %s", strerror(errno));
	{
		int fl = fcntl(ch->fd, F_GETFL);

		fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);
		if (rdma_get_cm_event(ch, &e) != -1 || errno != EAGAIN)
			fail("empty non-blocking channel: %s", strerror(errno));
		fcntl(ch->fd, F_SETFL, fl);
	}
	if (rdma_join_multicast(id2, (struct sockaddr *)&sin, NULL) != -1)
		fail("rdma_join_multicast %s", "succeeded");
	/* rsockets are stream sockets of IP (tests/rsocket) */
	if (rsocket(AF_UNIX, SOCK_STREAM, 0) != -1 || errno != ENOTSUP)
		fail("rsocket(AF_UNIX): %s", strerror(errno));
	if (strcmp(rdma_event_str(RDMA_CM_EVENT_REJECTED),
		   "RDMA_CM_EVENT_REJECTED"))
		fail("rdma_event_str: %s",
		     rdma_event_str(RDMA_CM_EVENT_REJECTED));
	rdma_destroy_id(id2);
	printf("PASS: API error paths\n");
	return 0;
}

static struct ibv_mr *msg_mr(void)
{
	static char buf[64];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf),
				       IBV_ACCESS_LOCAL_WRITE);

	if (!mr)
		fail("ibv_reg_mr: %s", strerror(errno));
	return mr;
}

static struct rdma_cm_event *expect_event(enum rdma_cm_event_type want,
					  int timeout_s)
{
	struct rdma_cm_event *e = next_event(timeout_s);

	if (e->event != want)
		fail("%s (status %d), wanted %s", rdma_event_str(e->event),
		     e->status, rdma_event_str(want));
	return e;
}

static struct ibv_wc poll_one(void)
{
	double end = now() + 10;
	struct ibv_wc wc;
	int n;

	while (!(n = ibv_poll_cq(cq, 1, &wc)) && now() < end)
		;
	if (n != 1 || wc.status != IBV_WC_SUCCESS)
		fail("poll: %d, status %s", n,
		     n == 1 ? ibv_wc_status_str(wc.status) : "-");
	return wc;
}

static int unpolled_server(const char *addr, const char *port)
{
	struct rdma_conn_param cp = { .responder_resources = 1,
				      .initiator_depth = 1,
				      .rnr_retry_count = 7 };
	struct rdma_cm_id *lid, *id;
	struct rdma_cm_event *e;
	struct sockaddr_in sin;
	struct ibv_recv_wr wr = { 0 }, *bad;
	struct ibv_sge sge;
	struct ibv_mr *mr;
	struct pollfd p;

	make_addr(addr, port, &sin);
	if (rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(lid, (struct sockaddr *)&sin) || rdma_listen(lid, 1))
		fail("listen: %s", strerror(errno));
	e = expect_event(RDMA_CM_EVENT_CONNECT_REQUEST, 60);
	id = e->id;
	rdma_ack_cm_event(e);
	make_qp(id);
	mr = msg_mr();
	sge = (struct ibv_sge){ .addr = (uintptr_t)mr->addr,
				.length = (uint32_t)mr->length,
				.lkey = mr->lkey };
	wr.sg_list = &sge;
	wr.num_sge = 1;
	if (ibv_post_recv(id->qp, &wr, &bad) || rdma_accept(id, &cp))
		fail("post_recv/accept: %s", strerror(errno));
	rdma_ack_cm_event(expect_event(RDMA_CM_EVENT_ESTABLISHED, 60));
	wait_line("drep", port, 60);
	p = (struct pollfd){ .fd = ch->fd, .events = POLLIN };
	if (poll(&p, 1, 0) != 0)
		fail("an event before the receive's completion was polled");
	if (poll_one().opcode != IBV_WC_RECV)
		fail("not the receive's completion");
	rdma_ack_cm_event(expect_event(RDMA_CM_EVENT_DISCONNECTED, 10));
	printf("PASS: DISCONNECTED once the receive was polled\n");
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_id(lid);
	return 0;
}

static int unpolled_client(const char *addr, const char *port)
{
	struct rdma_conn_param cp = { .responder_resources = 1,
				      .initiator_depth = 1,
				      .retry_count = 7,
				      .rnr_retry_count = 7 };
	struct rdma_cm_id *id;
	struct sockaddr_in sin;
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_sge sge;
	struct ibv_mr *mr;

	make_addr(addr, port, &sin);
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 2000))
		fail("resolve: %s", strerror(errno));
	rdma_ack_cm_event(expect_event(RDMA_CM_EVENT_ADDR_RESOLVED, 60));
	if (rdma_resolve_route(id, 2000))
		fail("rdma_resolve_route: %s", strerror(errno));
	rdma_ack_cm_event(expect_event(RDMA_CM_EVENT_ROUTE_RESOLVED, 60));
	make_qp(id);
	if (rdma_connect(id, &cp))
		fail("rdma_connect: %s", strerror(errno));
	rdma_ack_cm_event(expect_event(RDMA_CM_EVENT_ESTABLISHED, 60));
	mr = msg_mr();
	sge = (struct ibv_sge){ .addr = (uintptr_t)mr->addr,
				.length = 8,
				.lkey = mr->lkey };
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(id->qp, &wr, &bad))
		fail("post_send: %s", strerror(errno));
	if (poll_one().opcode != IBV_WC_SEND)
		fail("not the send's completion");
	if (rdma_disconnect(id))
		fail("rdma_disconnect: %s", strerror(errno));
	rdma_ack_cm_event(expect_event(RDMA_CM_EVENT_DISCONNECTED, 30));
	append_line("drep", port);
	printf("PASS: sent, disconnected\n");
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	ch = rdma_create_event_channel();
	if (!ch)
		fail("rdma_create_event_channel: %s", strerror(errno));
	if (argc >= 2 && !strcmp(argv[1], "api"))
		return api();
	if (argc < 5)
		fail("usage: see the top of %s", __FILE__);
	if (!strcmp(argv[4], "unpolled"))
		return !strcmp(argv[1], "server") ?
			       unpolled_server(argv[2], argv[3]) :
			       unpolled_client(argv[2], argv[3]);
	if (!strcmp(argv[1], "server"))
		return server(argv[2], argv[3], argc - 4, argv + 4);
	if (!strcmp(argv[1], "client"))
		return client(argv[2], argv[3], argc - 4, argv + 4);
	fail("unknown role %s", argv[1]);
	return 1;
}
