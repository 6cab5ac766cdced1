// SPDX-License-Identifier: MIT
/*
 * mc_probe ADDR: the multicast API of our librdmacm, in one process bound
 * to ADDR: what joins and leaves must refuse (with which errno), the
 * MULTICAST_JOIN event's contents, and that a join attaches the id's QP
 * (an attached QP cannot be destroyed: EBUSY) unless it is send-only
 * (then detaching says EINVAL: not attached).
 * Prints PASS and exits 0, or says what failed and exits 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>

static int failed;

#define CHECK(cond, ...) \
	do { \
		if (!(cond)) { \
			printf("FAIL line %d: ", __LINE__); \
			printf(__VA_ARGS__); \
			printf("\n"); \
			failed = 1; \
		} \
	} while (0)

/* call must fail with errno err */
#define EXPECT_ERRNO(call, err) \
	do { \
		errno = 0; \
		int r_ = (call); \
		CHECK(r_ == -1 && errno == (err), \
		      "%s: ret %d errno %d (%s), " \
		      "expected %d", \
		      #call, r_, errno, strerror(errno), (err)); \
	} while (0)

static struct sockaddr_in sin_of(const char *ip)
{
	struct sockaddr_in s;

	memset(&s, 0, sizeof(s));
	s.sin_family = AF_INET;
	if (inet_pton(AF_INET, ip, &s.sin_addr) != 1) {
		printf("bad address %s\n", ip);
		exit(2);
	}
	return s;
}

static struct rdma_cm_event *next_event(struct rdma_event_channel *ch,
					enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ch, &ev)) {
		printf("FAIL: rdma_get_cm_event: %s\n", strerror(errno));
		exit(1);
	}
	CHECK(ev->event == want, "event %s, expected %s",
	      rdma_event_str(ev->event), rdma_event_str(want));
	return ev;
}

int main(int argc, char **argv)
{
	struct sockaddr_in me, grp = sin_of("239.78.0.9"),
			       grp2 = sin_of("239.78.0.10");
	struct rdma_cm_join_mc_attr_ex ex;
	struct ibv_qp_init_attr qa;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *ud, *tcp;
	struct rdma_cm_event *ev;
	union ibv_gid mgid = {
		.raw = { [10] = 0xff, [11] = 0xff, 239, 78, 0, 9 }
	};
	int ctx_token;

	if (argc != 2) {
		printf("usage: mc_probe ADDR\n");
		return 2;
	}
	me = sin_of(argv[1]);
	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &ud, NULL, RDMA_PS_UDP) ||
	    rdma_create_id(ch, &tcp, NULL, RDMA_PS_TCP)) {
		printf("FAIL: cannot create ids: %s\n", strerror(errno));
		return 1;
	}

	/* before bind or resolve_addr: the kernel says EINVAL */
	EXPECT_ERRNO(rdma_join_multicast(ud, (struct sockaddr *)&grp, NULL),
		     EINVAL);
	if (rdma_bind_addr(ud, (struct sockaddr *)&me)) {
		printf("FAIL: rdma_bind_addr %s: %s\n", argv[1],
		       strerror(errno));
		return 1;
	}
	/* not a group; a TCP id; bad join_ex attributes; nothing to leave */
	EXPECT_ERRNO(rdma_join_multicast(ud, (struct sockaddr *)&me, NULL),
		     EINVAL);
	me.sin_port = 0;
	CHECK(!rdma_bind_addr(tcp, (struct sockaddr *)&me), "bind tcp id");
	EXPECT_ERRNO(rdma_join_multicast(tcp, (struct sockaddr *)&grp, NULL),
		     EINVAL);
	memset(&ex, 0, sizeof(ex));
	ex.addr = (struct sockaddr *)&grp;
	EXPECT_ERRNO(rdma_join_multicast_ex(ud, &ex, NULL), EINVAL);
	ex.comp_mask = RDMA_CM_JOIN_MC_ATTR_RESERVED;
	EXPECT_ERRNO(rdma_join_multicast_ex(ud, &ex, NULL), ENOTSUP);
	ex.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS |
		       RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	ex.join_flags = RDMA_MC_JOIN_FLAG_RESERVED;
	EXPECT_ERRNO(rdma_join_multicast_ex(ud, &ex, NULL), EINVAL);
	EXPECT_ERRNO(rdma_leave_multicast(ud, (struct sockaddr *)&grp),
		     EADDRNOTAVAIL);

	/* a join with a QP: the event, and the QP attached */
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_UD;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(ud, NULL, &qa)) {
		printf("FAIL: rdma_create_qp: %s\n", strerror(errno));
		return 1;
	}
	CHECK(!rdma_join_multicast(ud, (struct sockaddr *)&grp, &ctx_token),
	      "join: %s", strerror(errno));
	ev = next_event(ch, RDMA_CM_EVENT_MULTICAST_JOIN);
	CHECK(ev->status == 0, "status %d", ev->status);
	CHECK(ev->id == ud, "event for another id");
	CHECK(ev->param.ud.private_data == &ctx_token,
	      "private_data is not the join's context");
	CHECK(ev->param.ud.qp_num == 0xffffff, "qp_num %#x",
	      ev->param.ud.qp_num);
	CHECK(ev->param.ud.qkey == RDMA_UDP_QKEY, "qkey %#x", ev->param.ud.qkey);
	CHECK(ev->param.ud.ah_attr.is_global, "AH not global");
	CHECK(!memcmp(ev->param.ud.ah_attr.grh.dgid.raw, mgid.raw, 16),
	      "dgid is not ::ffff:239.78.0.9");
	rdma_ack_cm_event(ev);
	EXPECT_ERRNO(rdma_join_multicast(ud, (struct sockaddr *)&grp, NULL),
		     EADDRINUSE);
	CHECK(ibv_destroy_qp(ud->qp) == EBUSY,
	      "the joined id's QP is not attached (destroy did not say EBUSY)");
	CHECK(!rdma_leave_multicast(ud, (struct sockaddr *)&grp), "leave: %s",
	      strerror(errno));
	EXPECT_ERRNO(rdma_leave_multicast(ud, (struct sockaddr *)&grp),
		     EADDRNOTAVAIL);

	/* send-only: the event, but no attach */
	ex.addr = (struct sockaddr *)&grp2;
	ex.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
	CHECK(!rdma_join_multicast_ex(ud, &ex, NULL), "send-only join: %s",
	      strerror(errno));
	ev = next_event(ch, RDMA_CM_EVENT_MULTICAST_JOIN);
	rdma_ack_cm_event(ev);
	mgid.raw[15] = 10;
	CHECK(ibv_detach_mcast(ud->qp, &mgid, 0) == EINVAL,
	      "a send-only join attached the QP");
	rdma_destroy_qp(ud);

	/* destroying an id that still has a group leaves it */
	CHECK(!rdma_destroy_id(ud), "destroy id: %s", strerror(errno));
	rdma_destroy_id(tcp);
	rdma_destroy_event_channel(ch);
	if (failed)
		return 1;
	printf("PASS: multicast API\n");
	return 0;
}
