// SPDX-License-Identifier: MIT
/*
 * Finds RDMA devices the way NCCL's and Mooncake's transfer engines do
 * before (and besides) libibverbs: /sys/class/infiniband/<dev>/ for the
 * device (node GUID, firmware, its device/ link and NUMA node), ports/<n>/
 * for state, physical state, link layer, rate and LID, ports/<n>/gids/<i>
 * with gid_attrs/types/<i> ("RoCE v2") and gid_attrs/ndevs/<i> for the
 * GIDs, and /sys/class/infiniband_verbs/uverbs<k>/ibdev to find
 * /dev/infiniband/uverbs<k>, which must be a character device we may read
 * and write (UCX's test).  Then it opens the same device through
 * libibverbs and checks that both say the same.
 *
 *	sysfs_reader DEVICE	exit 0 if DEVICE is found, with an ACTIVE
 *				Ethernet port whose GID 0 is RoCE v2, and
 *				sysfs agrees with the verbs
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CLASS "/sys/class/infiniband"

static int failures;

static void bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void bad(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	printf("MISMATCH: ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	failures++;
}

/* One sysfs attribute without its newline, or "" if it cannot be read. */
static const char *attr(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static const char *attr(char *buf, size_t len, const char *fmt, ...)
{
	char path[PATH_MAX];
	va_list ap;
	FILE *f;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	buf[0] = '\0';
	f = fopen(path, "r");
	if (!f)
		return buf;
	if (!fgets(buf, (int)len, f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

static void expect(const char *what, const char *sysfs, const char *verbs)
{
	if (strcmp(sysfs, verbs))
		bad("%s: sysfs '%s', verbs '%s'", what, sysfs, verbs);
}

static void gid_text(const union ibv_gid *g, char *out, size_t len)
{
	int k, n = 0;

	for (k = 0; k < 16; k += 2)
		n += snprintf(out + n, len - (size_t)n, "%02x%02x%s", g->raw[k],
			      g->raw[k + 1], k < 14 ? ":" : "");
}

/* /dev/infiniband/<uverbs> of dev, found through infiniband_verbs */
static int check_uverbs(const char *dev)
{
	char buf[256], path[PATH_MAX];
	struct dirent *e;
	struct stat st;
	int found = 0;
	DIR *d = opendir("/sys/class/infiniband_verbs");

	if (!d) {
		bad("no /sys/class/infiniband_verbs");
		return -1;
	}
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "uverbs", 6) ||
		    strcmp(attr(buf, sizeof(buf),
				"/sys/class/infiniband_verbs/%s/ibdev",
				e->d_name),
			   dev))
			continue;
		snprintf(path, sizeof(path), "/dev/infiniband/%s", e->d_name);
		if (stat(path, &st) || !S_ISCHR(st.st_mode) ||
		    access(path, R_OK | W_OK))
			bad("%s is not a character device we may open", path);
		else
			printf("%s: %s\n", dev, path);
		found = 1;
	}
	closedir(d);
	if (!found)
		bad("no infiniband_verbs entry names %s", dev);
	return 0;
}

static void check_verbs(const char *dev, const char *guid, const char *fw,
			const char *state, const char *layer, const char *lid,
			const char *gid0, const char *type0)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct ibv_gid_entry ge;
	struct ibv_context *ctx = NULL;
	char buf[128];
	uint64_t g;
	int i;

	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev))
			ctx = ibv_open_device(list[i]);
	if (!ctx) {
		bad("libibverbs has no device %s", dev);
		goto out;
	}
	if (ibv_query_device(ctx, &da) || ibv_query_port(ctx, 1, &pa) ||
	    ibv_query_gid_ex(ctx, 1, 0, &ge, 0)) {
		bad("cannot query %s: %s", dev, strerror(errno));
		goto out;
	}
	g = be64toh(da.node_guid);
	snprintf(buf, sizeof(buf), "%04x:%04x:%04x:%04x",
		 (unsigned int)(g >> 48) & 0xffff,
		 (unsigned int)(g >> 32) & 0xffff,
		 (unsigned int)(g >> 16) & 0xffff, (unsigned int)g & 0xffff);
	expect("node_guid", guid, buf);
	expect("fw_ver", fw, da.fw_ver);
	snprintf(buf, sizeof(buf), "%d: ", pa.state);
	if (strncmp(state, buf, strlen(buf)))
		bad("port state: sysfs '%s', verbs %d", state, pa.state);
	expect("link_layer", layer,
	       pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" :
							  "InfiniBand");
	snprintf(buf, sizeof(buf), "0x%x", pa.lid);
	expect("lid", lid, buf);
	gid_text(&ge.gid, buf, sizeof(buf));
	expect("gid 0", gid0, buf);
	expect("gid 0 type", type0,
	       ge.gid_type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" : "not RoCE v2");
	ibv_close_device(ctx);
out:
	if (list)
		ibv_free_device_list(list);
}

