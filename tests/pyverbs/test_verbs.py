# SPDX-License-Identifier: MIT
"""Control-path verbs: modify_qp attribute checks, posting in the wrong
state, query_qp round trip, query_device_ex, fork support, ECE."""

import errno
import os
import subprocess
import sys
import unittest

import pyverbs.enums as e
from pyverbs.qp import ECE, QPAttr

import uroce_pv as u

RC_ACCESS = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | \
    e.IBV_ACCESS_REMOTE_READ


class ModifyQPTest(u.VerbsTestCase):

    def setUp(self):
        super().setUp()
        self.cq_ = self.cq()
        self.rc = self.qp(e.IBV_QPT_RC, self.cq_, self.cq_)

    def init_attr(self):
        a = QPAttr(port_num=u.PORT)
        a.qp_state = e.IBV_QPS_INIT
        a.pkey_index = 0
        a.qp_access_flags = RC_ACCESS
        return a

    def rtr_attr(self):
        a = QPAttr(port_num=u.PORT)
        a.qp_state = e.IBV_QPS_RTR
        a.path_mtu = e.IBV_MTU_1024
        a.dest_qp_num = self.rc.qp_num
        a.rq_psn = 5
        a.max_dest_rd_atomic = 1
        a.min_rnr_timer = 12
        a.ah_attr = u.ah_attr(self.gid)
        return a

    RTR_MASK = (e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU |
                e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN |
                e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
    RTS_MASK = (e.IBV_QP_STATE | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT |
                e.IBV_QP_RNR_RETRY | e.IBV_QP_SQ_PSN |
                e.IBV_QP_MAX_QP_RD_ATOMIC)
    INIT_MASK = (e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT |
                 e.IBV_QP_ACCESS_FLAGS)

    def test_reset_to_init_missing_attrs(self):
        for missing in (e.IBV_QP_PORT, e.IBV_QP_ACCESS_FLAGS,
                        e.IBV_QP_PKEY_INDEX):
            with self.subTest(missing=missing):
                self.assertRDMAError(errno.EINVAL, self.rc.modify,
                                     self.init_attr(), self.INIT_MASK & ~missing)
                self.assertEqual(self.qp_state(self.rc), e.IBV_QPS_RESET)
        self.rc.modify(self.init_attr(), self.INIT_MASK)
        self.assertEqual(self.qp_state(self.rc), e.IBV_QPS_INIT)

    def test_init_to_rtr_missing_attrs(self):
        self.rc.modify(self.init_attr(), self.INIT_MASK)
        for missing in (e.IBV_QP_AV, e.IBV_QP_PATH_MTU, e.IBV_QP_DEST_QPN,
                        e.IBV_QP_RQ_PSN, e.IBV_QP_MAX_DEST_RD_ATOMIC,
                        e.IBV_QP_MIN_RNR_TIMER):
            with self.subTest(missing=missing):
                self.assertRDMAError(errno.EINVAL, self.rc.modify,
                                     self.rtr_attr(), self.RTR_MASK & ~missing)
                self.assertEqual(self.qp_state(self.rc), e.IBV_QPS_INIT)
        self.rc.modify(self.rtr_attr(), self.RTR_MASK)
        self.assertEqual(self.qp_state(self.rc), e.IBV_QPS_RTR)

    def test_rtr_to_rts_missing_attrs(self):
        self.rc.modify(self.init_attr(), self.INIT_MASK)
        self.rc.modify(self.rtr_attr(), self.RTR_MASK)
        a = QPAttr()
        a.qp_state = e.IBV_QPS_RTS
        a.timeout, a.retry_cnt, a.rnr_retry, a.sq_psn = 14, 7, 7, 3
        a.max_rd_atomic = 1
        for missing in (e.IBV_QP_SQ_PSN, e.IBV_QP_TIMEOUT, e.IBV_QP_RETRY_CNT,
                        e.IBV_QP_RNR_RETRY, e.IBV_QP_MAX_QP_RD_ATOMIC):
            with self.subTest(missing=missing):
                self.assertRDMAError(errno.EINVAL, self.rc.modify, a,
                                     self.RTS_MASK & ~missing)
                self.assertEqual(self.qp_state(self.rc), e.IBV_QPS_RTR)
        self.rc.modify(a, self.RTS_MASK)
        self.assertEqual(self.qp_state(self.rc), e.IBV_QPS_RTS)

    def test_illegal_transitions(self):
        a = self.rtr_attr()
        self.assertRDMAError(errno.EINVAL, self.rc.modify, a, self.RTR_MASK)
        a = QPAttr()
        a.qp_state = e.IBV_QPS_RTS
        a.sq_psn = 1
        self.assertRDMAError(errno.EINVAL, self.rc.modify, a,
                             e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)
        self.assertEqual(self.qp_state(self.rc), e.IBV_QPS_RESET)

    def test_ud_init_needs_qkey(self):
        ud = self.qp(e.IBV_QPT_UD, self.cq_, self.cq_)
        a = QPAttr(port_num=u.PORT)
        a.qp_state = e.IBV_QPS_INIT
        a.pkey_index = 0
        a.qkey = 7
        self.assertRDMAError(errno.EINVAL, ud.modify, a,
                             e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX |
                             e.IBV_QP_PORT)
        ud.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT |
                  e.IBV_QP_QKEY)
        self.assertEqual(self.qp_state(ud), e.IBV_QPS_INIT)

    def test_post_in_reset_fails(self):
        mr = self.mr()
        with self.assertRaises(u.PyverbsRDMAError) as cm:
            self.post_send(self.rc, mr, 0, 8)
        self.assertEqual(cm.exception.error_code, errno.EINVAL)
        with self.assertRaises(u.PyverbsRDMAError) as cm:
            self.post_recv(self.rc, mr, 0, 8, wr_id=1)
        self.assertEqual(cm.exception.error_code, errno.EINVAL)
        self.assertTrue(u.poll_empty(self.cq_))

    def test_post_send_before_rts_fails(self):
        mr = self.mr()
        self.rc.modify(self.init_attr(), self.INIT_MASK)
        self.post_recv(self.rc, mr, 0, 8, wr_id=1)      # allowed in INIT
        self.assertRDMAError(errno.EINVAL, self.post_send, self.rc, mr, 0, 8)
        self.rc.modify(self.rtr_attr(), self.RTR_MASK)
        self.assertRDMAError(errno.EINVAL, self.post_send, self.rc, mr, 0, 8)
        self.assertTrue(u.poll_empty(self.cq_))


