// attnkit: running a call's parallel work on the host's threads instead of attnkit's own pool, for a runtime that
// has a pool already (an ONNX Runtime custom op's KernelContext_ParallelFor, an engine's job system): two pools on
// the same cores take turns badly, and a host's pool that spins after its own ops delays attnkit's (README).
#pragma once

namespace attnkit {

// run(context, jobs, job, job_context) is called once per parallel region, so a few times per call (a decode step's
// cache write, attention and merge), each with its own jobs and job_context. It should call job(job_context, j) for
// every j in [0, jobs), in any order, on any threads, side by side or one after another, and return once all have
// returned. Each job takes the region's tasks one by one until none is left, so a pool with fewer threads than jobs
// only runs fewer at once; a job left out is run on the calling thread after run() returns, and one run twice does
// nothing the second time. A run() that returns or throws while jobs it started are still running is waited for
// (an exception from run() is dropped: the jobs it left out run on the calling thread); but job_context lives only
// until the attnkit call's region ends, so no job may be called after run() has returned or thrown (a pool that
// queues jobs and forgets them). Jobs never throw. A job may make attnkit calls of its own: they run on its thread
// alone.
struct ParallelRunner {
  void (*run)(void* context, int jobs, void (*job)(void* job_context, int job), void* job_context) = nullptr;
  void* context = nullptr;
};

// The calls this thread makes from now on run their parallel work through `runner` (run == nullptr: on attnkit's
// pool again); returns the thread's previous runner. A region's `jobs` is the call's thread count
// (RunOptions::threads, else the default, as on attnkit's pool) capped at the region's tasks; a region of one job
// runs on the calling thread alone.
// The results are the same bits as on attnkit's pool.
ParallelRunner set_thread_parallel_runner(ParallelRunner runner);
// The calling thread's runner (run == nullptr: none).
ParallelRunner thread_parallel_runner();

}  // namespace attnkit
