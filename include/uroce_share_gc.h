/* SPDX-License-Identifier: MIT */
/*
 * Garbage collection of shared-address registries (docs/shared.md,
 * "The registry"), for the library (net/share.c, whenever
 * it starts a new group) and the tool (`uroce devices`, `uroce doctor`).
 *
 * A registry /dev/shm/uroce-addr.<netns>.<address> is removed by the last
 * member that leaves; one whose last member was SIGKILLed stays, and the
 * next process on that address reuses it, but an address nobody uses
 * again (a test's namespace, deleted since) left it for good.  A registry
 * is garbage when no slot holds a live process (pid and start time, the
 * rule the members' own reaping uses).  It is removed under the
 * registry's OFD lock, after the same check, so it is safe against a
 * process joining at the same time: one that holds the lock first is a
 * live member when we look; one that opened the file before we removed it
 * finds it unlinked once it has the lock and opens a new one (open_seg).
 * A registry whose lock is held is left for the next collection.
 */
#ifndef UROCE_SHARE_GC_H
#define UROCE_SHARE_GC_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uroce_shm.h"

/* whether any slot of seg holds a process that still runs */
static inline int uroce_share_seg_live(const struct uroce_share_seg *seg)
{
	unsigned int s;

	for (s = 1; s < UROCE_SHARE_SLOTS; s++) {
		int pid = __atomic_load_n(&seg->slot[s].pid, __ATOMIC_ACQUIRE);

		if (pid > 0 &&
		    uroce_proc_start_time(pid) == seg->slot[s].start_time)
			return 1;
	}
	return 0;
}

/*
 * Remove the registry named name in dirfd if every member is dead: 1 if
 * removed, 0 if kept (live, busy, not a registry of ours), or -errno.
 */
static inline int uroce_share_gc_one(int dirfd, const char *name)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = 1 };
	struct uroce_share_seg seg;
	struct stat st;
	int fd, ret = 0;

	fd = openat(dirfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fcntl(fd, F_OFD_SETLK, &fl)) /* busy: someone is at it */
		goto out;
	if (fstat(fd, &st) || !st.st_nlink || !S_ISREG(st.st_mode) ||
	    st.st_size < (off_t)sizeof(seg) ||
	    pread(fd, &seg, sizeof(seg), 0) != (ssize_t)sizeof(seg) ||
	    seg.magic != UROCE_SHARE_MAGIC)
		goto out;
	if (!uroce_share_seg_live(&seg))
		ret = unlinkat(dirfd, name, 0) ? -errno : 1;
out:
	close(fd); /* (drops the lock) */
	return ret;
}

/* Collect every dead registry this process may open: how many went. */
static inline int uroce_share_gc(void)
{
	DIR *d = opendir(UROCE_SHM_DIR);
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, UROCE_SHARE_PREFIX,
			     strlen(UROCE_SHARE_PREFIX)) &&
		    uroce_share_gc_one(dirfd(d), e->d_name) > 0)
			n++;
	closedir(d);
	return n;
}

#endif /* UROCE_SHARE_GC_H */