class QueryTest(u.VerbsTestCase):

    def test_query_qp_returns_what_was_set(self):
        cq = self.cq()
        qp = self.qp(e.IBV_QPT_RC, cq, cq, max_send_wr=17, max_recv_wr=9,
                     max_inline=32)
        peer = self.qp(e.IBV_QPT_RC, cq, cq)
        self.connect(qp, peer.qp_num, sq_psn=0x1234, rq_psn=0x4321,
                     access=e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_LOCAL_WRITE,
                     rnr_retry=3, retry_cnt=5, timeout=17, min_rnr_timer=12)
        attr, init = qp.query(0x1fffff)
        self.assertEqual(attr.qp_state, e.IBV_QPS_RTS)
        self.assertEqual(attr.path_mtu, e.IBV_MTU_1024)
        self.assertEqual(attr.dest_qp_num, peer.qp_num)
        self.assertEqual(attr.rq_psn, 0x4321)
        self.assertEqual(attr.sq_psn, 0x1234)
        self.assertEqual(attr.qp_access_flags,
                         e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_LOCAL_WRITE)
        self.assertEqual(attr.timeout, 17)
        self.assertEqual(attr.retry_cnt, 5)
        self.assertEqual(attr.rnr_retry, 3)
        self.assertEqual(attr.min_rnr_timer, 12)
        self.assertEqual(attr.max_rd_atomic, 4)
        self.assertEqual(attr.max_dest_rd_atomic, 4)
        self.assertEqual(attr.pkey_index, 0)
        self.assertEqual(attr.port_num, u.PORT)
        ah = attr.ah_attr
        self.assertEqual(ah.is_global, 1)
        self.assertEqual(ah.sgid_index, 0)
        self.assertEqual(str(ah.dgid), str(self.gid))
        self.assertEqual(ah.port_num, u.PORT)
        self.assertEqual(init.qp_type, e.IBV_QPT_RC)
        self.assertGreaterEqual(init.max_send_wr, 17)
        self.assertGreaterEqual(init.max_recv_wr, 9)
        self.assertGreaterEqual(init.max_inline_data, 32)
        self.assertGreaterEqual(attr.cap.max_send_wr, 17)

    def test_query_ud_qkey(self):
        ep = self.ud_qp(qkey=0x7777)
        attr, init = ep.qp.query(e.IBV_QP_QKEY | e.IBV_QP_STATE)
        self.assertEqual(attr.qkey, 0x7777)
        self.assertEqual(attr.qp_state, e.IBV_QPS_RTS)
        self.assertEqual(init.qp_type, e.IBV_QPT_UD)

    def test_query_device_ex(self):
        attr = self.ctx.query_device()
        ex = self.ctx.query_device_ex()
        orig = ex.orig_attr
        for f in ('max_qp', 'max_qp_wr', 'max_cqe', 'max_mr', 'max_pd',
                  'max_srq', 'max_srq_wr', 'max_mw', 'vendor_id',
                  'vendor_part_id', 'node_guid', 'phys_port_cnt',
                  'device_cap_flags', 'atomic_caps', 'max_qp_rd_atom',
                  'max_sge'):
            self.assertEqual(getattr(orig, f), getattr(attr, f), f)
        self.assertEqual(ex.device_cap_flags_ex & 0xffffffff,
                         attr.device_cap_flags)
        self.assertEqual(ex.phys_port_cnt_ex, attr.phys_port_cnt)
        self.assertEqual(attr.phys_port_cnt, 1)
        self.assertGreater(attr.max_srq, 0)
        self.assertGreater(attr.max_cqe, 0)

    def test_odp_explicit_only(self):
        odp = self.ctx.query_device_ex().odp_caps
        self.assertTrue(odp.general_caps & e.IBV_ODP_SUPPORT)
        self.assertFalse(odp.general_caps & e.IBV_ODP_SUPPORT_IMPLICIT)
        rc = odp.rc_odp_caps
        for cap in (e.IBV_ODP_SUPPORT_SEND, e.IBV_ODP_SUPPORT_RECV,
                    e.IBV_ODP_SUPPORT_WRITE, e.IBV_ODP_SUPPORT_READ,
                    e.IBV_ODP_SUPPORT_ATOMIC):
            self.assertTrue(rc & cap, cap)

    def test_device_advertises_memory_windows(self):
        attr = self.ctx.query_device()
        self.assertGreater(attr.max_mw, 0)
        self.assertTrue(attr.device_cap_flags & e.IBV_DEVICE_MEM_WINDOW)
        self.assertTrue(attr.device_cap_flags & e.IBV_DEVICE_MEM_WINDOW_TYPE_2B)

    def test_ece_not_supported(self):
        cq = self.cq()
        qp = self.qp(e.IBV_QPT_RC, cq, cq)
        self.assertRDMAError(errno.EOPNOTSUPP, qp.query_ece)
        # pyverbs skips ibv_set_ece when vendor_id is 0
        self.assertRDMAError(errno.EOPNOTSUPP, qp.set_ece,
                             ECE(vendor_id=0x15b3, options=1))


FORK_CHILD = r'''
import os, sys
import pyverbs.enums as e
from pyverbs.fork import fork_init, is_fork_initialized
fork_init()
st = is_fork_initialized()
if st not in (e.IBV_FORK_ENABLED, e.IBV_FORK_UNNEEDED):
    print('fork status', st); sys.exit(2)
fork_init()                     # a second call is harmless too
sys.path.insert(0, sys.argv[1])
import uroce_pv as u
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.mr import MR
ctx = Context(name=u.device_name())
mr = MR(PD(ctx), 4096, e.IBV_ACCESS_LOCAL_WRITE)
mr.write(b'parent', 6)
pid = os.fork()
if pid == 0:
    os._exit(0)
_, status = os.waitpid(pid, 0)
assert status == 0, status
assert mr.read(6, 0) == b'parent'
print('ok', st)
'''


class ForkTest(unittest.TestCase):

    def test_fork_init(self):
        p = subprocess.run([sys.executable, '-c', FORK_CHILD,
                            os.path.dirname(os.path.abspath(__file__))],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertTrue(p.stdout.startswith('ok'), p.stdout + p.stderr)


if __name__ == '__main__':
    unittest.main()
