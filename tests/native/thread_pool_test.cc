// attnkit: the thread pool under stress. Many short parallel regions back to back, with task counts
// that change from region to region, are where a worker still leaving one region meets the caller
// preparing the next: every task must run exactly once, and no region may hang. Also its default size.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__linux__) && !defined(__EMSCRIPTEN__)
#include <sched.h>
#elif defined(_WIN32)
#ifndef NOMINMAX
#define NOMINMAX  // std::min, not windows.h's macro
#endif
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#endif

#include "common/available_cpus.h"
#include "common/thread_pool.h"

namespace attnkit {
namespace {

// The suite ends by joining the pool's workers, as the CLI does before it exits. Left running, the OS kills them
// mid-wait at exit, and under Wine that sometimes broke the exit ("wine client error").
class JoinThePoolAtTheEnd : public ::testing::Environment {
 public:
  void TearDown() override { stop_thread_pool(); }
};
[[maybe_unused]] const ::testing::Environment* const kJoinThePool =
    ::testing::AddGlobalTestEnvironment(new JoinThePoolAtTheEnd);

// The single-thread wasm build has no threads: parallel_for runs inline there, so nothing can hang.
#if !defined(__EMSCRIPTEN__) || defined(__EMSCRIPTEN_PTHREADS__)
#define ATTNKIT_TEST_HAS_THREADS 1
#endif

// Aborts the process (with a message) if the scope is not left within the limit: a hang must fail
// the suite, not stall it.
#if ATTNKIT_TEST_HAS_THREADS
class Watchdog {
 public:
  explicit Watchdog(std::chrono::seconds limit)
      : thread_([this, limit] {
          std::unique_lock<std::mutex> lock(mu_);
          if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr, "thread pool test: a parallel region hung\n");
            std::abort();
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};
#else
struct Watchdog {
  explicit Watchdog(std::chrono::seconds) {}
};
#endif

TEST(ThreadPool, ShortRegionsOfChangingSizeRunEachTaskOnce) {
  Watchdog watchdog(std::chrono::seconds(60));
  constexpr size_t kMaxTasks = 9;
  constexpr int kRegions = 50000;
  std::vector<std::atomic<int>> runs(kMaxTasks);
  for (int region = 0; region < kRegions; ++region) {
    // 1, 2, then up to 9 tasks: a region that ends with few tasks is followed by one with more.
    const size_t tasks = 1 + static_cast<size_t>(region * 7 % kMaxTasks);
    for (auto& r : runs) r.store(0, std::memory_order_relaxed);
    parallel_for(tasks, 2 + region % 2, [&](size_t task, int) {
      // A few hundred nanoseconds of work, so the workers take part instead of the caller doing it all.
      for (volatile int spin = 0; spin < static_cast<int>(50 * (task + region % 3)); spin = spin + 1) {
      }
      runs[task].fetch_add(1, std::memory_order_relaxed);
    });
    for (size_t t = 0; t < kMaxTasks; ++t)
      ASSERT_EQ(runs[t].load(), t < tasks ? 1 : 0) << "region " << region << " task " << t << " of " << tasks;
  }
}

TEST(AvailableCpus, CgroupQuotasRoundUpAndNoLimitIsZero) {
  EXPECT_EQ(cpus_from_cgroup_quota("max 100000"), 0);
  EXPECT_EQ(cpus_from_cgroup_quota("200000 100000"), 2);
  EXPECT_EQ(cpus_from_cgroup_quota("150000 100000"), 2);
  EXPECT_EQ(cpus_from_cgroup_quota("50000 100000"), 1);
  EXPECT_EQ(cpus_from_cgroup_quota("-1 100000"), 0);  // cgroup v1: no limit
  EXPECT_EQ(cpus_from_cgroup_quota(""), 0);
  EXPECT_EQ(cpus_from_cgroup_quota("12x 100000"), 0);
  EXPECT_EQ(cpus_from_cgroup_quota("100000 0"), 0);
}

#if defined(__linux__) && !defined(__EMSCRIPTEN__)
// Under taskset or a container's cpuset the default thread count follows the CPUs the process may use, not the
// machine's (std::thread::hardware_concurrency() ignores both).
TEST(AvailableCpus, FollowsTheAffinityMask) {
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  EXPECT_GE(available_cpus(), 1);
  EXPECT_LE(available_cpus(), CPU_COUNT(&saved));
  int first = 0;
  while (!CPU_ISSET(first, &saved)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  const int pinned = available_cpus();
  ASSERT_EQ(sched_setaffinity(0, sizeof(saved), &saved), 0);
  EXPECT_EQ(pinned, 1);
}
#elif defined(_WIN32)
TEST(AvailableCpus, FollowsTheProcessAffinityMask) {
  DWORD_PTR saved = 0, system = 0;
  ASSERT_TRUE(GetProcessAffinityMask(GetCurrentProcess(), &saved, &system));
  ASSERT_NE(saved, 0u);
  const DWORD_PTR first = saved & (~saved + 1);
  ASSERT_TRUE(SetProcessAffinityMask(GetCurrentProcess(), first));
  const int pinned = available_cpus();
  ASSERT_TRUE(SetProcessAffinityMask(GetCurrentProcess(), saved));
  EXPECT_EQ(pinned, 1);
  EXPECT_GE(available_cpus(), 1);
}
#endif

}  // namespace
}  // namespace attnkit
