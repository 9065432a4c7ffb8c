// attnkit: the process-wide std::thread pool behind parallel_for (pthreads under Emscripten).
// Workers are started lazily up to the largest thread count asked for and then reused; the caller
// runs tasks too. Tasks are claimed from an atomic counter, so load balances across uneven tiles.
#include "common/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace attnkit {
namespace {

// Emscripten can only start as many threads as its pre-spawned worker pool holds.
#if defined(__EMSCRIPTEN__)
#if defined(__EMSCRIPTEN_PTHREADS__)
constexpr int kMaxThreads = ATTNKIT_WASM_MAX_THREADS;
#else
constexpr int kMaxThreads = 1;
#endif
#else
constexpr int kMaxThreads = 256;
#endif

thread_local bool t_inside_task = false;

class ThreadPool {
 public:
  static ThreadPool& instance() {
    static ThreadPool* pool = new ThreadPool();  // never destroyed: workers may outlive static teardown
    return *pool;
  }

  void run(size_t tasks, int threads, const std::function<void(size_t, int)>& fn) {
    std::lock_guard<std::mutex> call_lock(call_mu_);  // one parallel region at a time
    ensure_workers(threads - 1);
    {
      std::lock_guard<std::mutex> lock(mu_);
      fn_ = &fn;
      tasks_ = tasks;
      next_.store(0);
      active_workers_ = threads - 1;
      pending_ = threads - 1;
      ++generation_;
    }
    wake_.notify_all();
    work(0);
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return pending_ == 0; });
    fn_ = nullptr;
  }

 private:
  void ensure_workers(int count) {
    while (static_cast<int>(workers_.size()) < count) {
      int id = static_cast<int>(workers_.size()) + 1;
      workers_.emplace_back([this, id] { loop(id); });
      workers_.back().detach();
    }
  }

  void loop(int id) {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (id > active_workers_) continue;  // not part of this region
      }
      work(id);
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_.notify_one();
    }
  }

  void work(int worker) {
    t_inside_task = true;
    for (;;) {
      size_t task = next_.fetch_add(1);
      if (task >= tasks_) break;
      (*fn_)(task, worker);
    }
    t_inside_task = false;
  }

  std::mutex call_mu_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  const std::function<void(size_t, int)>* fn_ = nullptr;
  size_t tasks_ = 0;
  std::atomic<size_t> next_{0};
  int active_workers_ = 0;
  int pending_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace

int default_threads() {
  static const int n = [] {
    const char* env = std::getenv("ATTNKIT_NUM_THREADS");
    int v = env ? std::atoi(env) : 0;
    if (v <= 0) v = static_cast<int>(std::thread::hardware_concurrency());
    return std::clamp(v, 1, kMaxThreads);
  }();
  return n;
}

int resolve_threads(int requested) {
  return std::clamp(requested > 0 ? requested : default_threads(), 1, kMaxThreads);
}

void parallel_for(size_t tasks, int threads, const std::function<void(size_t, int)>& fn) {
  threads = std::min<int>(resolve_threads(threads), static_cast<int>(std::max<size_t>(tasks, 1)));
  if (threads <= 1 || t_inside_task) {
    for (size_t t = 0; t < tasks; ++t) fn(t, 0);
    return;
  }
  ThreadPool::instance().run(tasks, threads, fn);
}

}  // namespace attnkit
