# SPDX-License-Identifier: MIT
"""UC: SEND, SEND_WITH_IMM, RDMA WRITE and WRITE_WITH_IMM between two UC QPs."""

import unittest

import pyverbs.enums as e

import uroce_pv as u

UC_ACCESS = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE


class UCTest(u.VerbsTestCase):

    def setUp(self):
        super().setUp()
        self.a, self.b = self.pair(
            e.IBV_QPT_UC, a_kw=dict(access=UC_ACCESS),
            b_kw=dict(access=UC_ACCESS),
            conn_a=dict(access=UC_ACCESS), conn_b=dict(access=UC_ACCESS))

    def test_qp_type_and_state(self):
        attr, init = self.a.qp.query(e.IBV_QP_STATE | e.IBV_QP_DEST_QPN)
        self.assertEqual(init.qp_type, e.IBV_QPT_UC)
        self.assertEqual(attr.qp_state, e.IBV_QPS_RTS)
        self.assertEqual(attr.dest_qp_num, self.b.qpn)

    def test_send_recv(self):
        for i, n in enumerate((1, 100, 1024, 3000)):   # 3000: several MTUs
            data = u.pattern(n, seed=i)
            self.a.mr.write(data, n)
            self.post_recv(self.b.qp, self.b.mr, 0, self.BUF, wr_id=100 + i)
            self.post_send(self.a.qp, self.a.mr, 0, n, wr_id=i)
            wc, = u.poll_cq(self.a.scq)
            self.assertWC(wc, wr_id=i, opcode=e.IBV_WC_SEND)
            wc, = u.poll_cq(self.b.rcq)
            self.assertWC(wc, wr_id=100 + i, opcode=e.IBV_WC_RECV, byte_len=n)
            self.assertEqual(self.read(self.b.mr, n), data)

    def test_send_with_imm(self):
        self.a.mr.write(b'imm!', 4)
        self.post_recv(self.b.qp, self.b.mr, 0, 64, wr_id=9)
        self.post_send(self.a.qp, self.a.mr, 0, 4, opcode=e.IBV_WR_SEND_WITH_IMM,
                       imm=0xdeadbeef)
        u.poll_cq(self.a.scq)
        wc, = u.poll_cq(self.b.rcq)
        self.assertWC(wc, wr_id=9, opcode=e.IBV_WC_RECV, byte_len=4)
        self.assertTrue(wc.wc_flags & e.IBV_WC_WITH_IMM)
        self.assertEqual(wc.imm_data, 0xdeadbeef)

    def test_rdma_write(self):
        data = u.pattern(2500, seed=4)
        self.a.mr.write(data, len(data))
        self.post_send(self.a.qp, self.a.mr, 0, len(data), wr_id=1,
                       opcode=e.IBV_WR_RDMA_WRITE, rkey=self.b.mr.rkey,
                       raddr=self.b.mr.buf + 100)
        wc, = u.poll_cq(self.a.scq)
        self.assertWC(wc, wr_id=1, opcode=e.IBV_WC_RDMA_WRITE)
        # UC WRITE without immediate: nothing on the responder's CQ; the
        # completion is local only, so fence with a SEND to see the data.
        self.post_recv(self.b.qp, self.b.mr, 3000, 16, wr_id=2)
        self.post_send(self.a.qp, self.a.mr, 0, 1, wr_id=3)
        u.poll_cq(self.a.scq)
        wc, = u.poll_cq(self.b.rcq)
        self.assertWC(wc, wr_id=2)
        self.assertEqual(self.read(self.b.mr, len(data), 100), data)

    def test_rdma_write_with_imm(self):
        data = u.pattern(700, seed=8)
        self.a.mr.write(data, len(data))
        self.post_recv(self.b.qp, self.b.mr, 0, 0, wr_id=5)
        self.post_send(self.a.qp, self.a.mr, 0, len(data), wr_id=1,
                       opcode=e.IBV_WR_RDMA_WRITE_WITH_IMM, imm=0x11223344,
                       rkey=self.b.mr.rkey, raddr=self.b.mr.buf + 8)
        u.poll_cq(self.a.scq)
        wc, = u.poll_cq(self.b.rcq)
        self.assertWC(wc, wr_id=5, opcode=e.IBV_WC_RECV_RDMA_WITH_IMM,
                      byte_len=len(data))
        self.assertEqual(wc.imm_data, 0x11223344)
        self.assertEqual(self.read(self.b.mr, len(data), 8), data)

    def test_rdma_read_rejected(self):
        # UC has no RDMA READ (IBA 9.2 / table 38): post_send must refuse it,
        # or complete it with an error -- never do it.
        wr = self.send_wr(self.a.mr, 0, 16, wr_id=1, opcode=e.IBV_WR_RDMA_READ)
        wr.set_wr_rdma(self.b.mr.rkey, self.b.mr.buf)
        try:
            self.a.qp.post_send(wr)
        except u.PyverbsRDMAError as ex:
            self.assertIn(ex.error_code, (22, 95))       # EINVAL, EOPNOTSUPP
            return
        wc, = u.poll_cq(self.a.scq)
        self.assertNotEqual(wc.status, e.IBV_WC_SUCCESS)


if __name__ == '__main__':
    unittest.main()
