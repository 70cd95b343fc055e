/* The host passes' threads (kernels/threads_host.cpp owns them): one OpenMP team for the
   process, which also runs OpenBLAS's parallel jobs once minigrad._host_threads has installed
   mg_openblas_threads. Without OpenMP every pass runs on the calling thread. */
#ifndef MG_HOST_THREADS_H
#define MG_HOST_THREADS_H

#ifdef _OPENMP
#include <omp.h>
#endif

/* Threads a host pass may use: the OpenMP thread count, 1 in a forked child (set by
   mg_set_pass_threads). */
extern "C" int mg_pass_threads(void);

/* f(begin, end) over [0, n) in contiguous ranges, one per thread, on up to mg_pass_threads()
   threads and at most n / grain of them (small work stays on the calling thread). Which thread
   runs which range must not change a result: passes that add across ranges use mg_chunks. */
template <class F>
static void mg_parallel_for(long long n, long long grain, F f)
{
    long long threads = mg_pass_threads();
    if (grain > 0 && n / grain < threads)
        threads = n / grain;
    if (threads <= 1) {
        f(0LL, n);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel num_threads((int)threads)
    {
        const long long t = omp_get_thread_num(), k = omp_get_num_threads();
        f(n * t / k, n * (t + 1) / k);
    }
#else
    f(0LL, n);
#endif
}

/* How many fixed chunks a sum over n items is split into, with at least `grain` items and at
   most `most` chunks: partial sums are taken per chunk and added in chunk order, so the result
   is the same on any number of threads. */
static inline long long mg_chunks(long long n, long long grain, long long most = 32)
{
    long long k = grain > 0 ? n / grain : n;
    return k < 1 ? 1 : (k > most ? most : k);
}

#endif
