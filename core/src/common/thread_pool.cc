// attnkit: the process-wide std::thread pool behind parallel_for (pthreads under Emscripten), or the host's pool
// where the calling thread set one (attnkit/parallel.h). Workers are started lazily up to the largest thread count
// asked for and then reused; the caller runs tasks too. Tasks are claimed from an atomic counter, so load balances
// across uneven tiles.
#include "common/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "attnkit/parallel.h"
#include "common/available_cpus.h"

namespace attnkit {
namespace {

// Emscripten can only start as many threads as its pre-spawned worker pool holds: the build's most, or fewer where
// the JS loader asked for a smaller pool (set_thread_limit).
#if defined(__EMSCRIPTEN__)
#if defined(__EMSCRIPTEN_PTHREADS__)
constexpr int kMaxThreads = ATTNKIT_WASM_MAX_THREADS;
#else
constexpr int kMaxThreads = 1;
#endif
#else
constexpr int kMaxThreads = 256;
#endif
std::atomic<int> g_thread_limit{kMaxThreads};

thread_local bool t_inside_task = false;
thread_local ParallelRunner t_runner;  // the host's pool this thread's calls run on (set_thread_parallel_runner)

// Briefly spins before sleeping: an op runs a few parallel regions back to back (cache write, attention,
// merge), and a condition-variable wake-up per region costs tens of microseconds — as much as a whole
// short decode step.
#if defined(__EMSCRIPTEN__)
// wasm has no pause instruction, so 4000 polls end within a few microseconds; poll the clock instead.
constexpr auto kSpinTime = std::chrono::microseconds(100);

template <typename Ready>
bool spin_until(Ready ready) {
  const auto until = std::chrono::steady_clock::now() + kSpinTime;
  for (;;) {
    for (int i = 0; i < 256; ++i)
      if (ready()) return true;
    if (std::chrono::steady_clock::now() >= until) return ready();
  }
}
#else
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

constexpr int kSpinIterations = 4000;  // 80-110 us on Zen 5; longer on Intel cores, whose pause is ~140 cycles

template <typename Ready>
bool spin_until(Ready ready) {
  for (int i = 0; i < kSpinIterations; ++i) {
    if (ready()) return true;
    cpu_relax();
  }
  return ready();
}
#endif

constexpr uint64_t kClosed = 0xffffffffu;  // the next-task field of a region being replaced

// Tasks are claimed with one atomic word holding (region, next task): a worker that wakes late, after
// every task of its region is done, claims nothing, and the caller never waits for it — on a shared host
// a descheduled worker would otherwise stall every parallel region by a whole time slice.
class ThreadPool {
 public:
  static ThreadPool& instance() {
    static ThreadPool* pool = new ThreadPool();  // never destroyed: workers may outlive static teardown
    return *pool;
  }

  // Wakes every worker with the stop flag set and joins it; the next run() starts new workers. Returns
  // without stopping when a region is in flight (or a wasm trap unwound through run() with the lock held).
  void stop() {
    std::unique_lock<std::mutex> call_lock(call_mu_, std::try_to_lock);
    if (!call_lock.owns_lock()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
    stop_ = false;
  }

  void run(size_t tasks, int threads, const std::function<void(size_t, int)>& fn) {
    std::lock_guard<std::mutex> call_lock(call_mu_);  // one parallel region at a time
    ensure_workers(threads - 1);
    uint64_t region;
    {
      std::lock_guard<std::mutex> lock(mu_);
      region = (state_.load() >> 32) + 1;
      // Close the previous region before its fields change: a worker still leaving it may hold a stale
      // (region, next task) snapshot, and with the new task count that claim would otherwise succeed
      // and run a task twice or push completed_ past the count, so the caller waited forever.
      state_.store(((region - 1) << 32) | kClosed, std::memory_order_release);
      fn_.store(&fn, std::memory_order_relaxed);
      tasks_.store(tasks, std::memory_order_release);  // a worker that reads it has seen the close
      active_workers_.store(threads - 1, std::memory_order_relaxed);
      completed_.store(0, std::memory_order_relaxed);
      state_.store(region << 32, std::memory_order_release);  // publishes the fields above
    }
    wake_.notify_all();
    work(region, 0);
    auto all_done = [&] { return completed_.load(std::memory_order_acquire) == tasks; };
    if (!spin_until(all_done)) {
      std::unique_lock<std::mutex> lock(mu_);
      done_.wait(lock, all_done);
    }
  }

 private:
  void ensure_workers(int count) {
    while (static_cast<int>(workers_.size()) < count) {
      int id = static_cast<int>(workers_.size()) + 1;
      workers_.emplace_back([this, id] { loop(id); });
    }
  }

  void loop(int id) {
    uint64_t seen = 0;
    for (;;) {
      auto new_region = [&] { return (state_.load(std::memory_order_acquire) >> 32) != seen || stop_; };
      if (!spin_until(new_region)) {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, new_region);
      }
      if (stop_) return;
      seen = state_.load(std::memory_order_acquire) >> 32;
      if (id <= active_workers_.load(std::memory_order_relaxed)) work(seen, id);
    }
  }

  // Claims and runs tasks of `region` until none is left (or a newer region has started).
  void work(uint64_t region, int worker) {
    t_inside_task = true;
    for (;;) {
      uint64_t s = state_.load(std::memory_order_acquire);
      if ((s >> 32) != region) break;
      const size_t task = static_cast<size_t>(s & kClosed);
      const size_t tasks = tasks_.load(std::memory_order_acquire);
      if (task >= tasks) break;
      // The claim succeeds only while `region` is current and open. If tasks_ above was already the next
      // region's, the close that preceded it makes this exchange fail; otherwise it was this region's
      // count, and a region cannot end before its claimed tasks complete, so fn_ stays this region's.
      if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) continue;
      (*fn_.load(std::memory_order_relaxed))(task, worker);
      if (completed_.fetch_add(1, std::memory_order_acq_rel) + 1 == tasks) {
        std::lock_guard<std::mutex> lock(mu_);  // the caller may be about to wait: notify under the lock
        done_.notify_one();
      }
    }
    t_inside_task = false;
  }

