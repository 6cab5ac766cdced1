# SPDX-License-Identifier: MIT
"""Port LIDs (docs/transport.md, "LIDs"): every uroce device on a host has a
LID of its own, and an address without a GRH (is_global 0) whose DLID is
another uroce device's LID reaches that device over RoCE v2, the way qperf
without -cm1 and ibv_*_pingpong without -g address their peers.

The peer is a second process (a fresh python running this file as a
script, the "child"), driven over its stdin/stdout one line at a time:
every step waits for the child's answer, with a deadline; no sleeps.
"""

import contextlib
import errno
import hashlib
import ipaddress
import os
import select
import shutil
import socket
import struct
import subprocess
import sys
import unittest

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QPAttr

import uroce_pv as u
from uroce_pv import GRH_SIZE, QKEY

LID_UNICAST_MAX = 0xbfff
SHM_PID_OFF = 48                # struct uroce_shm_hdr: pid
SHM_HDR_SIZE_OFF = 12           # ... hdr_size; lid is its last-but-one u16


def lid_ah_attr(lid):
    return AHAttr(is_global=0, dlid=lid, port_num=u.PORT)


def port_lid(ctx):
    return ctx.query_port(u.PORT).lid


def rc_connect(qp, dest_qpn, lid, sq_psn, rq_psn):
    """INIT -> RTR -> RTS with a GRH-less path to LID lid."""
    a = QPAttr(port_num=u.PORT)
    a.path_mtu = e.IBV_MTU_1024
    a.dest_qp_num = dest_qpn
    a.rq_psn = rq_psn
    a.max_dest_rd_atomic = 1
    a.min_rnr_timer = 1
    a.ah_attr = lid_ah_attr(lid)
    qp.to_rtr(a)
    a.sq_psn = sq_psn
    a.timeout = 14
    a.retry_cnt = 7
    a.rnr_retry = 7
    a.max_rd_atomic = 1
    qp.to_rts(a)


def rc_to_init(qp):
    a = QPAttr(port_num=u.PORT)
    a.pkey_index = 0
    a.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE
    qp.to_init(a)


class Child:
    """The peer process: its LID, GID and QP numbers, and a line protocol."""

    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), 'child'],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env=os.environ)
        words = self.expect('hello')
        self.lid, self.ud_qpn, self.rc_qpn = (int(w) for w in words[1:4])
        self.ip = ipaddress.IPv4Address(words[4])

    def expect(self, word, timeout=u.TIMEOUT + 5):
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if r else ''
        if not line.startswith(word + ' ') and line.strip() != word:
            raise AssertionError(f'child: expected {word!r}, got {line!r}')
        return line.split()

    def tell(self, *words):
        self.proc.stdin.write(' '.join(str(w) for w in words) + '\n')
        self.proc.stdin.flush()

    def close(self):
        if self.proc.poll() is None:
            try:
                self.tell('quit')
                self.proc.wait(timeout=u.TIMEOUT)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            f.close()


