# SPDX-License-Identifier: MIT
"""The user's alternatives on a two-namespace path (issue 15): each
middleware once over its own TCP transport and once over uroce, on the
same veth, run back to back.

- ucx_perftest tag_bw (1 MiB) and tag_lat (8 B): UCX_TLS=tcp against
  UCX's rc_verbs on uroce (ud_verbs for the wire-up), each program
  through `uroce run`, which gives UCX the /dev/infiniband node it
  looks for (as tests/ucx does);
- fi_pingpong (fabtests; Debian packages no fi_msg_bw) RDM endpoints at
  64 KiB: libfabric's tcp provider against verbs;ofi_rxm on uroce;
- tests/mpi/mpi_pingpong at 1 MiB over Open MPI, one rank in each
  namespace (mpirun starts the far one through bench/ns_rsh): the TCP
  BTL (pml ob1) against the UCX PML on uroce's rc_verbs."""

import os

from . import parsers
from .common import KIB, MIB, ROOT, Run

ALT_UCX_TESTS = (("tag_bw", MIB), ("tag_lat", 8))
ALT_FI_SIZE = 64 * KIB
ALT_MPI_SIZE = MIB
UCX_ON_UROCE = {"UCX_TLS": "rc_verbs,ud_verbs,self", "UCX_NET_DEVICES": "uroce0:1"}


def alt_key(path, tool, transport):
    """Where one alternative's run is kept: e.g. veth9000/alt/ucx_tag_bw/tcp."""
    return f"{path}/alt/{tool}/{transport}"


