// SPDX-License-Identifier: MIT
/*
 * /sys/class/infiniband/<dev> and /sys/class/infiniband_verbs/<uverbs>
 * for the program's device, in the files and formats the kernel's
 * drivers/infiniband/core/sysfs.c and device.c give an RoCE device
 * (rdma_rxe's, for the attributes that are the driver's), every value
 * from what our libibverbs reported (run_probe.c).  Written into the
 * tmpfs that covers /sys/class in the program's namespace (run_ns.c).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"

#define CLASS "/sys/class"

typedef void fmt_fn(const struct run_dev *d, int i, char *buf, size_t len);

/* Which files an attribute is: one, or path/<i> for each GID index i,
 * or only for the used GID slots (those with a type). */
enum attr_scope {
	ONCE,
	EACH_GID,
	USED_GID
};

struct attr {
	const char *path;
	fmt_fn *fmt;
	enum attr_scope scope;
};

static const char *const port_states[] = {
	"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER",
};

static const char *const phys_states[] = {
	[1] = "Sleep",	  [2] = "Polling",
	[3] = "Disabled", [4] = "PortConfigurationTraining",
	[5] = "LinkUp",	  [6] = "LinkErrorRecovery",
	[7] = "Phy Test",
};

/* IB speed bit -> its name and lane rate in 100 Mb/s (sysfs.c rate_show) */
static const struct {
	unsigned int bit;
	const char *name;
	unsigned int rate;
} speeds[] = {
	{ 1, "", 25 },	      { 2, " DDR", 50 },     { 4, " QDR", 100 },
	{ 8, " FDR10", 100 }, { 16, " FDR", 140 },   { 32, " EDR", 250 },
	{ 64, " HDR", 500 },  { 128, " NDR", 1000 }, { 256, " XDR", 2000 },
};

/* IB width bit -> lanes */
static const struct {
	unsigned int bit, lanes;
} widths[] = {
	{ 1, 1 }, { 2, 4 }, { 4, 8 }, { 8, 12 }, { 16, 2 },
};

static void put_guid(__be64 guid, char *buf, size_t len)
{
	uint64_t g = be64toh(guid);

	snprintf(buf, len, "%04x:%04x:%04x:%04x\n",
		 (unsigned int)(g >> 48) & 0xffff,
		 (unsigned int)(g >> 32) & 0xffff,
		 (unsigned int)(g >> 16) & 0xffff, (unsigned int)g & 0xffff);
}

static void fmt_node_type(const struct run_dev *d, int i, char *buf, size_t len)
{
	snprintf(buf, len, "1: CA\n"); /* IBV_NODE_CA, ours always */
}

static void fmt_node_guid(const struct run_dev *d, int i, char *buf, size_t len)
{
	put_guid(d->dattr.node_guid, buf, len);
}

static void fmt_sys_guid(const struct run_dev *d, int i, char *buf, size_t len)
{
	put_guid(d->dattr.sys_image_guid, buf, len);
}

static void fmt_node_desc(const struct run_dev *d, int i, char *buf, size_t len)
{
	char host[64] = "";

	gethostname(host, sizeof(host) - 1);
	snprintf(buf, len, "%s %s\n", host, d->name);
}

static void fmt_fw_ver(const struct run_dev *d, int i, char *buf, size_t len)
{
	snprintf(buf, len, "%s\n", d->dattr.fw_ver);
}

static void fmt_hca_type(const struct run_dev *d, int i, char *buf, size_t len)
{
	snprintf(buf, len, "uroce\n");
}

static void fmt_hw_rev(const struct run_dev *d, int i, char *buf, size_t len)
{
	snprintf(buf, len, "%x\n", d->dattr.hw_ver);
}

static void fmt_state(const struct run_dev *d, int i, char *buf, size_t len)
{
	unsigned int s = d->pattr.state;

	snprintf(buf, len, "%u: %s\n", s, s < 6 ? port_states[s] : "UNKNOWN");
}

