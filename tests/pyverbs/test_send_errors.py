# SPDX-License-Identifier: MIT
"""Send errors on a real socket (issue 12): a UD send the kernel refuses
for good ends as rxe ends it (rxe_req.c: a send error other than EAGAIN is
IB_WC_LOC_QP_OP_ERR), not as a silent success; the QP moves to the error
state and what was posted after it is flushed.

The trigger: the IPv4 limited broadcast 255.255.255.255.  Our socket does
not set SO_BROADCAST, so sendmsg refuses it with EACCES on every host, with
or without a route, whether the packet leaves at once or in a UDP GSO
batch after ibv_post_send dropped the engine lock.  run_noroute.sh runs
the same tests in a network namespace with only lo, to an address with no
route (ENETUNREACH)."""

import ipaddress
import os
import unittest

import pyverbs.enums as e
from pyverbs.addr import AH, GID
from pyverbs.wr import SendWR

import uroce_pv as u

# run_noroute.sh sets it to an address with no route (ENETUNREACH)
REFUSED = os.environ.get('UROCE_TEST_REFUSED_IPV4', '255.255.255.255')


class SendErrorTest(u.VerbsTestCase):

    def setUp(self):
        super().setUp()
        if ipaddress.IPv6Address(str(self.gid.gid)).ipv4_mapped is None:
            raise unittest.SkipTest('the device is IPv6: no IPv4 broadcast')
        self.s = self.ud_qp()
        self.r = self.ud_qp()

    def refused_ah(self):
        # pyverbs takes a GID only as 8 groups of 4 hex digits
        ip = ipaddress.IPv6Address('::ffff:' + REFUSED).exploded
        gid = GID()
        gid.gid = ip
        return AH(self.pd, attr=u.ah_attr(gid))

    def test_ud_refused_destination(self):
        ah = self.refused_ah()
        self.post_send(self.s.qp, self.s.mr, 0, 64, wr_id=1,
                       ud=(ah, self.r.qpn, u.QKEY))
        self.post_send(self.s.qp, self.s.mr, 0, 64, wr_id=2,
                       ud=(self.ah(), self.r.qpn, u.QKEY))
        wc1, wc2 = u.poll_cq(self.s.scq, 2)
        self.assertWC(wc1, status=e.IBV_WC_LOC_QP_OP_ERR, wr_id=1)
        self.assertWC(wc2, status=e.IBV_WC_WR_FLUSH_ERR, wr_id=2)
        self.assertEqual(self.qp_state(self.s.qp), e.IBV_QPS_ERR)

    def test_ud_good_then_refused(self):
        # one post, in SQ order: the good one done, the refused one failed
        self.post_recv(self.r.qp, self.r.mr, 0, self.BUF, wr_id=9)
        bad = self.send_wr(self.s.mr, 0, 64, 2)
        bad.set_wr_ud(self.refused_ah(), self.r.qpn, u.QKEY)
        good = SendWR(wr_id=1, next_wr=bad, opcode=e.IBV_WR_SEND, num_sge=1,
                      sg=[self.sge(self.s.mr, 0, 64)],
                      send_flags=e.IBV_SEND_SIGNALED)
        good.set_wr_ud(self.ah(), self.r.qpn, u.QKEY)
        self.s.qp.post_send(good)
        wc1, wc2 = u.poll_cq(self.s.scq, 2)
        self.assertWC(wc1, wr_id=1, opcode=e.IBV_WC_SEND)
        self.assertWC(wc2, status=e.IBV_WC_LOC_QP_OP_ERR, wr_id=2)
        wc, = u.poll_cq(self.r.rcq)
        self.assertWC(wc, wr_id=9, opcode=e.IBV_WC_RECV,
                      byte_len=u.GRH_SIZE + 64)


if __name__ == '__main__':
    unittest.main()
