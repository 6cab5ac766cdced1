// SPDX-License-Identifier: MIT
/*
 * The program's view of /dev and /sys/class (docs/run.md,
 * "/dev and /sys/class are covered, not edited").
 *
 * Programs that find RDMA devices outside libibverbs look for
 * /dev/infiniband/uverbs0 (UCX: a character device it may open; it never
 * does) and read /sys/class/infiniband (NCCL, Mooncake, NIXL).  uroce has
 * no kernel device, and neither directory can be made inside devtmpfs or
 * sysfs, so the process gets a mount namespace of its own (with a user
 * namespace when it is not root) in which /dev and /sys/class are each
 * covered by a tmpfs holding every entry the originals hold, bound from
 * them, plus the RDMA entries a kernel device would add.  /dev/infiniband
 * holds binds of /dev/null: a character device anyone may open, from
 * the host's devtmpfs, so a user namespace's nodev rule does not apply.
 *
 * Nothing is made on the host: the namespace, and every mount in it, ends
 * with the last process in it, however it ends.  A host's own RDMA
 * entries are hidden in the namespace only, where our libibverbs would
 * not use them anyway.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run.h"

/* The directories covered, and the entries of theirs we provide. */
static const char *const dev_ours[] = { "infiniband", NULL };
static const char *const class_ours[] = {
	"infiniband", "infiniband_verbs", "infiniband_mad", "infiniband_cm",
	NULL,
};

static const struct {
	const char *dir;
	const char *const *ours;
} covered[] = {
	{ "/dev", dev_ours },
	{ "/sys/class", class_ours },
};

/* The namespaces to try, by who we are: root needs no user namespace
 * (and keeps its capabilities on the host's network stack without one). */
static const struct {
	int flags;
	bool root_only;
	const char *what;
} ns_tries[] = {
	{ CLONE_NEWNS, true, "a mount namespace" },
	{ CLONE_NEWUSER | CLONE_NEWNS, false, "user and mount namespaces" },
};

/* Keep our own uid and gid inside the user namespace. */
static int map_ids(char *why, size_t len)
{
	char map[64];
	int err;

	err = run_write_file("/proc/self/setgroups", 0, "deny");
	if (err && err != -ENOENT)
		goto fail;
	snprintf(map, sizeof(map), "%u %u 1", (unsigned int)geteuid(),
		 (unsigned int)geteuid());
	err = run_write_file("/proc/self/uid_map", 0, map);
	if (err)
		goto fail;
	snprintf(map, sizeof(map), "%u %u 1", (unsigned int)getegid(),
		 (unsigned int)getegid());
	err = run_write_file("/proc/self/gid_map", 0, map);
	if (!err)
		return 0;
fail:
	snprintf(why, len, "cannot map our ids in the user namespace: %s",
		 strerror(-err));
	return err;
}

static bool is_ours(const char *name, const char *const *ours)
{
	for (; *ours; ours++)
		if (!strcmp(name, *ours))
			return true;
	return false;
}

/* Give the copy at dir/name what the original (old/name) is. */
static int copy_entry(int old, const char *dir, const char *name)
{
	char src[64 + NAME_MAX], dst[PATH_MAX], link[PATH_MAX];
	struct stat st;
	ssize_t n;
	int fd;

	if (fstatat(old, name, &st, AT_SYMLINK_NOFOLLOW))
		return -errno;
	snprintf(src, sizeof(src), "/proc/self/fd/%d/%s", old, name);
	snprintf(dst, sizeof(dst), "%s/%s", dir, name);
	if (S_ISLNK(st.st_mode)) {
		n = readlinkat(old, name, link, sizeof(link) - 1);
		if (n < 0)
			return -errno;
		link[n] = '\0';
		return symlink(link, dst) ? -errno : 0;
	}
	if (S_ISDIR(st.st_mode)) {
		if (mkdir(dst, st.st_mode & 07777))
			return -errno;
	} else {
		fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			return -errno;
		close(fd);
	}
	return mount(src, dst, NULL, MS_BIND | MS_REC, NULL) ? -errno : 0;
}