class LidTest(u.VerbsTestCase):

    def setUp(self):
        super().setUp()
        self.lid = port_lid(self.ctx)
        self.child = Child()
        self.addCleanup(self.child.close)

    def test_port_lids(self):
        attr = self.ctx.query_port(u.PORT)
        self.assertEqual(attr.link_layer, e.IBV_LINK_LAYER_ETHERNET)
        self.assertTrue(1 <= self.lid <= LID_UNICAST_MAX, f'LID {self.lid:#x}')
        self.assertTrue(1 <= self.child.lid <= LID_UNICAST_MAX,
                        f'child LID {self.child.lid:#x}')
        self.assertNotEqual(self.lid, self.child.lid,
                            'two processes have the same LID')
        self.assertNotEqual(u.gid_ipv4(self.gid), self.child.ip)

    def test_ud_grhless_ah(self):
        """A GRH-less AH to the child's LID delivers; the child answers
        through a GRH-less AH to ours."""
        me = self.ud_qp()
        self.post_recv(me.qp, me.mr, 0, 1024, wr_id=2)
        ah = AH(self.pd, attr=lid_ah_attr(self.child.lid))
        data = u.pattern(200, seed=11)
        me.mr.write(data, len(data), 2048)
        self.post_send(me.qp, me.mr, 2048, len(data), wr_id=1,
                       ud=(ah, self.child.ud_qpn, QKEY))
        wc, = u.poll_cq(me.scq)
        self.assertWC(wc, wr_id=1)
        self.child.tell('ud', self.lid, me.qpn)
        words = self.child.expect('ud-ok')
        self.assertEqual(words[1:], [str(GRH_SIZE + len(data)), data.hex(),
                                     str(u.gid_ipv4(self.gid))])
        wc, = u.poll_cq(me.rcq)
        self.assertWC(wc, wr_id=2, byte_len=GRH_SIZE + len(data))
        self.assertTrue(wc.wc_flags & e.IBV_WC_GRH)
        self.assertEqual(wc.src_qp, self.child.ud_qpn)
        ip = u.unpack_ipv4(self.read(me.mr, GRH_SIZE)[20:40])
        self.assertEqual(ip['src'], self.child.ip)
        self.assertEqual(ip['dst'], u.gid_ipv4(self.gid))
        self.assertEqual(self.read(me.mr, len(data), GRH_SIZE), data[::-1])

    def test_grhless_ah_unknown_lid(self):
        # 0 and the multicast range are no port's LID
        for lid in (0, 0xc000, 0xffff):
            self.assertRDMAError(errno.EINVAL, AH, self.pd,
                                 attr=lid_ah_attr(lid))
        free = self.unused_lid()
        self.assertRDMAError(errno.EINVAL, AH, self.pd, attr=lid_ah_attr(free))

    def test_dead_process_segment_does_not_resolve(self):
        """A segment left by a dead process names a LID nobody holds: no
        address."""
        lid = self.unused_lid()
        # Any uroce process that opens its device meanwhile removes a
        # dead pid's segment (engine/shm.c remove_stale): the segment is
        # made under a name that sweep passes over, renamed into place,
        # and the lookup counts only if the segment is still there after
        # it; else again, with another dead pid.
        for _ in range(20):
            dead = subprocess.Popen(['true'])
            dead.wait()
            path = f'/dev/shm/uroce.{dead.pid}'
            if os.path.exists(path):
                continue
            # our own segment, as the dead pid's, with the unused LID
            tmp = f'/dev/shm/uroce-test-lid.{os.getpid()}'
            shutil.copyfile(f'/dev/shm/uroce.{os.getpid()}', tmp)
            with open(tmp, 'r+b') as f:
                hdr_size, = struct.unpack(
                    '<I', f.read(16)[SHM_HDR_SIZE_OFF:16])
                f.seek(SHM_PID_OFF)
                f.write(struct.pack('<i', dead.pid))
                f.seek(hdr_size - 4)
                f.write(struct.pack('<H', lid))
            os.rename(tmp, path)
            try:
                self.assertRDMAError(errno.EINVAL, AH, self.pd,
                                     attr=lid_ah_attr(lid))
                if os.path.exists(path):
                    return
            finally:
                # (another process's sweep may take it first)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        self.fail('the dead segment was swept before every lookup')

    def unused_lid(self):
        """A unicast LID that no uroce device holds now or can take while
        the test runs: we hold its name ourselves (engine/lid.c)."""
        for lid in range(LID_UNICAST_MAX, 0, -1):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            try:
                s.bind(f'\0uroce/lid/{lid}')
            except OSError:
                s.close()
                continue
            self.addCleanup(s.close)
            return lid
        self.fail('no free LID')

    def test_rc_grhless_rtr(self):
        """RC with GRH-less ah_attr at RTR on both sides: a SEND each way."""
        me = self.endpoint(e.IBV_QPT_RC)
        rc_to_init(me.qp)
        rc_connect(me.qp, self.child.rc_qpn, self.child.lid,
                   u.PSN_A, u.PSN_B)
        attr, _ = me.qp.query(e.IBV_QP_AV)
        self.assertEqual(attr.ah_attr.dlid, self.child.lid)
        self.child.tell('rc', self.lid, me.qpn)
        self.child.expect('rc-ready')
        self.post_recv(me.qp, me.mr, 0, 2048, wr_id=2)
        data = u.pattern(3000, seed=5)      # three 1024-byte packets
        big = self.mr(length=4096)
        big.write(data, len(data))
        self.post_send(me.qp, big, 0, len(data), wr_id=1)
        wc, = u.poll_cq(me.scq)
        self.assertWC(wc, wr_id=1, opcode=e.IBV_WC_SEND)
        words = self.child.expect('rc-ok')
        self.assertEqual(words[1:], [str(len(data)), str(hash_hex(data))])
        wc, = u.poll_cq(me.rcq)
        self.assertWC(wc, wr_id=2, opcode=e.IBV_WC_RECV, byte_len=100)
        self.assertEqual(self.read(me.mr, 100), data[:100][::-1])

    def test_rc_grhless_rtr_unknown_lid(self):
        me = self.endpoint(e.IBV_QPT_RC)
        rc_to_init(me.qp)
        with self.assertRaises(PyverbsRDMAError) as cm:
            rc_connect(me.qp, self.child.rc_qpn, self.unused_lid(),
                       u.PSN_A, u.PSN_B)
        self.assertEqual(cm.exception.error_code, errno.EINVAL)
        self.assertEqual(self.qp_state(me.qp), e.IBV_QPS_INIT)


