# SPDX-License-Identifier: MIT
"""SRQ: shared receives, query/modify, the limit event and LAST_WQE_REACHED."""

import errno
import unittest

import pyverbs.enums as e
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr, SrqInitAttrEx

import uroce_pv as u


class SRQTest(u.VerbsTestCase):

    def setUp(self):
        super().setUp()
        self.srq = SRQ(self.pd, SrqInitAttr(SrqAttr(max_wr=16, max_sge=1)))
        self.rmr = self.mr()

    def rc_into_srq(self):
        """a (plain RC) -> b (RC on the SRQ)."""
        return self.pair(b_kw=dict(srq=self.srq))

    def post_srq(self, n, first=0):
        for i in range(first, first + n):
            self.post_recv(self.srq, self.rmr, 128 * i, 128, wr_id=1000 + i)

    def send_n(self, a, n, size=16):
        for i in range(n):
            a.mr.write(bytes([i + 1]) * size, size)
            self.post_send(a.qp, a.mr, 0, size, wr_id=i)
            wc, = u.poll_cq(a.scq)
            self.assertWC(wc, wr_id=i)

    def test_query_srq(self):
        attr = self.srq.query()
        self.assertGreaterEqual(attr.max_wr, 16)
        self.assertGreaterEqual(attr.max_sge, 1)
        self.assertEqual(attr.srq_limit, 0)
        self.srq.modify(SrqAttr(srq_limit=5), e.IBV_SRQ_LIMIT)
        self.assertEqual(self.srq.query().srq_limit, 5)

    def test_srq_limit_above_max_wr_rejected(self):
        max_wr = self.srq.query().max_wr
        self.assertRDMAError(errno.EINVAL, self.srq.modify,
                             SrqAttr(srq_limit=max_wr + 1), e.IBV_SRQ_LIMIT)

    def test_shared_receives_in_order(self):
        a1, b1 = self.rc_into_srq()
        a2, b2 = self.rc_into_srq()
        self.post_srq(4)
        for i, (a, b) in enumerate(((a1, b1), (a2, b2), (a1, b1), (a2, b2))):
            data = u.pattern(100, seed=i)
            a.mr.write(data, 100)
            self.post_send(a.qp, a.mr, 0, 100, wr_id=i)
            u.poll_cq(a.scq)
            wc, = u.poll_cq(b.rcq)
            self.assertWC(wc, wr_id=1000 + i, opcode=e.IBV_WC_RECV,
                          byte_len=100)
            self.assertEqual(wc.qp_num, b.qpn)
            self.assertEqual(self.read(self.rmr, 100, 128 * i), data)

    def test_srq_limit_event(self):
        a, b = self.rc_into_srq()
        self.post_srq(10)
        self.srq.modify(SrqAttr(srq_limit=8), e.IBV_SRQ_LIMIT)
        self.send_n(a, 2)                      # 8 left: not below the limit
        u.poll_cq(b.rcq, 2)
        self.assertFalse(self.events.pending(), 'limit event too early')
        self.send_n(a, 1)                      # 7 left: below
        u.poll_cq(b.rcq, 1)
        self.events.wait_for(e.IBV_EVENT_SRQ_LIMIT_REACHED, obj=self.srq)
        # The limit disarms itself once it fires.
        self.assertEqual(self.srq.query().srq_limit, 0)
        self.send_n(a, 3)
        wcs = u.poll_cq(b.rcq, 3)
        self.assertEqual([w.wr_id for w in wcs], [1003, 1004, 1005])
        self.assertFalse(self.events.pending(), 'limit event fired twice')
        # Re-armed: fires again when the count falls below it again.
        self.srq.modify(SrqAttr(srq_limit=4), e.IBV_SRQ_LIMIT)
        self.send_n(a, 1)                      # 3 left
        u.poll_cq(b.rcq, 1)
        self.events.wait_for(e.IBV_EVENT_SRQ_LIMIT_REACHED, obj=self.srq)

    def test_last_wqe_reached(self):
        a, b = self.rc_into_srq()
        self.post_srq(2)
        attr = u.QPAttr()
        attr.qp_state = e.IBV_QPS_ERR
        b.qp.modify(attr, e.IBV_QP_STATE)
        self.events.wait_for(e.IBV_EVENT_QP_LAST_WQE_REACHED, qp=b.qp)
        # The SRQ's WQEs belong to the SRQ: not flushed by b going to ERR.
        a2, b2 = self.rc_into_srq()
        self.send_n(a2, 1)
        wc, = u.poll_cq(b2.rcq)
        self.assertWC(wc, wr_id=1000)

    def test_create_srq_ex(self):
        attr = SrqInitAttrEx(max_wr=8, max_sge=1)
        attr.srq_type = e.IBV_SRQT_BASIC
        attr.pd = self.pd
        attr.comp_mask = e.IBV_SRQ_INIT_ATTR_TYPE | e.IBV_SRQ_INIT_ATTR_PD
        srq = SRQ(self.ctx, attr)
        self.assertGreaterEqual(srq.query().max_wr, 8)
        self.srq = srq
        a, b = self.rc_into_srq()
        self.post_srq(1)
        a.mr.write(b'srq-ex', 6)
        self.post_send(a.qp, a.mr, 0, 6)
        u.poll_cq(a.scq)
        wc, = u.poll_cq(b.rcq)
        self.assertWC(wc, wr_id=1000, byte_len=6)
        self.assertEqual(self.read(self.rmr, 6), b'srq-ex')

    def test_srq_overflow_post_fails(self):
        max_wr = self.srq.query().max_wr
        self.post_srq(max_wr)
        with self.assertRaises(u.PyverbsRDMAError) as cm:
            self.post_recv(self.srq, self.rmr, 0, 16, wr_id=1)
        self.assertEqual(cm.exception.error_code, errno.ENOMEM)


if __name__ == '__main__':
    unittest.main()