int main(int argc, char **argv)
{
	char guid[64], fw[64], state[64], phys[64], layer[64], rate[64],
		lid[32], gid0[64], type0[64], ndev0[64], numa[32], buf[64],
		real[PATH_MAX], path[PATH_MAX];
	const char *want = argc > 1 ? argv[1] : "uroce0";
	struct dirent *e;
	int found = 0;
	DIR *d = opendir(CLASS);

	if (!d) {
		printf("no %s: %s\n", CLASS, strerror(errno));
		return 1;
	}
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		printf("device %s: node_type '%s'\n", e->d_name,
		       attr(buf, sizeof(buf), CLASS "/%s/node_type", e->d_name));
		if (strcmp(e->d_name, want))
			continue;
		found = 1;
		attr(guid, sizeof(guid), CLASS "/%s/node_guid", want);
		attr(fw, sizeof(fw), CLASS "/%s/fw_ver", want);
		snprintf(path, sizeof(path), CLASS "/%s/device", want);
		if (!realpath(path, real))
			bad("%s: %s", path, strerror(errno));
		attr(numa, sizeof(numa), CLASS "/%s/device/numa_node", want);
		attr(state, sizeof(state), CLASS "/%s/ports/1/state", want);
		attr(phys, sizeof(phys), CLASS "/%s/ports/1/phys_state", want);
		attr(layer, sizeof(layer), CLASS "/%s/ports/1/link_layer", want);
		attr(rate, sizeof(rate), CLASS "/%s/ports/1/rate", want);
		attr(lid, sizeof(lid), CLASS "/%s/ports/1/lid", want);
		attr(gid0, sizeof(gid0), CLASS "/%s/ports/1/gids/0", want);
		attr(type0, sizeof(type0),
		     CLASS "/%s/ports/1/gid_attrs/types/0", want);
		attr(ndev0, sizeof(ndev0),
		     CLASS "/%s/ports/1/gid_attrs/ndevs/0", want);
		printf("%s: node_guid %s fw_ver %s numa_node %s\n", want, guid,
		       fw, numa);
		printf("%s: port 1 state '%s' phys_state '%s' link_layer '%s' "
		       "rate '%s' lid %s\n",
		       want, state, phys, layer, rate, lid);
		printf("%s: gid 0 %s type '%s' ndev '%s'\n", want, gid0, type0,
		       ndev0);
		if (strcmp(state, "4: ACTIVE") || strcmp(phys, "5: LinkUp"))
			bad("port 1 is not ACTIVE/LinkUp");
		if (strcmp(layer, "Ethernet") || !strstr(rate, "Gb/sec"))
			bad("port 1 is no Ethernet port with a rate");
		if (!gid0[0] ||
		    !strcmp(gid0, "0000:0000:0000:0000:0000:0000:0000:0000"))
			bad("GID 0 is empty");
		if (strcmp(type0, "RoCE v2") || !ndev0[0])
			bad("GID 0 is not RoCE v2 on a netdev");
		check_uverbs(want);
		check_verbs(want, guid, fw, state, layer, lid, gid0, type0);
	}
	closedir(d);
	if (!found) {
		printf("FAIL: %s is not in %s\n", want, CLASS);
		return 1;
	}
	if (failures) {
		printf("FAIL: %d mismatches\n", failures);
		return 1;
	}
	printf("PASS: %s found through sysfs, as the verbs report it\n", want);
	return 0;
}
