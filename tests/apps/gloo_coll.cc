// SPDX-License-Identifier: MIT
/*
 * Collectives on Debian's gloo (libgloo-dev), one process per rank, over
 * gloo's ibverbs transport (its own completion-channel thread: the
 * event-driven path) or, to compare, its TCP transport.  Ranks meet
 * through gloo's FileStore in a directory they share.
 *
 *   gloo_coll RANK SIZE STOREDIR [-t ibverbs|tcp] [-d DEVICE] [-n ITERS]
 *   gloo_coll RANK SIZE STOREDIR -b BYTES [-t ...] [-n ITERS]
 *
 * The first form runs allreduce (ring, ring-chunked, halving-doubling),
 * broadcast (one-to-all, every rank the root in turn) and barrier
 * (all-to-all) ITERS times each at 1, 1023 and 262144 floats, with values
 * that change every iteration, and checks every element of every result;
 * the barrier is checked through files in STOREDIR (after barrier k every
 * rank has reached k).  It prints "gloo_coll: rank R OK ..." or
 * "gloo_coll: rank R FAIL ..." (exit 1).  The second form times ITERS
 * ring allreduces of BYTES on one algorithm (after one to warm up,
 * results checked) and prints "gloo_coll: rank R bench BYTES bytes ITERS
 * iters T s", T the time spent in the allreduces alone.
 *
 * An algorithm is destroyed only after a drain (class Drain): this gloo's
 * ibverbs buffers abort in their destructor while a send of theirs has
 * not completed, and its algorithms return from run() without waiting
 * for their last sends (docs/apps.md, "gloo: why the program drains").
 * The second form's ranks leave together (leave_together).
 */
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/ibverbs/device.h>
#include <gloo/transport/tcp/device.h>

namespace {

int rank_, size_;

[[noreturn]] void fail(const char *fmt, ...)
{
	va_list ap;

	std::printf("gloo_coll: rank %d FAIL ", rank_);
	va_start(ap, fmt);
	std::vprintf(fmt, ap);
	va_end(ap);
	std::printf("\n");
	std::fflush(stdout);
	std::exit(1);
}

/*
 * Brings every send this rank has posted to completion, in a way that
 * holds on any RC device, with loss and retransmission: one broadcast of
 * one int from each rank in turn.  The root of gloo's BroadcastOneToAll
 * waits for the completion of its send to every peer (waitSend), and an
 * RC send queue completes in order, into the one CQ gloo gives each pair,
 * which gloo's device thread handles in order: so when this rank's turn
 * as root returns, every send it posted before, on every pair, has
 * completed, and an algorithm that posted them may be destroyed.
 *
 * It also leaves every rank free to exit when run() returns: each message
 * the rank sent has then been received (before its turn: acknowledged;
 * after it, the clear-to-send of each later root, which that root waited
 * for before it sent its value here).  Its own last sends (those
 * clear-to-sends) may still be waiting for their completion, so a Drain
 * is never destroyed: it goes with the process.
 */
class Drain {
public:
	explicit Drain(const std::shared_ptr<gloo::Context> &ctx)
		: val_(size_)
	{
		for (int r = 0; r < size_; r++)
			bcast_.push_back(
				std::make_unique<gloo::BroadcastOneToAll<int>>(
					ctx, std::vector<int *>{&val_[r]}, 1, r));
	}

	void run()
	{
		epoch_++;
		for (int r = 0; r < size_; r++) {
			val_[r] = r == rank_ ? stamp(r) : -1;
			bcast_[r]->run();
			if (val_[r] != stamp(r))
				fail("drain %d, root %d: got %d, want %d",
				     epoch_, r, val_[r], stamp(r));
		}
	}

private:
	int stamp(int root) const { return epoch_ * size_ + root; }

