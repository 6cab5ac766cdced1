# SPDX-License-Identifier: MIT
"""A QP moved to RESET or destroyed takes its completions out of its CQs
(as mlx4 and mlx5 do), the other QPs' completions stay in order: a QP
recovered in place (ERR -> RESET -> INIT -> RTR -> RTS) polls no stale
WR_FLUSH_ERR, and a program that destroys a QP and then drains the CQ it
shares finds nothing whose wr_id points at what it freed with the QP."""

import unittest

import pyverbs.enums as e
from pyverbs.qp import QPAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr

import uroce_pv as u
from uroce_pv import PSN_A, PSN_B


class QPResetTest(u.VerbsTestCase):

    def to_err(self, qp):
        a = QPAttr()
        a.qp_state = e.IBV_QPS_ERR
        qp.modify(a, e.IBV_QP_STATE)

    def to_reset(self, qp):
        a = QPAttr()
        a.qp_state = e.IBV_QPS_RESET
        qp.modify(a, e.IBV_QP_STATE)

    def send_to(self, frm, wr_id, size=8):
        """frm sends one message and sees it acknowledged: the receiver's
        completion is in its CQ by then (it is pushed before the ACK)."""
        frm.mr.write(bytes([wr_id & 0xff]) * size, size)
        self.post_send(frm.qp, frm.mr, 0, size, wr_id=wr_id)
        wc, = u.poll_cq(frm.scq)
        self.assertWC(wc, wr_id=wr_id)

    def test_reset_cleans_shared_cq(self):
        a, b = self.pair()
        c, d = self.pair(a_kw=dict(rcq=a.rcq))     # c shares a's recv CQ
        self.post_recv(a.qp, a.mr, 0, 64, wr_id=11)
        self.post_recv(a.qp, a.mr, 64, 64, wr_id=12)
        self.post_recv(c.qp, c.mr, 0, 64, wr_id=21)
        self.post_recv(c.qp, c.mr, 64, 64, wr_id=22)
        self.send_to(d, 1)                          # c: 21
        self.to_err(a.qp)                           # a: 11, 12 flushed
        self.post_send(a.qp, a.mr, 0, 8, wr_id=13)  # a.scq: 13 flushed
        self.send_to(d, 2)                          # c: 22
        self.to_reset(a.qp)
        wcs = u.poll_cq(a.rcq, 2)
        self.assertEqual([(w.wr_id, w.qp_num) for w in wcs],
                         [(21, c.qpn), (22, c.qpn)])
        for w in wcs:
            self.assertWC(w, opcode=e.IBV_WC_RECV, byte_len=8)
        self.assertTrue(u.poll_empty(a.rcq), "a's flush errors stayed")
        self.assertTrue(u.poll_empty(a.scq), "a's send flush stayed")
        # Recovered in place: the first completions are the new work's.
        self.connect(a.qp, b.qpn, PSN_A, PSN_B)
        self.post_recv(b.qp, b.mr, 0, 64, wr_id=31)
        self.post_recv(a.qp, a.mr, 0, 64, wr_id=14)
        self.send_to(a, 3)
        wc, = u.poll_cq(b.rcq)
        self.assertWC(wc, wr_id=31, opcode=e.IBV_WC_RECV)
        self.send_to(b, 4)
        wc, = u.poll_cq(a.rcq)
        self.assertWC(wc, wr_id=14, opcode=e.IBV_WC_RECV)

    def test_reset_cleans_only_its_own_on_srq_cq(self):
        srq = SRQ(self.pd, SrqInitAttr(SrqAttr(max_wr=16, max_sge=1)))
        rmr = self.mr()
        rcq = self.cq()
        x_peer, x = self.pair(b_kw=dict(srq=srq, rcq=rcq))
        y_peer, y = self.pair(b_kw=dict(srq=srq, rcq=rcq))
        for i in range(4):
            self.post_recv(srq, rmr, 128 * i, 128, wr_id=100 + i)
        self.send_to(x_peer, 1)         # 100 by x
        self.send_to(y_peer, 2)         # 101 by y
        self.send_to(x_peer, 3)         # 102 by x
        self.to_err(x.qp)
        self.to_reset(x.qp)
        wc, = u.poll_cq(rcq)
        self.assertWC(wc, wr_id=101, opcode=e.IBV_WC_RECV)
        self.assertEqual(wc.qp_num, y.qpn)
        self.assertTrue(u.poll_empty(rcq), "x's completions stayed")
        # y goes on with the SRQ's next receive
        self.send_to(y_peer, 4)
        wc, = u.poll_cq(rcq)
        self.assertWC(wc, wr_id=103, opcode=e.IBV_WC_RECV)
        self.assertEqual(wc.qp_num, y.qpn)

    def test_destroy_cleans_shared_cq(self):
        a, b = self.pair()
        c, d = self.pair(a_kw=dict(rcq=a.rcq))     # c shares a's recv CQ
        self.post_recv(a.qp, a.mr, 0, 64, wr_id=11)
        self.post_recv(c.qp, c.mr, 0, 64, wr_id=21)
        self.post_recv(a.qp, a.mr, 64, 64, wr_id=12)
        self.send_to(b, 1)                          # a: 11, successful
        self.send_to(d, 2)                          # c: 21
        a.qp.close()                                # 12 never completes
        wc, = u.poll_cq(a.rcq)
        self.assertWC(wc, wr_id=21, opcode=e.IBV_WC_RECV, byte_len=8)
        self.assertEqual(wc.qp_num, c.qpn)
        self.assertTrue(u.poll_empty(a.rcq),
                        "the destroyed QP's completion stayed")


if __name__ == '__main__':
    unittest.main()
