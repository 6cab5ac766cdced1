// SPDX-License-Identifier: MIT
/*
 * uroce doctor: what decides whether uroce will work well on this host,
 * one line each, with what to change.  Exit status 1 if something will
 * fail, 0 otherwise (warnings included).
 *
 * It asks the same code the programs will run: our library opens the
 * device here with this environment (run_probe.c), and the namespace
 * check is `uroce run`'s own (run_ns.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "run.h"
#include "uroce_host.h"

enum verdict {
	V_OK,
	V_WARN,
	V_FAIL
};

static const char *const verdict_names[] = { "ok", "warn", "FAIL" };

struct doctor {
	char libdir[PATH_MAX];
	bool have_lib, have_dev;
	int ns_err;
	char ns_why[512];
	char dev_err[512];
	struct run_dev d;
};

typedef enum verdict check_fn(const struct doctor *dr, char *line, size_t len);

/* A number from /proc/sys, or -1. */
static long read_sysctl(const char *path)
{
	char buf[32];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return strtol(buf, NULL, 10);
}

static enum verdict check_lib(const struct doctor *dr, char *line, size_t len)
{
	if (!dr->have_lib) {
		snprintf(line, len,
			 "no libibverbs.so.1 of ours next to this "
			 "uroce (../lib/uroce or ../lib): build or install uroce");
		return V_FAIL;
	}
	snprintf(line, len, "%s/libibverbs.so.1", dr->libdir);
	return V_OK;
}

static enum verdict check_addr(const struct doctor *dr, char *line, size_t len)
{
	const char *from = getenv("UROCE_ADDR")	  ? "UROCE_ADDR" :
			   getenv("UROCE_IFNAME") ? "UROCE_IFNAME" :
						    NULL;

	if (!dr->have_dev) {
		snprintf(line, len,
			 "%s: set UROCE_ADDR to an address of this "
			 "host, or UROCE_IFNAME to an interface with one",
			 dr->dev_err);
		return V_FAIL;
	}
	if (from)
		snprintf(line, len, "%s on %s (from %s)", dr->d.addr,
			 dr->d.ndev, from);
	else
		snprintf(line, len,
			 "%s on %s, the first free loopback address: "
			 "set UROCE_ADDR or UROCE_IFNAME to reach other hosts "
			 "(other network namespaces and containers too)",
			 dr->d.addr, dr->d.ndev);
	return V_OK;
}

static enum verdict check_port(const struct doctor *dr, char *line, size_t len)
{
	if (!dr->have_dev) {
		snprintf(line, len,
			 "not bound (above); another program on UDP "
			 "4791? ss -ulpn 'sport = :4791' (the kernel's rdma_rxe "
			 "holds it on every address: rmmod rdma_rxe)");
		return V_FAIL;
	}
	snprintf(line, len, "UDP 4791 free on %s", dr->d.addr);
	return V_OK;
}

static enum verdict check_mtu(const struct doctor *dr, char *line, size_t len)
{
	static const unsigned int ib_bytes[] = { 0, 256, 512, 1024, 2048, 4096 };
	unsigned int m = dr->d.pattr.active_mtu;

	if (!dr->have_dev) {
		snprintf(line, len, "unknown: no device (above)");
		return V_FAIL;
	}
	m = m < 6 ? ib_bytes[m] : 0;
	if (m >= 4096) {
		snprintf(line, len, "interface %s MTU %u, IB MTU %u",
			 dr->d.ndev, dr->d.netdev_mtu, m);
		return V_OK;
	}
	snprintf(line, len,
		 "interface %s MTU %u gives IB MTU %u: for 4096, "
		 "ip link set dev %s mtu 9000 (on every host of the path)",
		 dr->d.ndev, dr->d.netdev_mtu, m, dr->d.ndev);
	return V_WARN;
}

/* net.core.NAME against the want bytes the socket asks for (for buf, in
 * words; the kernel doubles them); lack: what less costs */
static enum verdict check_buf(const char *name, long want, const char *buf,
			      const char *lack, char *line, size_t len)
{
	char path[64];
	long have;

	snprintf(path, sizeof(path), "/proc/sys/net/core/%s", name);
	have = read_sysctl(path);
	if (have >= want) {
		snprintf(line, len, "net.core.%s %ld: enough for %s", name,
			 have, buf);
		return V_OK;
	}
	if (geteuid() == 0) {
		snprintf(line, len,
			 "net.core.%s %ld, but root's socket gets %s anyway",
			 name, have, buf);
		return V_OK;
	}
	snprintf(line, len,
		 "net.core.%s %ld is less than %s asks for (%ld): "
		 "sysctl -w net.core.%s=%ld (or %s)",
		 name, have, buf, want, name, want, lack);
	return V_WARN;
}