	std::vector<int> val_;
	std::vector<std::unique_ptr<gloo::BroadcastOneToAll<int>>> bcast_;
	int epoch_ = 0;
};

Drain *drain_;

/*
 * The only way an algorithm goes: after a drain.  They are created with
 * new and held in plain pointers, so that a failure (an exception: a
 * timeout, an error completion) is reported as one, not turned into an
 * abort by a destructor on the way out.
 */
template <typename Algo> void retire(Algo *algo)
{
	drain_->run();
	delete algo;
}

/*
 * What rank r holds at element i in iteration it: small integers, so that
 * float sums are exact; the sum over ranks is known in closed form.
 */
float value(int r, size_t i, int it)
{
	return (float)((r + 1) * (int)(i % 97 + 1) + it);
}

float sum_of(size_t i, int it)
{
	return (float)(size_ * (size_ + 1) / 2 * (int)(i % 97 + 1) + size_ * it);
}

template <typename Algo>
void allreduce(const char *name, std::shared_ptr<gloo::Context> ctx,
	       size_t count, int iters)
{
	std::vector<float> buf(count);
	std::vector<float *> ptrs{buf.data()};
	auto *algo = new Algo(ctx, ptrs, (int)count);

	for (int it = 0; it < iters; it++) {
		for (size_t i = 0; i < count; i++)
			buf[i] = value(rank_, i, it);
		algo->run();
		for (size_t i = 0; i < count; i++)
			if (buf[i] != sum_of(i, it))
				fail("%s of %zu floats, iteration %d: element "
				     "%zu is %g, want %g", name, count, it, i,
				     (double)buf[i], (double)sum_of(i, it));
	}
	retire(algo);
}

/* ITERS broadcasts, the root going round the ranks: one algorithm per
 * root, each run in its turn */
void broadcast(std::shared_ptr<gloo::Context> ctx, size_t count, int iters)
{
	std::vector<float> buf(count);
	std::vector<float *> ptrs{buf.data()};
	std::vector<gloo::BroadcastOneToAll<float> *> algo;

	for (int r = 0; r < size_; r++)
		algo.push_back(new gloo::BroadcastOneToAll<float>(ctx, ptrs,
								  count, r));
	for (int it = 0; it < iters; it++) {
		int root = it % size_;

		for (size_t i = 0; i < count; i++)
			buf[i] = rank_ == root ? value(root, i, it) : -1.0f;
		algo[root]->run();
		for (size_t i = 0; i < count; i++)
			if (buf[i] != value(root, i, it))
				fail("broadcast of %zu floats from rank %d: "
				     "element %zu is %g, want %g", count, root,
				     i, (double)buf[i],
				     (double)value(root, i, it));
	}
	drain_->run();
	for (auto *a : algo)
		delete a;
}

/*
 * ITERS ring allreduces of BYTES on one algorithm, after one to warm up,
 * each result checked.  Only run() is timed: filling and checking 4 MB
 * of floats costs as much as a fast allreduce, and would hide it.  A
 * barrier (untimed) starts each: without it a rank's run() began while
 * its peer still checked the last result, and timed that wait too.
 */
void bench(std::shared_ptr<gloo::Context> ctx, size_t bytes, int iters)
{
	size_t count = bytes / sizeof(float);
	std::vector<float> buf(count);
	std::vector<float *> ptrs{buf.data()};
	auto *algo = new gloo::AllreduceRing<float>(ctx, ptrs, (int)count);
	auto *start = new gloo::BarrierAllToAll(ctx);
	std::chrono::duration<double> dt{0};

	for (int it = -1; it < iters; it++) {
		for (size_t i = 0; i < count; i++)
			buf[i] = value(rank_, i, it + 1);
		start->run();
		auto t0 = std::chrono::steady_clock::now();
		algo->run();
		if (it >= 0)
			dt += std::chrono::steady_clock::now() - t0;
		for (size_t i = 0; i < count; i++)
			if (buf[i] != sum_of(i, it + 1))
				fail("bench allreduce, iteration %d: element "
				     "%zu is %g, want %g", it, i,
				     (double)buf[i], (double)sum_of(i, it + 1));
	}
	retire(start);
	retire(algo);
	std::printf("gloo_coll: rank %d bench %zu bytes %d iters %.6f s\n",
		    rank_, bytes, iters, dt.count());
	std::fflush(stdout);
}

/* Each rank writes how many barriers it has entered; after barrier k
 * every rank's count is at least k. */
void barrier(std::shared_ptr<gloo::Context> ctx, const std::string &dir,
	     int iters)
{
	auto *algo = new gloo::BarrierAllToAll(ctx);

	for (int k = 1; k <= iters; k++) {
		std::string mine = dir + "/uroce-barrier." + std::to_string(rank_);
		{
			std::ofstream f(mine + ".tmp");
			f << k << "\n";
		}
		if (std::rename((mine + ".tmp").c_str(), mine.c_str()))
			fail("rename %s: %s", mine.c_str(), std::strerror(errno));
		algo->run();
		for (int r = 0; r < size_; r++) {
			std::ifstream f(dir + "/uroce-barrier." + std::to_string(r));
			int got = 0;

			f >> got;
			if (got < k)
				fail("left barrier %d while rank %d had entered "
				     "only %d", k, r, got);
		}
	}
	retire(algo);
}

/*
 * Every rank exits once all have finished: each writes STOREDIR/
 * uroce-done.R and waits, up to the context's 60 s, for all of them.
 * Over gloo's TCP transport a rank that exits closes its connections,
 * and a rank still in its last drain then fails on the EOF ("Connection
 * closed by peer"): 3 of 8 TCP rounds of bench/apps.sh gloo with 4 ranks
 * failed so.  The files stand outside both transports.
 */
void leave_together(const std::string &dir)
{
	const timespec nap = { 0, 1000000 };
	auto done = [&dir](int r) {
		return dir + "/uroce-done." + std::to_string(r);
	};

	{
		std::ofstream f(done(rank_));
	}
	for (int waited = 0; waited < 60000; waited++) {
		int r = 0;

		while (r < size_ && !access(done(r).c_str(), F_OK))
			r++;
		if (r == size_)
			return;
		nanosleep(&nap, nullptr);
	}
	fail("a rank never finished (no %s/uroce-done.*)", dir.c_str());
}

std::shared_ptr<gloo::transport::Device> make_device(const std::string &kind,
						     const std::string &name)
{
	if (kind == "tcp") {
		gloo::transport::tcp::attr attr;

		attr.hostname = name.empty() ? "127.0.0.1" : name;
		return gloo::transport::tcp::CreateDevice(attr);
	}
	if (kind != "ibverbs")
		fail("unknown transport %s", kind.c_str());
	gloo::transport::ibverbs::attr attr;

	attr.name = name.empty() ? "uroce0" : name;
	attr.port = 1;
	attr.index = 0;
	return gloo::transport::ibverbs::CreateDevice(attr);
}

} // namespace

