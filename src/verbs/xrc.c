// SPDX-License-Identifier: MIT
/*
 * XRC domains (ibv_open_xrcd / ibv_close_xrcd) and SRQ numbers.
 *
 * As in the kernel, handles opened on one file (fd, O_CREAT / O_EXCL in
 * oflags) share one domain, fd -1 makes a private one.  The device is
 * per process, so the sharing is within the process: another process that
 * opens the same file gets a domain of its own (its TGT QPs and SRQs live
 * in its own device anyway).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "uroce.h"

struct uroce_xrcd_dom {
	dev_t st_dev;
	ino_t st_ino;
	bool has_file;
	unsigned int handles;
	struct uroce_xrcd_dom *next; /* on doms, if has_file */
};

/* domains bound to a file; guarded by doms_lock */
static pthread_mutex_t doms_lock = PTHREAD_MUTEX_INITIALIZER;
static struct uroce_xrcd_dom *doms;

static struct uroce_xrcd_dom *find_dom(const struct stat *st)
{
	struct uroce_xrcd_dom *d;

	for (d = doms; d; d = d->next)
		if (d->st_dev == st->st_dev && d->st_ino == st->st_ino)
			return d;
	return NULL;
}

/* the domain for fd (-1: a new private one); doms_lock held */
static int get_dom(int fd, int oflags, struct uroce_xrcd_dom **out)
{
	struct uroce_xrcd_dom *d = NULL;
	struct stat st;

	uroce_assert_held(&doms_lock);
	if (fd != -1) {
		if (fstat(fd, &st))
			return EBADF;
		d = find_dom(&st);
		/* the kernel's answers (ib_uverbs_open_xrcd) */
		if (!d && !(oflags & O_CREAT))
			return EAGAIN;
		if (d && (oflags & O_EXCL))
			return EINVAL;
	}
	if (!d) {
		d = calloc(1, sizeof(*d));
		if (!d)
			return ENOMEM;
		if (fd != -1) {
			d->st_dev = st.st_dev;
			d->st_ino = st.st_ino;
			d->has_file = true;
			d->next = doms;
			doms = d;
		}
	}
	d->handles++;
	*out = d;
	return 0;
}

static void put_dom(struct uroce_xrcd_dom *d)
{
	struct uroce_xrcd_dom **pp;

	if (--d->handles)
		return;
	for (pp = &doms; *pp; pp = &(*pp)->next) {
		if (*pp == d) {
			*pp = d->next;
			break;
		}
	}
	free(d);
}

struct ibv_xrcd *uroce_open_xrcd(struct ibv_context *ctx,
				 struct ibv_xrcd_init_attr *attr)
{
	const uint32_t need = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	struct uroce_xrcd *xrcd;
	int err;

	if (!attr || (attr->comp_mask & ~need)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((attr->comp_mask & need) != need) {
		errno = EINVAL;
		return NULL;
	}
	xrcd = calloc(1, sizeof(*xrcd));
	if (!xrcd) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&doms_lock);
	err = get_dom(attr->fd, attr->oflags, &xrcd->dom);
	pthread_mutex_unlock(&doms_lock);
	if (err) {
		free(xrcd);
		errno = err;
		return NULL;
	}
	xrcd->ibxrcd.context = ctx;
	return &xrcd->ibxrcd;
}

int uroce_close_xrcd(struct ibv_xrcd *ibxrcd)
{
	struct uroce_xrcd *xrcd = to_uxrcd(ibxrcd);

	/* SRQs and TGT QPs made on this handle must go first */
	if (atomic_load(&xrcd->refs))
		return EBUSY;
	pthread_mutex_lock(&doms_lock);
	put_dom(xrcd->dom);
	pthread_mutex_unlock(&doms_lock);
	free(xrcd);
	return 0;
}

int uroce_get_srq_num(struct ibv_srq *ibsrq, uint32_t *srq_num)
{
	struct uroce_srq *srq = to_usrq(ibsrq);

	if (!srq_num)
		return EINVAL;
	*srq_num = srq->srqn;
	return 0;
}
