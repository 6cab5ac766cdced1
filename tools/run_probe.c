// SPDX-License-Identifier: MIT
/*
 * The device as the program will see it.
 *
 * `uroce run` loads our libibverbs into itself and opens the device, so
 * that the library, not a second copy of its rules, decides the address
 * (UROCE_ADDR, UROCE_IFNAME or the first free loopback address) and
 * reports every value the sysfs tree repeats.  The program is exec'd in
 * this same process afterwards, so even what depends on the pid (the
 * node GUID) is what the program's own device will report.  The exec
 * drops the library's sockets and threads; its stats segment, which has
 * our pid, is unlinked by hand.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "run.h"
#include "uroce_host.h"
#include "uroce_shm.h"

/* Where our libraries are, relative to the directory of bin/uroce:
 * installed (cmake --install), then the build tree. */
static const char *const libdir_rel[] = { "../lib/uroce", "../lib" };

int run_find_libdir(char *out, size_t len)
{
	char exe[PATH_MAX], try[PATH_MAX + 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;
	size_t i;

	if (n <= 0)
		return -errno;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	for (i = 0; i < sizeof(libdir_rel) / sizeof(libdir_rel[0]); i++) {
		snprintf(try, sizeof(try), "%s/%s/libibverbs.so.1", exe,
			 libdir_rel[i]);
		if (access(try, R_OK))
			continue;
		*strrchr(try, '/') = '\0';
		if (!realpath(try, out) || strlen(out) >= len)
			return -ENAMETOOLONG;
		return 0;
	}
	return -ENOENT;
}

/* The part of the verbs API the probe uses, looked up by name. */
struct verbs_api {
	struct ibv_device **(*get_device_list)(int *n);
	void (*free_device_list)(struct ibv_device **list);
	struct ibv_context *(*open_device)(struct ibv_device *dev);
	int (*close_device)(struct ibv_context *ctx);
	int (*query_device)(struct ibv_context *ctx,
			    struct ibv_device_attr *attr);
	int (*query_port)(struct ibv_context *ctx, uint8_t port,
			  struct ibv_port_attr *attr);
	int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index,
			 union ibv_gid *gid);
	int (*query_pkey)(struct ibv_context *ctx, uint8_t port, int index,
			  __be16 *pkey);
	int (*query_gid_ex)(struct ibv_context *ctx, uint32_t port,
			    uint32_t index, struct ibv_gid_entry *entry,
			    uint32_t flags, size_t entry_size);
};

static const struct {
	const char *sym;
	size_t off;
} verbs_syms[] = {
	{ "ibv_get_device_list", offsetof(struct verbs_api, get_device_list) },
	{ "ibv_free_device_list", offsetof(struct verbs_api, free_device_list) },
	{ "ibv_open_device", offsetof(struct verbs_api, open_device) },
	{ "ibv_close_device", offsetof(struct verbs_api, close_device) },
	{ "ibv_query_device", offsetof(struct verbs_api, query_device) },
	{ "ibv_query_port", offsetof(struct verbs_api, query_port) },
	{ "ibv_query_gid", offsetof(struct verbs_api, query_gid) },
	{ "ibv_query_pkey", offsetof(struct verbs_api, query_pkey) },
	{ "_ibv_query_gid_ex", offsetof(struct verbs_api, query_gid_ex) },
};

static int load_verbs(const char *libdir, struct verbs_api *api, char *err,
		      size_t len)
{
	char path[PATH_MAX + 32];
	void *h, *fn;
	size_t i;

	snprintf(path, sizeof(path), "%s/libibverbs.so.1", libdir);
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, len, "cannot load %s: %s", path, dlerror());
		return -ENOENT;
	}
	for (i = 0; i < sizeof(verbs_syms) / sizeof(verbs_syms[0]); i++) {
		fn = dlsym(h, verbs_syms[i].sym);
		if (!fn) {
			snprintf(err, len, "%s has no %s", path,
				 verbs_syms[i].sym);
			return -ENOENT;
		}
		memcpy((char *)api + verbs_syms[i].off, &fn, sizeof(fn));
	}
	return 0;
}

