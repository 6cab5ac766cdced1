/* SPDX-License-Identifier: MIT */
/*
 * `uroce run` and `uroce doctor`: what their files share.
 *
 *	run.c		options, the program, the environment, exec
 *	run_probe.c	the device as the program will see it (our library,
 *			loaded and asked through the verbs API)
 *	run_ns.c	namespaces; /dev and /sys/class covered by copies
 *			that hold the RDMA entries a kernel device would add
 *	run_sysfs.c	the /sys/class/infiniband tree of the device
 *	doctor.c	`uroce doctor`
 */
#ifndef UROCE_TOOL_RUN_H
#define UROCE_TOOL_RUN_H

#include <infiniband/verbs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>

#define RUN_MAX_GIDS 16

/* What the program's device reports, from our libibverbs itself. */
struct run_dev {
	char name[IBV_SYSFS_NAME_MAX];	 /* uroce0 */
	char uverbs[IBV_SYSFS_NAME_MAX]; /* uverbs0 */
	char addr[INET6_ADDRSTRLEN];	 /* the address it bound */
	char ndev[IF_NAMESIZE];		 /* the interface holding it */
	unsigned int netdev_mtu;
	struct ibv_device_attr dattr;
	struct ibv_port_attr pattr;
	uint16_t pkey0; /* host order */
	int ngids;
	union ibv_gid gid[RUN_MAX_GIDS];
	bool gid_ex[RUN_MAX_GIDS];	 /* type and ndev known */
	uint32_t gid_type[RUN_MAX_GIDS]; /* enum ibv_gid_type */
	char gid_ndev[RUN_MAX_GIDS][IF_NAMESIZE];
};

/* run_probe.c */
int run_find_libdir(char *out, size_t len);
int run_probe(const char *libdir, struct run_dev *d, int *hold, char *err,
	      size_t len);
void run_probe_drop_segment(void);

/* run_ns.c */
int run_ns_check(char *why, size_t len);
int run_ns_enter(char *why, size_t len);
int run_ns_dev(const struct run_dev *d, char *why, size_t len);
int run_ns_seal(char *why, size_t len);

/* run_sysfs.c */
int run_sysfs_write(const struct run_dev *d, char *why, size_t len);
int run_write_file(const char *path, int flags, const char *text);

/* doctor.c, run.c: subcommands of uroce */
int uroce_cmd_run(int argc, char **argv);
int uroce_cmd_doctor(int argc, char **argv);

#endif
