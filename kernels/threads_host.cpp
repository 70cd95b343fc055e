/* The host threads of the process: the thread count of minigrad's parallel host passes
   (host_threads.h), and a threading callback for OpenBLAS that runs its parallel jobs on the
   same OpenMP team.

   OpenBLAS runs the parallel part of a product on its own pthreads, which then spin, waiting
   for the next product, for about 0.1 s (2^28 cycles, OPENBLAS_THREAD_TIMEOUT, read once when
   the library loads). On a machine with as many cores as BLAS threads, a spinning thread
   holds a core that a host pass right after the product would use: two pools, each taking
   the cores from the other. OpenBLAS's openblas_set_threads_callback_function hands a
   product's jobs to a function of the caller's instead (cblas.h: "Set the threading backend
   to a custom callback"); mg_openblas_threads runs them on this library's OpenMP team, whose
   idle threads wait a short while and then sleep. minigrad._host_threads installs it.

   The contract (OpenBLAS driver/others/blas_server.c, exec_blas): every job i is
   dojob(i, jobdata + i * jobdata_elsize, dojob_data), all done on return. The jobs of a
   level-3 product wait on each other's progress, so all of them must run at once: a team with
   fewer threads than jobs would deadlock, and then the jobs run on std::threads instead. Job i
   uses OpenBLAS's static scratch buffer i, so two products must not run at once: a mutex
   serialises the calls (OpenBLAS's own queue does the same). */
#include <atomic>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

#include "host_threads.h"

namespace {
std::atomic<int> pass_threads{0};  // 0: not set, use OpenMP's count
std::atomic<long long> blas_calls{0};
std::mutex one_product;
}  // namespace

extern "C" int mg_pass_threads(void)
{
    const int set = pass_threads.load(std::memory_order_relaxed);
    if (set > 0)
        return set;
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* Set the host passes' thread count (0: OpenMP's; 1 in a forked child, whose OpenMP team
   did not survive the fork). */
extern "C" void mg_set_pass_threads(int threads) { pass_threads.store(threads < 0 ? 0 : threads); }

/* Whether the library was built with OpenMP (else every pass runs on one thread, and
   minigrad._host_threads leaves OpenBLAS's threads as they are). */
extern "C" int mg_openmp(void)
{
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}

/* How many parallel products OpenBLAS has run through mg_openblas_threads (for tests). */
extern "C" long long mg_openblas_calls(void) { return blas_calls.load(); }

typedef void (*mg_dojob)(int thread_num, void* jobdata, int dojob_data);

extern "C" void mg_openblas_threads(int sync, mg_dojob dojob, int numjobs,
                                    std::size_t jobdata_elsize, void* jobdata, int dojob_data)
{
    (void)sync;  // OpenBLAS always waits for the jobs (sync = 1)
    std::lock_guard<std::mutex> lock(one_product);
    blas_calls.fetch_add(1, std::memory_order_relaxed);
    char* jobs = static_cast<char*>(jobdata);
    if (numjobs <= 1) {
        if (numjobs == 1)
            dojob(0, jobs, dojob_data);
        return;
    }
    bool whole_team = false;
#ifdef _OPENMP
#pragma omp parallel num_threads(numjobs)
    {
#pragma omp single
        whole_team = omp_get_num_threads() == numjobs;
        // the barrier after `single`: no job starts before the team's size is known
        if (whole_team) {
            const int i = omp_get_thread_num();
            dojob(i, jobs + i * jobdata_elsize, dojob_data);
        }
    }
#endif
    if (whole_team)
        return;
    std::vector<std::thread> others;
    for (int i = 1; i < numjobs; ++i)
        others.emplace_back(dojob, i, jobs + i * jobdata_elsize, dojob_data);
    dojob(0, jobs, dojob_data);
    for (std::thread& t : others)
        t.join();
}