/* The address a RoCE v2 GID stands for: IPv4-mapped, or IPv6 as is. */
static void gid_to_addr(const union ibv_gid *gid, char *out, size_t len)
{
	static const uint8_t v4_mapped[12] = { [10] = 0xff, [11] = 0xff };

	if (!memcmp(gid->raw, v4_mapped, sizeof(v4_mapped)))
		inet_ntop(AF_INET, gid->raw + 12, out, (socklen_t)len);
	else
		inet_ntop(AF_INET6, gid->raw, out, (socklen_t)len);
}

static unsigned int netdev_mtu(const char *ifname)
{
	struct ifreq ifr = { 0 };
	unsigned int mtu = 0;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return 0;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (!ioctl(fd, SIOCGIFMTU, &ifr))
		mtu = (unsigned int)ifr.ifr_mtu;
	close(fd);
	return mtu;
}

static int query(const struct verbs_api *api, struct ibv_context *ctx,
		 struct run_dev *d)
{
	struct ibv_gid_entry e;
	__be16 pkey;
	int i, ret;

	ret = api->query_device(ctx, &d->dattr);
	if (!ret)
		ret = api->query_port(ctx, 1, &d->pattr);
	if (ret)
		return -ret;
	if (api->query_pkey(ctx, 1, 0, &pkey))
		return -errno;
	d->pkey0 = be16toh(pkey);
	d->ngids = d->pattr.gid_tbl_len < RUN_MAX_GIDS ? d->pattr.gid_tbl_len :
							 RUN_MAX_GIDS;
	for (i = 0; i < d->ngids; i++) {
		if (api->query_gid(ctx, 1, i, &d->gid[i]))
			return -errno;
		if (api->query_gid_ex(ctx, 1, (uint32_t)i, &e, 0, sizeof(e)))
			continue; /* an empty slot: no type, no ndev */
		d->gid_ex[i] = true;
		d->gid_type[i] = e.gid_type;
		if (!if_indextoname(e.ndev_ifindex, d->gid_ndev[i]))
			d->gid_ndev[i][0] = '\0';
	}
	if (!d->gid_ex[0])
		return -ENODATA;
	gid_to_addr(&d->gid[0], d->addr, sizeof(d->addr));
	snprintf(d->ndev, sizeof(d->ndev), "%s", d->gid_ndev[0]);
	d->netdev_mtu = netdev_mtu(d->ndev);
	return 0;
}

/* The first line the library wrote on stderr (fd), without its "uroce: ". */
static void first_line(int fd, char *out, size_t len)
{
	char buf[512], *nl, *s = buf;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	out[0] = '\0';
	if (n <= 0)
		return;
	buf[n] = '\0';
	nl = strchr(buf, '\n');
	if (nl)
		*nl = '\0';
	if (!strncmp(s, "uroce: ", 7))
		s += 7;
	snprintf(out, len, "%s", s);
}

static void pass_on(int fd)
{
	char buf[4096];
	off_t off = 0;
	ssize_t n;

	while ((n = pread(fd, buf, sizeof(buf), off)) > 0) {
		if (write(STDERR_FILENO, buf, (size_t)n) != n)
			break;
		off += n;
	}
}

/* How often the device is opened again when another `uroce run` took the
 * address it chose. */
#define RUN_PROBE_TRIES 32

/* The program names its address (UROCE_ADDR or UROCE_IFNAME): the
 * library does not choose it. */
static bool addr_named(void)
{
	const char *a = getenv("UROCE_ADDR"), *i = getenv("UROCE_IFNAME");

	return (a && *a) || (i && *i);
}

/* The program names its address and may share it: several `uroce run`s
 * may then start programs on it at once (one MPI job's ranks on a host's
 * one address). */
static bool addr_named_shared(void)
{
	const char *s = getenv("UROCE_SHARE");

	return addr_named() && !(s && !strcmp(s, "0"));
}