static void fmt_phys_state(const struct run_dev *d, int i, char *buf, size_t len)
{
	unsigned int s = d->pattr.phys_state;

	snprintf(buf, len, "%u: %s\n", s,
		 s < 8 && phys_states[s] ? phys_states[s] : "<unknown>");
}

static void fmt_link_layer(const struct run_dev *d, int i, char *buf, size_t len)
{
	snprintf(buf, len, "%s\n",
		 d->pattr.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" :
								  "InfiniBand");
}

static void fmt_rate(const struct run_dev *d, int i, char *buf, size_t len)
{
	unsigned int rate = 25, lanes = 1, k;
	const char *name = "";

	for (k = 0; k < sizeof(speeds) / sizeof(speeds[0]); k++)
		if (speeds[k].bit == d->pattr.active_speed) {
			rate = speeds[k].rate;
			name = speeds[k].name;
		}
	for (k = 0; k < sizeof(widths) / sizeof(widths[0]); k++)
		if (widths[k].bit == d->pattr.active_width)
			lanes = widths[k].lanes;
	rate *= lanes;
	snprintf(buf, len, "%u%s Gb/sec (%uX%s)\n", rate / 10,
		 rate % 10 ? ".5" : "", lanes, name);
}

static void fmt_lid(const struct run_dev *d, int i, char *buf, size_t len)
{
	snprintf(buf, len, "0x%x\n", d->pattr.lid);
}

static void fmt_sm_lid(const struct run_dev *d, int i, char *buf, size_t len)
{
	snprintf(buf, len, "0x%x\n", d->pattr.sm_lid);
}

static void fmt_lmc(const struct run_dev *d, int i, char *buf, size_t len)
{
	snprintf(buf, len, "%u\n", d->pattr.lmc);
}

static void fmt_sm_sl(const struct run_dev *d, int i, char *buf, size_t len)
{
	snprintf(buf, len, "%u\n", d->pattr.sm_sl);
}

static void fmt_cap_mask(const struct run_dev *d, int i, char *buf, size_t len)
{
	snprintf(buf, len, "0x%08x\n", d->pattr.port_cap_flags);
}

static void fmt_pkey(const struct run_dev *d, int i, char *buf, size_t len)
{
	snprintf(buf, len, "0x%04x\n", d->pkey0);
}

static void fmt_gid(const struct run_dev *d, int i, char *buf, size_t len)
{
	const uint8_t *g = d->gid[i].raw;
	int k, n = 0;

	for (k = 0; k < 16; k += 2)
		n += snprintf(buf + n, len - (size_t)n, "%02x%02x%s", g[k],
			      g[k + 1], k < 14 ? ":" : "\n");
}

static void fmt_gid_type(const struct run_dev *d, int i, char *buf, size_t len)
{
	snprintf(buf, len, "%s\n",
		 d->gid_type[i] == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" :
		 d->gid_type[i] == IBV_GID_TYPE_ROCE_V1 ? "IB/RoCE v1" :
							  "IB");
}

static void fmt_gid_ndev(const struct run_dev *d, int i, char *buf, size_t len)
{
	snprintf(buf, len, "%s\n", d->gid_ndev[i]);
}

static void fmt_numa(const struct run_dev *d, int i, char *buf, size_t len)
{
	snprintf(buf, len, "-1\n"); /* a virtual device: no NUMA node */
}

