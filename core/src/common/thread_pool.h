// attnkit: the thread pool every driver splits work over.
// One process-wide pool of std::threads (pthreads under Emscripten). parallel_for hands out task
// indices; a task's result never depends on which thread ran it, so any thread count gives the same bits.
#pragma once
#include <cstddef>
#include <functional>
#include <string>

namespace attnkit {

// Threads a call with RunOptions::threads == requested will use (0 = the pool's default).
int resolve_threads(int requested);
// The pool's default thread count: ATTNKIT_NUM_THREADS, else the CPUs this process may use (available_cpus.h). A
// value that is not a count is reported on stderr once and the CPUs are used.
int default_threads();
// What is wrong with ATTNKIT_NUM_THREADS, or "" (unset or a count): the CLI refuses it.
std::string num_threads_env_problem();
// The most threads a call uses, and setting it (clamped to [1, thread_capacity()]; returns the new limit). The wasm
// loader sets it to the pthread pool it asked Emscripten for, since a thread beyond that pool would never start.
int thread_limit();
int set_thread_limit(int threads);
// The build's most: 256 natively, ATTNKIT_WASM_MAX_THREADS (the largest pool) with wasm threads, 1 without.
int thread_capacity();

// Runs fn(task, worker) for task in [0, tasks) on up to `threads` threads (attnkit's, or the jobs of the calling
// thread's ParallelRunner); worker in [0, threads) identifies per-thread scratch. Returns when all tasks are done.
// Nested calls run inline.
void parallel_for(size_t tasks, int threads, const std::function<void(size_t task, int worker)>& fn);

// Stops and joins the pool's worker threads (the next parallel_for starts them again), for an embedder that
// must end every thread: a wasm module before its workers are terminated, a library before it is unloaded.
// Not with a parallel_for in flight on another thread.
void stop_thread_pool();

}  // namespace attnkit
