# SPDX-License-Identifier: MIT
"""Affiliated async events: COMM_EST, QP_ACCESS_ERR, QP_REQ_ERR, QP_FATAL,
SQ_DRAINED (events of SRQs and CQs: test_srq.py, test_cq.py)."""

import unittest

import pyverbs.enums as e
from pyverbs.qp import QPAttr

import uroce_pv as u

REMOTE = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | \
    e.IBV_ACCESS_REMOTE_READ


class AsyncEventTest(u.VerbsTestCase):

    def send_recv(self, a, b, data, wr_id):
        a.mr.write(data, len(data))
        self.post_recv(b.qp, b.mr, 0, 256, wr_id=wr_id)
        self.post_send(a.qp, a.mr, 0, len(data), wr_id=wr_id)
        wc, = u.poll_cq(a.scq)
        self.assertWC(wc, wr_id=wr_id)
        wc, = u.poll_cq(b.rcq)
        self.assertWC(wc, wr_id=wr_id, byte_len=len(data))
        self.assertEqual(self.read(b.mr, len(data)), data)

    def test_comm_est_on_rtr_qp(self):
        a, b = self.pair(conn_b=dict(to_rts=False))
        self.assertEqual(self.qp_state(b.qp), e.IBV_QPS_RTR)
        self.send_recv(a, b, b'first', 1)
        self.events.wait_for(e.IBV_EVENT_COMM_EST, qp=b.qp)
        # Only the first packet establishes communication.
        self.send_recv(a, b, b'second', 2)
        self.assertFalse(self.events.pending(), 'COMM_EST twice')
        # b still RTR: its consumer moves it to RTS, and it can send.
        a_attr = QPAttr()
        a_attr.qp_state = e.IBV_QPS_RTS
        a_attr.sq_psn = u.PSN_B
        a_attr.timeout, a_attr.retry_cnt, a_attr.rnr_retry = 14, 7, 7
        a_attr.max_rd_atomic = 1
        b.qp.modify(a_attr, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN |
                    e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT |
                    e.IBV_QP_RNR_RETRY | e.IBV_QP_MAX_QP_RD_ATOMIC)
        self.send_recv(b, a, b'back', 3)

    def test_no_events_on_healthy_traffic(self):
        a, b = self.pair()
        for i in range(5):
            self.send_recv(a, b, u.pattern(50, i), i)
            self.send_recv(b, a, u.pattern(50, i + 9), i)
        self.assertFalse(self.events.pending(),
                         'unexpected async event(s)')

    def test_qp_access_err_on_responder(self):
        a, b = self.pair(b_kw=dict(access=REMOTE))
        self.post_send(a.qp, a.mr, 0, 32, wr_id=1, opcode=e.IBV_WR_RDMA_WRITE,
                       rkey=b.mr.rkey ^ 0x00ff0000, raddr=b.mr.buf)
        wc, = u.poll_cq(a.scq)
        self.assertWC(wc, e.IBV_WC_REM_ACCESS_ERR, wr_id=1)
        self.events.wait_for(e.IBV_EVENT_QP_ACCESS_ERR, qp=b.qp)
        self.assertEqual(self.qp_state(b.qp), e.IBV_QPS_ERR)

    def test_qp_req_err_on_responder(self):
        a, b = self.pair(b_kw=dict(access=REMOTE),
                         conn_b=dict(access=e.IBV_ACCESS_LOCAL_WRITE))
        self.post_send(a.qp, a.mr, 0, 32, wr_id=1, opcode=e.IBV_WR_RDMA_WRITE,
                       rkey=b.mr.rkey, raddr=b.mr.buf)
        wc, = u.poll_cq(a.scq)
        self.assertWC(wc, e.IBV_WC_REM_INV_REQ_ERR, wr_id=1)
        self.events.wait_for(e.IBV_EVENT_QP_REQ_ERR, qp=b.qp)
        self.assertEqual(self.qp_state(b.qp), e.IBV_QPS_ERR)

    def test_qp_fatal_on_responder(self):
        # The receive WQE names an lkey that does not exist: the responder
        # cannot place the SEND (remote operational error, IBA 9.7.5.2.4).
        a, b = self.pair()
        bad = u.RecvWR(wr_id=5, num_sge=1,
                       sg=[u.SGE(b.mr.buf, 64, b.mr.lkey ^ 0x0f0f0000)])
        b.qp.post_recv(bad)
        self.post_send(a.qp, a.mr, 0, 16, wr_id=1)
        wc, = u.poll_cq(a.scq)
        self.assertWC(wc, e.IBV_WC_REM_OP_ERR, wr_id=1)
        self.events.wait_for(e.IBV_EVENT_QP_FATAL, qp=b.qp)
        wc, = u.poll_cq(b.rcq)
        self.assertEqual(wc.wr_id, 5)
        self.assertNotEqual(wc.status, e.IBV_WC_SUCCESS)

    def test_sq_drained(self):
        a, b = self.pair()
        for i in range(4):
            self.post_recv(b.qp, b.mr, 64 * i, 64, wr_id=i)
        for i in range(4):
            self.post_send(a.qp, a.mr, 0, 64, wr_id=i)
        attr = QPAttr()
        attr.qp_state = e.IBV_QPS_SQD
        attr.en_sqd_async_notify = 1
        a.qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_EN_SQD_ASYNC_NOTIFY)
        self.events.wait_for(e.IBV_EVENT_SQ_DRAINED, qp=a.qp)
        # Drained: every WR posted before SQD has completed, successfully.
        wcs = u.poll_cq(a.scq, 4)
        self.assertEqual([w.wr_id for w in wcs], [0, 1, 2, 3])
        for w in wcs:
            self.assertWC(w)
        self.assertEqual(len(u.poll_cq(b.rcq, 4)), 4)
        self.assertEqual(self.qp_state(a.qp), e.IBV_QPS_SQD)
        # SQD -> RTS, and the QP works again.
        attr = QPAttr()
        attr.qp_state = e.IBV_QPS_RTS
        a.qp.modify(attr, e.IBV_QP_STATE)
        self.send_recv(a, b, b'after SQD', 9)

    def test_sqd_without_notify_no_event(self):
        a, b = self.pair()
        attr = QPAttr()
        attr.qp_state = e.IBV_QPS_SQD
        attr.en_sqd_async_notify = 0
        a.qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_EN_SQD_ASYNC_NOTIFY)
        # A fence: traffic on another pair completes, so the device has run.
        c, d = self.pair()
        self.send_recv(c, d, b'fence', 1)
        self.assertFalse(self.events.pending(), 'SQ_DRAINED without notify')


if __name__ == '__main__':
    unittest.main()
