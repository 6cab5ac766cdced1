# SPDX-License-Identifier: MIT
"""UD multicast: ibv_attach_mcast / ibv_detach_mcast.

A send through an AH whose dgid is a multicast GID (::ffff:239.x.y.z) to
QPN 0xFFFFFF goes to the IP group; every QP attached to the group gets its
own copy (its own receive WQE and completion), with the GRH naming the
group as destination.  A receiver QP in a second process (a fresh python
running this file as a script) proves that several processes on one host
receive one group.

No sleeps: a packet that must *not* have arrived is proven absent by a
later packet on the same group that does arrive at another QP attached to
it (one socket per group and process, received in order).

pyverbs has no attach_mcast; the verbs are called through ctypes on the
libibverbs.so.1 pyverbs loaded (ours), with the struct ibv_qp * that
uroce_pv.qp_ptr finds.
"""

import ctypes
import errno
import ipaddress
import itertools
import json
import os
import subprocess
import sys
import unittest

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GID, GlobalRoute

import uroce_pv as u
from uroce_pv import GRH_SIZE, QKEY

MCAST_QPN = 0xFFFFFF
FILL = b'\xee'
# every test its own groups: one another test or process left behind
# must not feed this one
GROUP_BASE = ipaddress.IPv4Address('239.78.0.0') + (os.getpid() % 4096) * 16
_groups = itertools.count()


class Gid(ctypes.Structure):
    _fields_ = [('raw', ctypes.c_uint8 * 16)]


def gid_of(ip):
    g = Gid()
    ctypes.memmove(g.raw, ipaddress.IPv6Address(
        '::ffff:' + str(ip)).packed, 16)
    return g


def gid_str(ip):
    raw = ipaddress.IPv6Address('::ffff:' + str(ip)).packed
    return ':'.join(raw[i:i + 2].hex() for i in range(0, 16, 2))


def libibverbs():
    lib = ctypes.CDLL('libibverbs.so.1')
    for name in ('ibv_attach_mcast', 'ibv_detach_mcast'):
        fn = getattr(lib, name)
        fn.argtypes = [ctypes.c_void_p, ctypes.POINTER(Gid), ctypes.c_uint16]
        fn.restype = ctypes.c_int
    return lib


def attach(qp, ip):
    return libibverbs().ibv_attach_mcast(u.qp_ptr(qp), ctypes.byref(gid_of(ip)), 0)


def detach(qp, ip):
    return libibverbs().ibv_detach_mcast(u.qp_ptr(qp), ctypes.byref(gid_of(ip)), 0)


def counters():
    """This process's device counters, as the uroce tool reads them."""
    tool = os.path.join(os.environ.get('UROCE_LIBDIR', ''), '..', 'bin', 'uroce')
    if not os.access(tool, os.X_OK):
        raise unittest.SkipTest(f'no uroce tool at {tool}')
    out = subprocess.run([tool, '--json', 'stats', str(os.getpid())],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)['counters']


def mcast_ah(pd, ip):
    gr = GlobalRoute(dgid=GID(gid_str(ip)), sgid_index=0, hop_limit=64)
    return AH(pd, attr=AHAttr(is_global=1, port_num=u.PORT, gr=gr))