/* Every CPU is as near as any other to a device in the process. */
static void fmt_cpulist(const struct run_dev *d, int i, char *buf, size_t len)
{
	int fd = open("/sys/devices/system/cpu/online", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		snprintf(buf, len, "0\n");
	else
		buf[n] = '\0';
}

static const struct attr dev_attrs[] = {
	{ "node_type", fmt_node_type, ONCE },
	{ "node_guid", fmt_node_guid, ONCE },
	{ "sys_image_guid", fmt_sys_guid, ONCE },
	{ "node_desc", fmt_node_desc, ONCE },
	{ "fw_ver", fmt_fw_ver, ONCE },
	{ "hca_type", fmt_hca_type, ONCE },
	{ "hw_rev", fmt_hw_rev, ONCE },
	{ "ports/1/state", fmt_state, ONCE },
	{ "ports/1/phys_state", fmt_phys_state, ONCE },
	{ "ports/1/link_layer", fmt_link_layer, ONCE },
	{ "ports/1/rate", fmt_rate, ONCE },
	{ "ports/1/lid", fmt_lid, ONCE },
	{ "ports/1/sm_lid", fmt_sm_lid, ONCE },
	{ "ports/1/lid_mask_count", fmt_lmc, ONCE },
	{ "ports/1/sm_sl", fmt_sm_sl, ONCE },
	{ "ports/1/cap_mask", fmt_cap_mask, ONCE },
	{ "ports/1/pkeys/0", fmt_pkey, ONCE },
	{ "ports/1/gids", fmt_gid, EACH_GID },
	{ "ports/1/gid_attrs/types", fmt_gid_type, USED_GID },
	{ "ports/1/gid_attrs/ndevs", fmt_gid_ndev, USED_GID },
	{ "device/numa_node", fmt_numa, ONCE },
	{ "device/local_cpulist", fmt_cpulist, ONCE },
};

/* Write all of text to path, opened O_WRONLY with flags (O_CREAT: a new
 * file is read-only): 0 or -errno. */
int run_write_file(const char *path, int flags, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC | flags, 0444);
	ssize_t n;
	int err;

	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	err = n == (ssize_t)strlen(text) ? 0 : -(errno ? errno : EIO);
	close(fd);
	return err;
}

/* Write text to path, making its directories. */
static int put(const char *path, const char *text)
{
	char dir[PATH_MAX], *s;

	snprintf(dir, sizeof(dir), "%s", path);
	for (s = strchr(dir + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (mkdir(dir, 0755) && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	return run_write_file(path, O_CREAT | O_TRUNC, text);
}

static int put_attr(const struct run_dev *d, const struct attr *a, int i)
{
	char path[PATH_MAX], text[256];

	if (a->scope == ONCE)
		snprintf(path, sizeof(path), CLASS "/infiniband/%s/%s", d->name,
			 a->path);
	else
		snprintf(path, sizeof(path), CLASS "/infiniband/%s/%s/%d",
			 d->name, a->path, i);
	a->fmt(d, i, text, sizeof(text));
	return put(path, text);
}

/* infiniband_verbs: the uverbs character device's class entry */
static int put_uverbs(const struct run_dev *d)
{
	char path[PATH_MAX], text[IBV_SYSFS_NAME_MAX + 64];
	int err;

	err = put(CLASS "/infiniband_verbs/abi_version", "6\n");
	snprintf(path, sizeof(path), CLASS "/infiniband_verbs/%s/ibdev",
		 d->uverbs);
	snprintf(text, sizeof(text), "%s\n", d->name);
	if (!err)
		err = put(path, text);
	snprintf(path, sizeof(path), CLASS "/infiniband_verbs/%s/abi_version",
		 d->uverbs);
	if (!err)
		err = put(path, "1\n");
	snprintf(path, sizeof(path), CLASS "/infiniband_verbs/%s/device",
		 d->uverbs);
	snprintf(text, sizeof(text), "../../infiniband/%s/device", d->name);
	if (!err && symlink(text, path))
		err = -errno;
	return err;
}

int run_sysfs_write(const struct run_dev *d, char *why, size_t len)
{
	size_t k;
	int i, err = 0;

	for (k = 0; !err && k < sizeof(dev_attrs) / sizeof(dev_attrs[0]); k++) {
		const struct attr *a = &dev_attrs[k];

		for (i = 0; !err && i < (a->scope == ONCE ? 1 : d->ngids); i++)
			if (a->scope != USED_GID || d->gid_ex[i])
				err = put_attr(d, a, i);
	}
	if (!err)
		err = put_uverbs(d);
	if (err)
		snprintf(why, len, "cannot write %s/infiniband/%s: %s", CLASS,
			 d->name, strerror(-err));
	return err;
}
