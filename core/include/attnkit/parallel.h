// attnkit: running a call's parallel work on the host's threads instead of attnkit's own pool, for a runtime that
// has a pool already (an ONNX Runtime custom op's KernelContext_ParallelFor, an engine's job system): two pools on
// the same cores take turns badly, and a host's pool that spins after its own ops delays attnkit's (README).
#pragma once

namespace attnkit {

// run(context, jobs, job, job_context) must call job(job_context, j) for every j in [0, jobs), in any order, on any
// threads, side by side or one after another, and return once all have returned. Each job takes the call's tasks
// one by one until none is left, so a pool with fewer threads than jobs only runs fewer at once; a job left out is
// run on the calling thread after run() returns, and one run twice does nothing the second time. Jobs never throw.
struct ParallelRunner {
  void (*run)(void* context, int jobs, void (*job)(void* job_context, int job), void* job_context) = nullptr;
  void* context = nullptr;
};

// The calls this thread makes from now on run their parallel work through `runner` (run == nullptr: on attnkit's
// pool again); returns the thread's previous runner. A call's `jobs` is its thread count (RunOptions::threads,
// else the default, as on attnkit's pool) capped at its tasks; with one job it runs on the calling thread alone.
// The results are the same bits as on attnkit's pool.
ParallelRunner set_thread_parallel_runner(ParallelRunner runner);

}  // namespace attnkit
