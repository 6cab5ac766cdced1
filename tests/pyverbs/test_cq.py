# SPDX-License-Identifier: MIT
"""CQ resize, and a CQ overrun raising IBV_EVENT_CQ_ERR."""

import unittest

import pyverbs.enums as e

import uroce_pv as u
from uroce_pv import GRH_SIZE, QKEY


class CQTest(u.VerbsTestCase):

    def ud_pair(self, rcq):
        r = self.ud_qp(ep_kw=dict(rcq=rcq, max_recv_wr=256))
        s = self.ud_qp(ep_kw=dict(max_send_wr=256))
        return s, r

    def send_ud(self, s, r, ah, n, first=0):
        for i in range(first, first + n):
            s.mr.write(i.to_bytes(4, 'little'), 4)
            self.post_send(s.qp, s.mr, 0, 4, wr_id=i, ud=(ah, r.qpn, QKEY))
            wc, = u.poll_cq(s.scq)
            self.assertWC(wc, wr_id=i)

    def fence(self, s, ah):
        """Send to another QP and wait for it: everything s sent before has
        been received (one socket, in order)."""
        f = self.ud_qp()
        self.post_recv(f.qp, f.mr, 0, 128, wr_id=77)
        self.post_send(s.qp, s.mr, 0, 4, wr_id=77, ud=(ah, f.qpn, QKEY))
        u.poll_cq(s.scq)
        wc, = u.poll_cq(f.rcq)
        self.assertWC(wc, wr_id=77)

    def test_resize_keeps_completions(self):
        rcq = self.cq(4)
        self.assertGreaterEqual(rcq.cqe, 4)
        s, r = self.ud_pair(rcq)
        ah = self.ah()
        for i in range(200):
            self.post_recv(r.qp, r.mr, (i % 64) * 64, 64, wr_id=i)
        self.send_ud(s, r, ah, 3)
        self.fence(s, ah)          # all three are in rcq now
        rcq.resize(100)
        self.assertGreaterEqual(rcq.cqe, 100)
        wcs = u.poll_cq(rcq, 3)
        self.assertEqual([w.wr_id for w in wcs], [0, 1, 2])
        # The bigger CQ holds 90 completions without polling.
        self.send_ud(s, r, ah, 90, first=3)
        wcs = u.poll_cq(rcq, 90)
        self.assertEqual([w.wr_id for w in wcs], list(range(3, 93)))
        for w in wcs:
            self.assertWC(w, opcode=e.IBV_WC_RECV, byte_len=GRH_SIZE + 4)
        self.assertFalse(self.events.pending(), 'unexpected async event')
        # Shrink again, to a size that still holds what is queued (nothing).
        rcq.resize(8)
        self.assertGreaterEqual(rcq.cqe, 8)
        self.send_ud(s, r, ah, 5, first=93)
        wcs = u.poll_cq(rcq, 5)
        self.assertEqual([w.wr_id for w in wcs], list(range(93, 98)))
        for w in wcs:
            n = int.from_bytes(self.read(r.mr, 4, (w.wr_id % 64) * 64 +
                                         GRH_SIZE), 'little')
            self.assertEqual(n, w.wr_id)

    def test_resize_with_queued_completions(self):
        rcq = self.cq(16)
        s, r = self.ud_pair(rcq)
        ah = self.ah()
        for i in range(10):
            self.post_recv(r.qp, r.mr, i * 64, 64, wr_id=i)
        self.send_ud(s, r, ah, 6)
        self.fence(s, ah)
        first = u.poll_cq(rcq, 1)               # one polled, five queued
        got = [w.wr_id for w in first]
        rcq.resize(200)
        got += [w.wr_id for w in u.poll_cq(rcq, 5)]
        self.assertEqual(got, list(range(6)))

    def test_overrun_raises_cq_err(self):
        rcq = self.cq(4)
        cap = rcq.cqe
        s, r = self.ud_pair(rcq)
        ah = self.ah()
        n = cap + 3
        for i in range(n):
            self.post_recv(r.qp, r.mr, (i % 64) * 64, 64, wr_id=i)
        self.send_ud(s, r, ah, n)
        self.fence(s, ah)
        self.events.wait_for(e.IBV_EVENT_CQ_ERR, obj=rcq)
        # Completions were not silently overwritten: whatever can still be
        # polled is the oldest ones, in order (or the CQ reports an error).
        try:
            got, wcs = rcq.poll(n)
        except u.PyverbsRDMAError:
            return
        ids = [w.wr_id for w in wcs[:got]]
        self.assertLessEqual(got, cap)
        self.assertEqual(ids, list(range(got)),
                         'completions overwritten or reordered on overrun')

    def test_no_cq_err_when_polled_in_time(self):
        rcq = self.cq(4)
        cap = rcq.cqe
        s, r = self.ud_pair(rcq)
        ah = self.ah()
        for i in range(3 * cap):
            self.post_recv(r.qp, r.mr, (i % 64) * 64, 64, wr_id=i)
        for i in range(3 * cap):
            self.send_ud(s, r, ah, 1, first=i)
            wc, = u.poll_cq(rcq)
            self.assertWC(wc, wr_id=i)
        self.assertFalse(self.events.pending())


if __name__ == '__main__':
    unittest.main()