int main(int argc, char **argv)
{
	std::string kind = "ibverbs", devname;
	size_t bench_bytes = 0;
	int iters = 0, c;

	if (argc < 4) {
		std::fprintf(stderr, "usage: gloo_coll RANK SIZE STOREDIR "
			     "[-t ibverbs|tcp] [-d DEVICE] [-n ITERS] "
			     "[-b BYTES]\n");
		return 2;
	}
	rank_ = std::atoi(argv[1]);
	size_ = std::atoi(argv[2]);
	std::string dir = argv[3];
	optind = 4;
	while ((c = getopt(argc, argv, "t:d:n:b:")) != -1) {
		switch (c) {
		case 't': kind = optarg; break;
		case 'd': devname = optarg; break;
		case 'n': iters = std::atoi(optarg); break;
		case 'b': bench_bytes = std::strtoull(optarg, nullptr, 0); break;
		default: return 2;
		}
	}
	if (size_ < 1 || rank_ < 0 || rank_ >= size_)
		fail("bad rank %d of %d", rank_, size_);

	try {
		auto dev = make_device(kind, devname);
		auto store = gloo::rendezvous::FileStore(dir);
		auto ctx = std::make_shared<gloo::rendezvous::Context>(rank_,
								       size_);
		ctx->setTimeout(std::chrono::seconds(60));
		ctx->connectFullMesh(store, dev);
		/* it holds the context and the device to the end */
		drain_ = new Drain(ctx);

		if (bench_bytes) {
			bench(ctx, bench_bytes, iters ? iters : 20);
			leave_together(dir);
			return 0;
		}

		if (!iters)
			iters = 3;
		for (size_t count : {size_t(1), size_t(1023), size_t(262144)}) {
			allreduce<gloo::AllreduceRing<float>>(
				"allreduce_ring", ctx, count, iters);
			allreduce<gloo::AllreduceRingChunked<float>>(
				"allreduce_ring_chunked", ctx, count, iters);
			allreduce<gloo::AllreduceHalvingDoubling<float>>(
				"allreduce_halving_doubling", ctx, count,
				iters);
			broadcast(ctx, count, iters > size_ ? iters : size_);
		}
		barrier(ctx, dir, 4 * iters);
	} catch (const std::exception &e) {
		fail("%s", e.what());
	}
	std::printf("gloo_coll: rank %d OK %d ranks, %s, %d iterations\n",
		    rank_, size_, kind.c_str(), iters);
	return 0;
}