class Alternatives:
    """Mixed into Bench: needs next_port, logpath, fail, wait_tcp,
    uroce_env, plain_env, build, quick."""

    def uroce_tool(self):
        return os.path.join(self.build, "bin", "uroce")

    def _pair(self, tag, path, srv_argv, cli_argv, env_s, env_c, port, timeout,
              ready=None):
        """A server (listening on TCP port, or ready() once it is) and its
        client; (server, client) with the client done, or None after
        saying why."""
        srv = Run(path.wrap(srv_argv, "server"), env_s, self.logpath(tag + "-srv"))
        if not (self.wait_until(srv, ready, 30) if ready else
                self.wait_tcp(path, port, srv, 30)):
            srv.kill()
            self.fail(tag, "server did not listen", srv)
            return None
        cli = Run(path.wrap(cli_argv, "client"), env_c, self.logpath(tag + "-cli"))
        ok = cli.wait(timeout)
        srv.wait(10 if ok else 1)
        if srv.rc is None:
            srv.kill()
        if not ok or cli.rc != 0:
            self.fail(tag, f"client rc={cli.rc}", srv, cli)
            return None
        return srv, cli

    def ucx(self, path, test, size, transport):
        """ucx_perftest TEST of SIZE over UCX's tcp or over uroce."""
        tag = f"{path.name}-ucx-{test}-{transport}"
        port = self.next_port()
        n = {"tag_bw": 300 if self.quick else 500, "tag_lat": 2000 if self.quick else 5000}
        args = ["ucx_perftest", "-t", test, "-s", str(size), "-n", str(n[test]),
                "-w", str(n[test] // 10), "-p", str(port)]
        if transport == "tcp":
            env = {s: dict(self.plain_env(), UCX_TLS="tcp") for s in ("server", "client")}
            pre = []
        else:
            env = {s: self.uroce_env(path, s, UCX_ON_UROCE) for s in ("server", "client")}
            pre = [self.uroce_tool(), "run", "--"]
        r = self._pair(tag, path, pre + args, pre + args[:1] + [path.server_addr] + args[1:],
                       env["server"], env["client"], port, 60)
        if not r:
            return None
        m = parsers.ucx_perftest(r[1].text())
        if not m:
            self.fail(tag, "no Final: row", *r)
            return None
        if test.endswith("_lat"):
            del m["gbps"]           # the figure of a latency run is its latency
        m.update(test=test, size=size, transport=transport)
        return m

    def fi(self, path, transport):
        """fi_pingpong RDM 64 KiB over libfabric's tcp or verbs;ofi_rxm on uroce."""
        tag = f"{path.name}-fi-{transport}"
        port = self.next_port()
        prov = "tcp" if transport == "tcp" else "verbs;ofi_rxm"
        args = ["fi_pingpong", "-p", prov, "-e", "rdm", "-S", str(ALT_FI_SIZE),
                "-I", str(500 if self.quick else 1000)]
        if transport == "tcp":
            env_s = env_c = self.plain_env()
        else:
            env_s, env_c = self.uroce_env(path, "server"), self.uroce_env(path, "client")
        r = self._pair(tag, path, args + ["-B", str(port)],
                       args + ["-P", str(port), path.server_addr], env_s, env_c, port, 20)
        if not r:
            return None
        m = parsers.fi_pingpong(r[1].text())
        if not m:
            self.fail(tag, "no result row", *r)
            return None
        m["transport"] = transport
        return m

    def mpi(self, path, transport):
        """mpi_pingpong 1 MiB, rank 0 in the server's namespace (where
        mpirun runs), rank 1 in the client's."""
        tag = f"{path.name}-mpi-{transport}"
        prog = os.path.join(self.build, "tests", "mpi", "mpi_pingpong")
        if not os.path.exists(prog):
            self.fail(tag, f"{prog} not built (libopenmpi-dev)")
            return None
        a, b = path.uroce_server_addr, path.uroce_client_addr
        net = a.rsplit(".", 1)[0] + ".0/24"
        env = self.uroce_env(path, "server") if transport != "tcp" else self.plain_env()
        env.pop("UROCE_ADDR", None)             # each rank's device: its namespace's
        env["UROCE_BENCH_HOSTS"] = f"{a}={path.server_ns} {b}={path.client_ns}"
        argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "plm_rsh_agent",
                os.path.join(ROOT, "bench", "ns_rsh"), "--mca", "oob_tcp_if_include", net]
        rounds = str(50 if self.quick else 100)
        if transport == "tcp":
            argv += ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
                     "--mca", "btl_tcp_if_include", net]
            rank = [prog]
        else:
            argv += ["--mca", "pml", "ucx", "--mca", "btl", "self"]
            rank = ["-x", "UROCE_STATS=0"]
            for k, v in UCX_ON_UROCE.items():
                rank += ["-x", f"{k}={v}"]
            rank += [self.uroce_tool(), "run", "--", prog]
        # one app context a rank, each with its namespace's address for
        # its device (the default address inside a namespace is no
        # address of the other's)
        for i, addr in enumerate((a, b)):
            argv += ([":"] if i else []) + ["-np", "1", "--host", addr, "-x",
                                            f"UROCE_ADDR={addr}"] + rank + \
                [str(ALT_MPI_SIZE), rounds]
        r = Run(path.wrap(argv, "server"), env, self.logpath(tag))
        ok = r.wait(60)
        m = parsers.mpi_pingpong(r.text())
        if not ok or r.rc != 0 or not m:
            self.fail(tag, f"mpirun rc={r.rc}", r)
            return None
        m["transport"] = transport
        return m

    def alternatives(self, path, dead):
        """One round of every alternative on path: {key: result}.  A run
        in dead (it failed in an earlier round) is not tried again: each
        failure costs its whole timeout."""
        runs = [(alt_key(path.name, f"ucx_{t}", tr), self.ucx, (path, t, size, tr))
                for t, size in ALT_UCX_TESTS for tr in ("tcp", "uroce")]
        runs += [(alt_key(path.name, "fi_pingpong", tr), self.fi, (path, tr))
                 for tr in ("tcp", "uroce")]
        runs += [(alt_key(path.name, "mpi_pingpong", tr), self.mpi, (path, tr))
                 for tr in ("tcp", "uroce")]
        out = {}
        for key, fn, fargs in runs:
            if key in dead:
                continue
            out[key] = fn(*fargs)
            if out[key] is None:
                dead.add(key)
        return out