/*
 * Hold d's address for the program (uroce_host.h) while our device still
 * has it bound, so that nobody can take it in between: the socket that
 * holds it in *hold, without CLOEXEC (the program inherits it); 0 or
 * -errno.  A named, shared address another `uroce run` holds already needs
 * no second hold (the reservation only keeps the library's scan for a
 * free address off it, and one holder does that): *hold is -1 then.
 */
static int hold_addr(const struct run_dev *d, int *hold, char *err, size_t len)
{
	int fd = uroce_addr_reserve(d->addr);

	*hold = -1;
	if (fd == -EADDRINUSE && addr_named_shared())
		return 0;
	if (fd < 0) {
		snprintf(err, len, "%s: %s", d->addr,
			 fd == -EADDRINUSE ?
				 "another uroce run holds it for its program" :
				 strerror(-fd));
		return fd;
	}
	if (fcntl(fd, F_SETFD, 0)) {
		close(fd);
		snprintf(err, len, "%s: %s", d->addr, strerror(errno));
		return -EBADF;
	}
	*hold = fd;
	return 0;
}

/*
 * Open the device with the environment the program will have and fill d;
 * with hold, also hold its address for the program (*hold: the socket).
 * What the library prints on the way is kept back: on failure its first
 * line becomes err, on success it is passed on.  UROCE_PCAP is hidden
 * meanwhile (the capture is the program's).
 */
int run_probe(const char *libdir, struct run_dev *d, int *hold, char *err,
	      size_t len)
{
	struct verbs_api api;
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	char *pcap = getenv("UROCE_PCAP");
	char said[512] = "";
	int n = 0, cap, saved, ret, tries;

	memset(d, 0, sizeof(*d));
	err[0] = '\0';
	ret = load_verbs(libdir, &api, err, len);
	if (ret)
		return ret;
	pcap = pcap ? strdup(pcap) : NULL;
	unsetenv("UROCE_PCAP");
	cap = memfd_create("uroce-run-probe", MFD_CLOEXEC);
	saved = cap >= 0 ? fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3) : -1;
	if (saved >= 0)
		dup2(cap, STDERR_FILENO);

	for (tries = 1;; tries++) {
		list = api.get_device_list(&n);
		ret = list && n > 0 ? 0 : -(errno ? errno : ENODEV);
		if (!ret) {
			snprintf(d->name, sizeof(d->name), "%s", list[0]->name);
			snprintf(d->uverbs, sizeof(d->uverbs), "%s",
				 list[0]->dev_name);
			ctx = api.open_device(list[0]);
			ret = ctx ? query(&api, ctx, d) :
				    -(errno ? errno : ENODEV);
		}
		/* before the close, which may unbind the address */
		if (!ret && hold)
			ret = hold_addr(d, hold, err, len);
		if (ctx)
			api.close_device(ctx);
		if (list)
			api.free_device_list(list);
		ctx = NULL;
		list = NULL;
		/* another uroce run reserved the address the library chose
		 * (the library checks for that, but should it still come to
		 * pass): the next open skips it; never fatal while the scan
		 * has addresses left */
		if (ret != -EADDRINUSE || !hold || addr_named() ||
		    tries == RUN_PROBE_TRIES)
			break;
		memset(d, 0, sizeof(*d));
		err[0] = '\0';
	}

	if (saved >= 0) {
		dup2(saved, STDERR_FILENO);
		close(saved);
		first_line(cap, said, sizeof(said));
		if (!ret)
			pass_on(cap); /* warnings: the user should see them */
	}
	if (cap >= 0)
		close(cap);
	if (ret && !err[0])
		snprintf(err, len, "%s",
			 said[0] ? said : "cannot open the uroce device");
	if (ret && !strcmp(err, "cannot open the uroce device"))
		snprintf(err, len, "cannot open the uroce device: %s",
			 strerror(-ret));
	if (pcap) {
		setenv("UROCE_PCAP", pcap, 1);
		free(pcap);
	}
	return ret;
}

/* The library's stats segment carries our pid, which the program keeps. */
void run_probe_drop_segment(void)
{
	char name[64];

	snprintf(name, sizeof(name), "/%s%d", UROCE_SHM_PREFIX, (int)getpid());
	shm_unlink(name);
}