static enum verdict check_rmem(const struct doctor *dr, char *line, size_t len)
{
	return check_buf("rmem_max", UROCE_SOCK_BUF_BYTES,
			 "the 32 MiB receive buffer",
			 "bursts drop and retransmit", line, len);
}

/* the send buffer is small on purpose (UROCE_SNDBUF_KB): only a
 * wmem_max below it matters */
static enum verdict check_wmem(const struct doctor *dr, char *line, size_t len)
{
	unsigned long long kb = uroce_sndbuf_kb(getenv("UROCE_SNDBUF_KB"));
	char buf[64];

	snprintf(buf, sizeof(buf), "the %llu KiB send buffer", kb);
	return check_buf("wmem_max", (long)kb * 512, buf,
			 "a fast link idles while the send buffer refills",
			 line, len);
}

/* What stops unprivileged user namespaces, most specific first. */
static const struct {
	const char *sysctl;
	long blocks; /* the value that stops them */
	const char *fix;
} userns_knobs[] = {
	{ "/proc/sys/kernel/apparmor_restrict_unprivileged_userns", 1,
	  "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0" },
	{ "/proc/sys/kernel/unprivileged_userns_clone", 0,
	  "sysctl -w kernel.unprivileged_userns_clone=1" },
	{ "/proc/sys/user/max_user_namespaces", 0,
	  "sysctl -w user.max_user_namespaces=10000" },
};

static enum verdict check_ns(const struct doctor *dr, char *line, size_t len)
{
	const char *fix = "in a container, allow unshare (e.g. docker run "
			  "--privileged)";
	size_t i;

	if (!dr->ns_err) {
		snprintf(line, len,
			 "uroce run can give programs /dev/infiniband "
			 "and /sys/class/infiniband");
		return V_OK;
	}
	for (i = 0; i < sizeof(userns_knobs) / sizeof(userns_knobs[0]); i++)
		if (geteuid() && read_sysctl(userns_knobs[i].sysctl) ==
					 userns_knobs[i].blocks) {
			fix = userns_knobs[i].fix;
			break;
		}
	snprintf(line, len,
		 "%s: through uroce run, UCX, NCCL and others that "
		 "look there will not see uroce0; %s",
		 dr->ns_why, fix);
	return V_WARN;
}

static enum verdict check_memlock(const struct doctor *dr, char *line,
				  size_t len)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl)) {
		snprintf(line, len, "unknown: %s", strerror(errno));
		return V_WARN;
	}
	if (rl.rlim_cur == RLIM_INFINITY) {
		snprintf(line, len, "unlimited");
		return V_OK;
	}
	snprintf(line, len,
		 "%llu KiB: uroce locks nothing, but UCX and MPI "
		 "warn or cap registrations under it: ulimit -l unlimited "
		 "(limits.conf memlock, systemd LimitMEMLOCK=infinity)",
		 (unsigned long long)rl.rlim_cur / 1024);
	return rl.rlim_cur >= (64ull << 20) ? V_OK : V_WARN;
}

static const struct {
	const char *name;
	check_fn *fn;
} checks[] = {
	{ "library", check_lib },   { "address", check_addr },
	{ "port", check_port },	    { "mtu", check_mtu },
	{ "rmem_max", check_rmem }, { "wmem_max", check_wmem },
	{ "namespaces", check_ns }, { "memlock", check_memlock },
};

int uroce_cmd_doctor(int argc, char **argv)
{
	static struct doctor dr;
	enum verdict worst = V_OK, v;
	char line[768];
	size_t i;

	if (argc > 1) {
		if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
			puts("usage: uroce doctor\nChecks what uroce needs here, "
			     "one line each; exit 1 if something will fail.");
			return 0;
		}
		fprintf(stderr, "uroce doctor: takes no arguments "
				"(uroce doctor --help)\n");
		return 2;
	}
	/* before the probe starts the library's threads */
	dr.ns_err = run_ns_check(dr.ns_why, sizeof(dr.ns_why));
	dr.have_lib = !run_find_libdir(dr.libdir, sizeof(dr.libdir));
	if (dr.have_lib)
		dr.have_dev = !run_probe(dr.libdir, &dr.d, NULL, dr.dev_err,
					 sizeof(dr.dev_err));
	else
		snprintf(dr.dev_err, sizeof(dr.dev_err), "no library");
	for (i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
		v = checks[i].fn(&dr, line, sizeof(line));
		printf("%-5s %-11s %s\n", verdict_names[v], checks[i].name,
		       line);
		if (v > worst)
			worst = v;
	}
	return worst == V_FAIL ? 1 : 0;
}