class McastTest(u.VerbsTestCase):

    def setUp(self):
        super().setUp()
        self.group = GROUP_BASE + next(_groups) % 16
        self.attached = []
        self.my_ip = u.gid_ipv4(self.gid)
        self.s = self.ud_qp()
        self.ah_obj = mcast_ah(self.pd, self.group)

    def tearDown(self):
        # a QP still attached cannot be destroyed (EBUSY)
        for qp, ip in self.attached:
            detach(qp, ip)
        super().tearDown()

    def receiver(self, qkey=QKEY, group=None):
        ep = self.ud_qp(qkey=qkey)
        ep.mr.write(FILL * self.BUF, self.BUF)
        self.attach(ep.qp, group or self.group)
        return ep

    def attach(self, qp, ip):
        self.assertEqual(attach(qp, ip), 0, 'ibv_attach_mcast')
        self.attached.append((qp, ip))

    def detach(self, qp, ip):
        self.assertEqual(detach(qp, ip), 0, 'ibv_detach_mcast')
        self.attached.remove((qp, ip))

    def send(self, payload, qkey=QKEY, wr_id=0, ah=None):
        self.s.mr.write(payload, len(payload), 0)
        self.post_send(self.s.qp, self.s.mr, 0, len(payload), wr_id=wr_id,
                       ud=(ah or self.ah_obj, MCAST_QPN, qkey))
        wc, = u.poll_cq(self.s.scq)
        self.assertWC(wc, wr_id=wr_id, opcode=e.IBV_WC_SEND)

    def check_recv(self, ep, wr_id, data, off=0):
        wc, = u.poll_cq(ep.rcq)
        self.assertWC(wc, wr_id=wr_id, opcode=e.IBV_WC_RECV,
                      byte_len=GRH_SIZE + len(data))
        self.assertEqual(wc.src_qp, self.s.qpn)
        self.assertEqual(wc.qp_num, ep.qpn)
        self.assertTrue(wc.wc_flags & e.IBV_WC_GRH, 'IBV_WC_GRH not set')
        buf = self.read(ep.mr, GRH_SIZE + len(data) + 8, off)
        grh = buf[:GRH_SIZE]
        self.assertEqual(grh[:20], bytes(20), 'GRH: first 20 bytes not zero')
        ip = u.unpack_ipv4(grh[20:40])
        self.assertEqual(ip['vihl'], 0x45)
        self.assertEqual(ip['proto'], 17)
        self.assertEqual(ip['src'], self.my_ip)
        self.assertEqual(ip['dst'], self.group,
                         'GRH destination is not the group')
        self.assertEqual(u.ip_checksum(grh[20:40]), 0xffff,
                         'IPv4 header checksum invalid')
        self.assertEqual(buf[GRH_SIZE:GRH_SIZE + len(data)], data)
        self.assertEqual(buf[GRH_SIZE + len(data):], FILL * 8,
                         'bytes written past the message')

    # ------------------------------------------------------------ delivery

    def test_query_device_limits(self):
        a = self.ctx.query_device()
        self.assertGreater(a.max_mcast_grp, 0)
        self.assertGreater(a.max_mcast_qp_attach, 1)

    def test_two_qps_each_get_a_copy(self):
        r1, r2 = self.receiver(), self.receiver()
        for i, n in enumerate((100, 0, 1, 1000)):
            r1.mr.write(FILL * self.BUF, self.BUF)
            r2.mr.write(FILL * self.BUF, self.BUF)
            self.post_recv(r1.qp, r1.mr, 0, self.BUF, wr_id=10 + i)
            self.post_recv(r2.qp, r2.mr, 0, self.BUF, wr_id=20 + i)
            data = u.pattern(n, seed=i)
            self.send(data, wr_id=i)
            self.check_recv(r1, 10 + i, data)
            self.check_recv(r2, 20 + i, data)
        # the sender is not attached: nothing for it
        self.assertTrue(u.poll_empty(self.s.rcq))

    def test_attach_twice_one_copy(self):
        r1 = self.receiver()
        self.assertEqual(attach(r1.qp, self.group), 0,
                         'a second attach of the same QP and group')
        self.post_recv(r1.qp, r1.mr, 0, 1024, wr_id=1)
        self.post_recv(r1.qp, r1.mr, 2048, 1024, wr_id=2)
        self.send(b'once')
        self.check_recv(r1, 1, b'once')
        self.send(b'twice')
        self.check_recv(r1, 2, b'twice', off=2048)
        # one detach undoes it
        self.detach(r1.qp, self.group)
        self.assertEqual(detach(r1.qp, self.group), errno.EINVAL)

    def test_detach_stops_delivery(self):
        r1, r2 = self.receiver(), self.receiver()
        self.post_recv(r2.qp, r2.mr, 0, 1024, wr_id=2)
        self.detach(r2.qp, self.group)
        # r1 gets it, through the same socket: r2 had its chance and must
        # have let it pass
        self.post_recv(r1.qp, r1.mr, 0, 1024, wr_id=1)
        self.send(b'after detach')
        self.check_recv(r1, 1, b'after detach')
        self.assertTrue(u.poll_empty(r2.rcq), 'a detached QP received')
        self.assertEqual(self.read(r2.mr, 1024), FILL * 1024)
        # the last QP leaves; a unicast send to r1 after a group send
        # finds the receive WQE still there
        self.detach(r1.qp, self.group)
        self.post_recv(r1.qp, r1.mr, 2048, 1024, wr_id=3)
        self.send(b'nobody')
        self.s.mr.write(b'fence', 5, 0)
        self.post_send(self.s.qp, self.s.mr, 0, 5, wr_id=4,
                       ud=(self.ah(), r1.qpn, QKEY))
        u.poll_cq(self.s.scq)
        wc, = u.poll_cq(r1.rcq)
        self.assertWC(wc, wr_id=3, byte_len=GRH_SIZE + 5)
        self.assertEqual(self.read(r1.mr, 5, 2048 + GRH_SIZE), b'fence')

    def test_qkey_mismatch_and_no_recv_dropped(self):
        good = self.receiver()
        badkey = self.receiver(qkey=QKEY ^ 0x5a5a)
        norecv = self.receiver()
        self.post_recv(badkey.qp, badkey.mr, 0, 1024, wr_id=5)
        self.post_recv(good.qp, good.mr, 0, 1024, wr_id=1)
        self.send(b'first')
        self.check_recv(good, 1, b'first')
        self.assertTrue(u.poll_empty(badkey.rcq), 'Q_Key mismatch received')
        self.assertEqual(self.read(badkey.mr, 1024), FILL * 1024)
        # norecv dropped its copy; a receive posted now gets only the next
        self.post_recv(norecv.qp, norecv.mr, 0, 1024, wr_id=9)
        self.send(b'second')
        self.check_recv(norecv, 9, b'second')
        self.assertTrue(u.poll_empty(norecv.rcq))

    def test_other_group_not_delivered(self):
        other = self.group + 1000
        r1 = self.receiver()
        r2 = self.receiver(group=other)
        self.post_recv(r1.qp, r1.mr, 0, 1024, wr_id=1)
        self.post_recv(r2.qp, r2.mr, 0, 1024, wr_id=2)
        self.send(b'to group')
        self.check_recv(r1, 1, b'to group')
        # r2's group had nothing: prove it with a send there
        self.send(b'to other', ah=mcast_ah(self.pd, other))
        wc, = u.poll_cq(r2.rcq)
        self.assertWC(wc, wr_id=2, byte_len=GRH_SIZE + 8)
        self.assertEqual(self.read(r2.mr, 8, GRH_SIZE), b'to other')

    def test_second_process_receives(self):
        r1 = self.receiver()
        child = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), 'child',
             str(self.group), '3'],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env=os.environ)
        try:
            line = child.stdout.readline().strip()
            self.assertTrue(line.startswith('ready'), f'child: {line!r}')
            for i in range(3):
                self.post_recv(r1.qp, r1.mr, 0, 1024, wr_id=i)
                data = u.pattern(64, seed=i)
                self.send(data, wr_id=i)
                self.check_recv(r1, i, data)
            out, _ = child.communicate(timeout=u.TIMEOUT + 5)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        self.assertEqual(child.returncode, 0, f'child: {out}')
        self.assertIn(f'got 3 from {self.my_ip} to {self.group}', out)

    def test_bad_dqpn_dropped_and_counted(self):
        r = self.receiver()
        self.post_recv(r.qp, r.mr, 0, 1024, wr_id=1)
        self.post_recv(r.qp, r.mr, 2048, 1024, wr_id=2)
        before = counters()
        # to the group, but not to QPN 0xFFFFFF (IBA 10.5.2.3): dropped
        self.s.mr.write(b'bad dqpn', 8, 0)
        self.post_send(self.s.qp, self.s.mr, 0, 8,
                       ud=(self.ah_obj, r.qpn, QKEY))
        u.poll_cq(self.s.scq)
        # QPN 0xFFFFFF, but to our unicast address: dropped
        self.post_send(self.s.qp, self.s.mr, 0, 8,
                       ud=(self.ah(), MCAST_QPN, QKEY))
        u.poll_cq(self.s.scq)
        # fences, one per socket: r's receives get exactly these, in order
        self.send(b'group fence')
        self.check_recv(r, 1, b'group fence')
        self.s.mr.write(b'unicast fence', 13, 0)
        self.post_send(self.s.qp, self.s.mr, 0, 13,
                       ud=(self.ah(), r.qpn, QKEY))
        u.poll_cq(self.s.scq)
        wc, = u.poll_cq(r.rcq)
        self.assertWC(wc, wr_id=2, byte_len=GRH_SIZE + 13)
        after = counters()
        self.assertEqual(after['drop_bad_hdr'] - before['drop_bad_hdr'], 2)
        self.assertEqual(after['rx_mcast_pkts'] - before['rx_mcast_pkts'], 1)

    # ------------------------------------------------------------ errors

    def test_attach_rc_qp_einval(self):
        rc = self.endpoint(e.IBV_QPT_RC)
        self.assertEqual(attach(rc.qp, self.group), errno.EINVAL)
        self.assertEqual(detach(rc.qp, self.group), errno.EINVAL)

    def test_attach_unicast_gid_einval(self):
        r = self.ud_qp()
        self.assertEqual(attach(r.qp, self.my_ip), errno.EINVAL)

    def test_detach_not_attached_einval(self):
        r = self.ud_qp()
        self.assertEqual(detach(r.qp, self.group), errno.EINVAL)
        self.receiver()     # the group exists, r is not in it
        self.assertEqual(detach(r.qp, self.group), errno.EINVAL)

    def test_destroy_attached_qp_ebusy(self):
        r = self.receiver()
        self.assertRDMAError(errno.EBUSY, r.qp.close)
        self.detach(r.qp, self.group)
        r.qp.close()


def child_main(group, count):
    """A receiver in its own process: attach, say ready, take count sends."""
    ctx = u.Context(name=u.device_name())
    pd = u.PD(ctx)
    tc = u.VerbsTestCase()
    tc.ctx, tc.pd = ctx, pd
    ep = tc.ud_qp()
    if attach(ep.qp, group):
        print('attach failed', flush=True)
        return 1
    for i in range(count):
        tc.post_recv(ep.qp, ep.mr, 0, 1024, wr_id=i)
    print('ready', flush=True)
    wcs = u.poll_cq(ep.rcq, count)
    bad = [w for w in wcs if w.status != e.IBV_WC_SUCCESS]
    ip = u.unpack_ipv4(tc.read(ep.mr, GRH_SIZE)[20:40])
    detach(ep.qp, group)
    if bad:
        print(f'bad completions {[w.status for w in bad]}', flush=True)
        return 1
    print(f'got {len(wcs)} from {ip["src"]} to {ip["dst"]}', flush=True)
    return 0


if __name__ == '__main__':
    if len(sys.argv) == 4 and sys.argv[1] == 'child':
        sys.exit(child_main(ipaddress.IPv4Address(sys.argv[2]),
                            int(sys.argv[3])))
    unittest.main()