  std::mutex call_mu_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;  // joinable, so stop() can wait for them (the pool itself is never destroyed)
  std::atomic<bool> stop_{false};
  // Written by the caller before it publishes a region through state_ (release), read after it (acquire).
  std::atomic<const std::function<void(size_t, int)>*> fn_{nullptr};
  std::atomic<size_t> tasks_{0};
  std::atomic<int> active_workers_{0};
  std::atomic<uint64_t> state_{0};  // region << 32 | next task
  std::atomic<size_t> completed_{0};
};

// ATTNKIT_NUM_THREADS as a count (0 when unset or empty, which means the available CPUs), or -1 when it is not a
// non-negative integer.
long num_threads_env() {
  const char* env = std::getenv("ATTNKIT_NUM_THREADS");
  if (!env || !*env) return 0;
  for (const char* c = env; *c; ++c)
    if (*c < '0' || *c > '9') return -1;
  errno = 0;
  const long v = std::strtol(env, nullptr, 10);
  return errno == ERANGE ? -1 : v;
}

// One parallel region on the host's pool: its jobs claim tasks from `next`; `started` lets each job run once.
struct HostRegion {
  size_t tasks;
  int jobs;
  const std::function<void(size_t, int)>* fn;
  std::atomic<size_t> next{0};
  std::atomic<int> finished{0};  // jobs that started and have returned: the last thing a job touches
  std::unique_ptr<std::atomic<bool>[]> started;
};

// noexcept: an exception must not unwind through the host's frames (on attnkit's pool it ends the process too).
void run_host_job(void* context, int job) noexcept {
  HostRegion& r = *static_cast<HostRegion*>(context);
  // A job index out of range, or run again, would share a worker's scratch with another job.
  if (job < 0 || job >= r.jobs || r.started[job].exchange(true, std::memory_order_acq_rel)) return;
  const bool nested = t_inside_task;
  t_inside_task = true;
  for (size_t t; (t = r.next.fetch_add(1, std::memory_order_relaxed)) < r.tasks;) (*r.fn)(t, job);
  t_inside_task = nested;
  r.finished.fetch_add(1, std::memory_order_release);  // the region may be gone from here on
}

void run_on_host(const ParallelRunner& runner, size_t tasks, int jobs, const std::function<void(size_t, int)>& fn) {
  HostRegion region;
  region.tasks = tasks;
  region.jobs = jobs;
  region.fn = &fn;
  region.started.reset(new std::atomic<bool>[static_cast<size_t>(jobs)]);
  for (int j = 0; j < jobs; ++j) region.started[j].store(false, std::memory_order_relaxed);
  try {
    runner.run(runner.context, jobs, run_host_job, &region);
  } catch (...) {
    // A host that throws counts as one that left out the jobs it had not started: no exception crosses attnkit's
    // API, and the call still gives its bits.
  }
  // Jobs the host left out run here: their tasks must still be done before the call goes on.
  for (int j = 0; j < jobs; ++j) run_host_job(&region, j);
  // Every job has started by now; one the host still runs (its run() returned or threw early) must finish before
  // the region, fn and the call's buffers leave this frame.
  while (region.finished.load(std::memory_order_acquire) < jobs) std::this_thread::yield();
}

}  // namespace

ParallelRunner thread_parallel_runner() { return t_runner; }

ParallelRunner set_thread_parallel_runner(ParallelRunner runner) {
  const ParallelRunner previous = t_runner;
  t_runner = runner.run ? runner : ParallelRunner();
  return previous;
}

std::string num_threads_env_problem() {
  if (num_threads_env() >= 0) return std::string();
  return std::string("ATTNKIT_NUM_THREADS: \"") + std::getenv("ATTNKIT_NUM_THREADS") +
         "\" must be a thread count (0 or absent: the available CPUs)";
}

int default_threads() {
  static const int n = [] {
    long v = num_threads_env();
    if (v <= 0) {
      // A mistyped count must not pass unnoticed; the CLI refuses it (num_threads_env_problem).
      if (v < 0) std::fprintf(stderr, "attnkit: %s; using %d\n", num_threads_env_problem().c_str(), available_cpus());
      v = available_cpus();
    }
    return static_cast<int>(std::clamp<long>(v, 1, kMaxThreads));
  }();
  return n;
}

int resolve_threads(int requested) {
  return std::clamp(requested > 0 ? requested : default_threads(), 1, thread_limit());
}

int thread_limit() { return g_thread_limit.load(std::memory_order_relaxed); }

int thread_capacity() { return kMaxThreads; }

int set_thread_limit(int threads) {
  g_thread_limit.store(std::clamp(threads, 1, kMaxThreads), std::memory_order_relaxed);
  return thread_limit();
}

void stop_thread_pool() { ThreadPool::instance().stop(); }

void parallel_for(size_t tasks, int threads, const std::function<void(size_t, int)>& fn) {
  threads = std::min<int>(resolve_threads(threads), static_cast<int>(std::max<size_t>(tasks, 1)));
  if (threads <= 1 || t_inside_task || tasks >= kClosed) {
    for (size_t t = 0; t < tasks; ++t) fn(t, 0);
    return;
  }
  if (t_runner.run) return run_on_host(t_runner, tasks, threads, fn);
  ThreadPool::instance().run(tasks, threads, fn);
}

}  // namespace attnkit