/* Cover dir with a tmpfs that holds what dir held, but for ours. */
static int cover(const char *dir, const char *const *ours, char *why, size_t len)
{
	struct dirent *e;
	DIR *d = NULL;
	int old, err = 0;

	old = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (old < 0) {
		err = -errno;
		snprintf(why, len, "cannot open %s: %s", dir, strerror(-err));
		return err;
	}
	if (mount("uroce", dir, "tmpfs", MS_NOSUID, "mode=755,size=1m")) {
		err = -errno;
		snprintf(why, len, "cannot mount a tmpfs on %s: %s", dir,
			 strerror(-err));
		goto out;
	}
	d = fdopendir(fcntl(old, F_DUPFD_CLOEXEC, 3));
	if (!d) {
		err = -errno;
		snprintf(why, len, "cannot read %s: %s", dir, strerror(-err));
		goto out;
	}
	while (!err && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    is_ours(e->d_name, ours))
			continue;
		err = copy_entry(old, dir, e->d_name);
		if (err)
			snprintf(why, len, "cannot give the program %s/%s: %s",
				 dir, e->d_name, strerror(-err));
	}
	for (; !err && *ours; ours++) {
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/%s", dir, *ours);
		if (mkdir(path, 0755)) {
			err = -errno;
			snprintf(why, len, "cannot make %s: %s", path,
				 strerror(-err));
		}
	}
out:
	if (d)
		closedir(d);
	close(old);
	return err;
}

/*
 * Move this process into namespaces of its own and cover /dev and
 * /sys/class.  Must run before any thread is started (unshare of a user
 * namespace wants a single-threaded process).
 */
int run_ns_enter(char *why, size_t len)
{
	bool root = geteuid() == 0;
	int err = -EPERM;
	size_t i;

	for (i = 0; i < sizeof(ns_tries) / sizeof(ns_tries[0]); i++) {
		if (ns_tries[i].root_only && !root)
			continue;
		if (!unshare(ns_tries[i].flags)) {
			err = 0;
			break;
		}
		err = -errno;
		snprintf(why, len, "cannot make %s: %s", ns_tries[i].what,
			 strerror(-err));
	}
	if (err)
		return err;
	if (ns_tries[i].flags & CLONE_NEWUSER) {
		err = map_ids(why, len);
		if (err)
			return err;
	}
	/* nothing we mount may reach the host's namespace */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) {
		err = -errno;
		snprintf(why, len, "cannot make our mounts private: %s",
			 strerror(-err));
		return err;
	}
	for (i = 0; i < sizeof(covered) / sizeof(covered[0]); i++) {
		err = cover(covered[i].dir, covered[i].ours, why, len);
		if (err)
			return err;
	}
	return 0;
}

/*
 * Whether run_ns_enter would work here, tried in a child so that a
 * half-made namespace (a kernel that lets us unshare but not mount,
 * like AppArmor's restriction on Ubuntu) is never the program's.
 */
int run_ns_check(char *why, size_t len)
{
	int pfd[2], status;
	ssize_t n;
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return -errno;
	}
	if (!pid) {
		char msg[256] = "";

		close(pfd[0]);
		if (run_ns_enter(msg, sizeof(msg))) {
			n = write(pfd[1], msg, strlen(msg));
			_exit(n < 0 ? 2 : 1);
		}
		_exit(0);
	}
	close(pfd[1]);
	n = read(pfd[0], why, len - 1);
	why[n > 0 ? n : 0] = '\0';
	close(pfd[0]);
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	if (WIFEXITED(status) && !WEXITSTATUS(status))
		return 0;
	if (!why[0])
		snprintf(why, len, "the namespace check failed (status %d)",
			 status);
	return -EPERM;
}

/* /dev/infiniband/<uverbs> and rdma_cm, as /dev/null: UCX only stat()s
 * and access()es them, and a program that opens one opens /dev/null. */
int run_ns_dev(const struct run_dev *d, char *why, size_t len)
{
	const char *nodes[] = { d->uverbs, "rdma_cm" };
	char path[PATH_MAX];
	size_t i;
	int fd;

	for (i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
		snprintf(path, sizeof(path), "/dev/infiniband/%s", nodes[i]);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 || close(fd) ||
		    mount("/dev/null", path, NULL, MS_BIND, NULL)) {
			int err = -errno;

			snprintf(why, len, "cannot make %s: %s", path,
				 strerror(-err));
			return err;
		}
	}
	return 0;
}

/* The copies are the program's to read, not to change. */
int run_ns_seal(char *why, size_t len)
{
	size_t i;

	for (i = 0; i < sizeof(covered) / sizeof(covered[0]); i++) {
		if (mount(NULL, covered[i].dir, NULL,
			  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID, NULL)) {
			int err = -errno;

			snprintf(why, len, "cannot make %s read-only: %s",
				 covered[i].dir, strerror(-err));
			return err;
		}
	}
	return 0;
}
