// SPDX-License-Identifier: MIT
/*
 * A program that loads us with dlopen and unloads us with dlclose while
 * our threads run (Open MPI does, at MPI_Finalize: its components load
 * libfabric, which loads libibverbs and librdmacm) must not have code
 * unmapped under those threads (docs/architecture.md, "Threads and
 * unloading").  Each library is loaded, made to start its thread (the
 * device open: the progress thread; an id bound to an address: the CM
 * thread), dlclosed, and then must still be loaded (RTLD_NOLOAD finds it),
 * its thread still alive in /proc/self/task.
 *
 *   unload <dir of our libraries>
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

static int fail(const char *what, const char *detail)
{
	fprintf(stderr, "unload: FAIL: %s%s%s\n", what, detail ? ": " : "",
		detail ? detail : "");
	return 1;
}

static int threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static void *load(const char *dir, const char *name, int flags)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return dlopen(path, flags);
}

static struct ibv_context *volatile left_open;

/* the device open: the progress thread starts */
static int start_verbs(void *lib)
{
	struct ibv_device **(*get_list)(int *) = (struct ibv_device * *(*)(int *))
		dlsym(lib, "ibv_get_device_list");
	void (*free_list)(struct ibv_device **) = (void (*)(
		struct ibv_device **))dlsym(lib, "ibv_free_device_list");
	struct ibv_context *(*open_dev)(struct ibv_device *) =
		(struct ibv_context * (*)(struct ibv_device *))
			dlsym(lib, "ibv_open_device");
	struct ibv_device **list;
	int err = -1;

	if (!get_list || !free_list || !open_dev)
		return -1;
	list = get_list(NULL);
	/* (left open, as a program that unloads us may; kept here so that
	 * the leak checker sees it held, volatile: an optimiser would drop a
	 * store nothing reads) */
	if (list && list[0] && (left_open = open_dev(list[0])))
		err = 0;
	if (list)
		free_list(list);
	return err;
}

/* an id bound to an address: the CM thread starts */
static int start_cm(void *lib)
{
	struct rdma_event_channel *(*mk_chan)(
		void) = (struct rdma_event_channel * (*)(void))
		dlsym(lib, "rdma_create_event_channel");
	int (*mk_id)(struct rdma_event_channel *, struct rdma_cm_id **, void *,
		     enum rdma_port_space) =
		(int (*)(struct rdma_event_channel *, struct rdma_cm_id **,
			 void *, enum rdma_port_space))dlsym(lib,
							     "rdma_create_id");
	int (*bind)(struct rdma_cm_id *, struct sockaddr *) =
		(int (*)(struct rdma_cm_id *,
			 struct sockaddr *))dlsym(lib, "rdma_bind_addr");
	/* (the device's own address: binding another would move it) */
	const char *addr = getenv("UROCE_ADDR");
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;

	if (!mk_chan || !mk_id || !bind ||
	    (addr && inet_pton(AF_INET, addr, &sin.sin_addr) != 1))
		return -1;
	ch = mk_chan();
	if (!ch || mk_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    bind(id, (struct sockaddr *)&sin))
		return -1;
	return 0;
}

static int check(const char *dir, const char *name, int (*start)(void *))
{
	void *lib = load(dir, name, RTLD_NOW | RTLD_LOCAL);
	int before = threads(), after;

	if (!lib)
		return fail("dlopen", dlerror());
	if (start(lib))
		return fail(name, "could not start its thread");
	after = threads();
	if (after <= before)
		return fail(name, "started no thread: the test tests nothing");
	if (dlclose(lib))
		return fail("dlclose", dlerror());
	if (!load(dir, name, RTLD_NOW | RTLD_NOLOAD))
		return fail(name, "unmapped by dlclose while its threads run");
	if (threads() < after)
		return fail(name, "its thread is gone after dlclose");
	printf("unload: %s: %d thread(s) of its own, still loaded after "
	       "dlclose\n",
	       name, after - before);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: unload <dir of our libraries>\n");
		return 2;
	}
	if (check(argv[1], "libibverbs.so.1", start_verbs) ||
	    check(argv[1], "librdmacm.so.1", start_cm))
		return 1;
	printf("unload: PASS\n");
	return 0;
}