def hash_hex(data):
    return hashlib.sha256(data).hexdigest()[:16]


def child_main():
    """The peer: a UD QP with a receive posted, an RC QP in INIT; then
    whatever the parent asks, one line each."""
    ctx = u.Context(name=u.device_name())
    pd = u.PD(ctx)
    tc = u.VerbsTestCase()
    tc.ctx, tc.pd = ctx, pd
    ud = tc.ud_qp()
    tc.post_recv(ud.qp, ud.mr, 0, 1024, wr_id=1)
    rc = tc.endpoint(e.IBV_QPT_RC)
    rc_to_init(rc.qp)
    big = tc.mr(length=4096)
    gid = ctx.query_gid(u.PORT, 0)
    print('hello', port_lid(ctx), ud.qpn, rc.qpn, u.gid_ipv4(gid), flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd or cmd[0] == 'quit':
            break
        if cmd[0] == 'ud':
            lid, qpn = int(cmd[1]), int(cmd[2])
            wc, = u.poll_cq(ud.rcq)
            n = wc.byte_len - GRH_SIZE
            data = tc.read(ud.mr, n, GRH_SIZE)
            src = u.unpack_ipv4(tc.read(ud.mr, GRH_SIZE)[20:40])['src']
            ud.mr.write(data[::-1], n, 2048)
            tc.post_send(ud.qp, ud.mr, 2048, n, wr_id=3,
                         ud=(AH(pd, attr=lid_ah_attr(lid)), qpn, QKEY))
            u.poll_cq(ud.scq)
            print('ud-ok', wc.byte_len, data.hex(), src, flush=True)
        elif cmd[0] == 'rc':
            lid, qpn = int(cmd[1]), int(cmd[2])
            tc.post_recv(rc.qp, big, 0, 4096, wr_id=1)
            rc_connect(rc.qp, qpn, lid, u.PSN_B, u.PSN_A)
            print('rc-ready', flush=True)
            wc, = u.poll_cq(rc.rcq)
            data = tc.read(big, wc.byte_len)
            rc.mr.write(data[:100][::-1], 100)
            tc.post_send(rc.qp, rc.mr, 0, 100, wr_id=2)
            wc2, = u.poll_cq(rc.scq)
            if wc2.status != e.IBV_WC_SUCCESS:
                print('rc-fail', u.status_name(wc2.status), flush=True)
                continue
            print('rc-ok', wc.byte_len, hash_hex(data), flush=True)
    return 0


if __name__ == '__main__':
    if len(sys.argv) == 2 and sys.argv[1] == 'child':
        sys.exit(child_main())
    unittest.main()
