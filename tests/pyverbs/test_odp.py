# SPDX-License-Identifier: MIT
"""Explicit on-demand paging: MRs registered with IBV_ACCESS_ON_DEMAND carry
SEND, WRITE and READ; ibv_advise_mr checks its SGEs; implicit ODP is not
offered."""

import errno

import pyverbs.enums as e
from pyverbs.mr import MR
from pyverbs.pyverbs_error import PyverbsRDMAError

import uroce_pv as u

ODP = e.IBV_ACCESS_ON_DEMAND
LOCAL = e.IBV_ACCESS_LOCAL_WRITE | ODP
REMOTE = LOCAL | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ


class ODPTest(u.VerbsTestCase):

    def test_send_write_read_on_odp_mrs(self):
        a, b = self.pair(a_kw=dict(access=LOCAL), b_kw=dict(access=REMOTE))
        a.mr.write(b'S' * 100, 100)
        self.post_recv(b.qp, b.mr, 0, 100, wr_id=9)
        self.post_send(a.qp, a.mr, 0, 100, wr_id=1)
        wc, = u.poll_cq(b.rcq)
        self.assertWC(wc, wr_id=9, byte_len=100)
        self.assertEqual(self.read(b.mr, 100), b'S' * 100)
        a.mr.write(b'W' * 64, 64)
        b.mr.write(b'R' * 2000, 2000)
        self.post_send(a.qp, a.mr, 0, 64, wr_id=2,
                       opcode=e.IBV_WR_RDMA_WRITE, rkey=b.mr.rkey,
                       raddr=b.mr.buf + 3000)
        self.post_send(a.qp, a.mr, 2000, 32, wr_id=3,
                       opcode=e.IBV_WR_RDMA_READ, rkey=b.mr.rkey,
                       raddr=b.mr.buf)
        wcs = u.poll_cq(a.scq, 3)
        for wc, wr_id in zip(wcs, (1, 2, 3)):
            self.assertWC(wc, wr_id=wr_id)
        self.assertEqual(self.read(b.mr, 64, 3000), b'W' * 64)
        self.assertEqual(self.read(a.mr, 32, 2000), b'R' * 32)

    def advise(self, mr, advice=e._IBV_ADVISE_MR_ADVICE_PREFETCH, flags=0,
               offset=0, length=64):
        self.pd.advise_mr(advice, flags, [self.sge(mr, offset, length)])

    def assertErrno(self, err, fn, *args, **kw):
        with self.assertRaises(PyverbsRDMAError) as cm:
            fn(*args, **kw)
        self.assertEqual(cm.exception.error_code, err, str(cm.exception))

    def test_advise_mr(self):
        odp = self.mr(access=LOCAL)
        self.advise(odp)
        self.advise(odp, e._IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
                    e._IBV_ADVISE_MR_FLAG_FLUSH)
        self.advise(odp, e._IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
        # not an ODP MR, past its end, a write prefetch of a read-only MR
        self.assertErrno(errno.EINVAL, self.advise, self.mr())
        self.assertErrno(errno.EINVAL, self.advise, odp,
                         offset=self.BUF - 32)
        ro = self.mr(access=ODP)
        self.assertErrno(errno.EINVAL, self.advise, ro,
                         e._IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE)
        self.assertErrno(errno.EINVAL, self.advise, odp, 7)
        self.assertErrno(errno.EOPNOTSUPP, self.advise, odp, flags=2)

    def test_implicit_odp_refused(self):
        # (pyverbs registers NULL, SIZE_MAX for implicit=True)
        self.assertErrno(errno.EINVAL, MR, self.pd, 0, LOCAL,
                         implicit=True)
