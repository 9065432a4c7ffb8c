// attnkit tests: calls whose parallel work runs on a host's pool (attnkit/parallel.h). Whatever the host does with
// the jobs (runs them on threads of its own, one after another in any order, some twice, or not at all), each call
// gives the bits of attnkit's own pool, and only the thread that set a runner uses it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "attnkit/attnkit.h"
#include "attnkit/parallel.h"
#include "common/thread_pool.h"
#include "corpus_cases.h"

namespace attnkit {
namespace {

// The wasm build's threads are its fixed pool of Emscripten workers, which a host runner would have to share.
#if !defined(__EMSCRIPTEN__)

// Every parallel region the drivers have: split-KV decode and its merge, chunked and flash prompts, the cache
// write, QAttention's projection blocks and heads.
std::vector<Case> runner_cases() {
  return load_corpus_cases({"gqa/models--mqa-h128-int4-split-kv-decode.json",
                            "gqa/models--mistral-g4-h128-rotary-int4-chunked.json", "gqa/chunked--past64-s33-h128.json",
                            "qattention/heads--n12-h64-s64.json",
                            "qattention/ort-test--past-state-u8s8-per-column.json"});
}

std::vector<std::string> output_bytes(const Case& c, int threads) {
  RunOptions options;
  options.threads = threads;
  std::vector<CaseOutput> outputs;
  const Status st = run_case(c, options, false, &outputs);
  EXPECT_TRUE(st.ok()) << c.name << ": " << st.message();
  std::vector<std::string> bytes;
  for (const CaseOutput& o : outputs) bytes.emplace_back(o.bytes.begin(), o.bytes.end());
  return bytes;
}

// What a host did with the jobs it was given.
struct HostLog {
  std::mutex mu;
  int calls = 0;
  int most_jobs = 0;
  std::set<std::thread::id> threads;  // that ran a job
};

using Job = void (*)(void*, int);

void note(void* context, int jobs) {
  HostLog& log = *static_cast<HostLog*>(context);
  std::lock_guard<std::mutex> lock(log.mu);
  ++log.calls;
  log.most_jobs = std::max(log.most_jobs, jobs);
}

// A pool of the host's own: each job on a thread it starts.
void run_on_own_threads(void* context, int jobs, Job job, void* job_context) {
  note(context, jobs);
  std::vector<std::thread> threads;
  for (int j = 0; j < jobs; ++j) {
    threads.emplace_back([=] {
      {
        HostLog& log = *static_cast<HostLog*>(context);
        std::lock_guard<std::mutex> lock(log.mu);
        log.threads.insert(std::this_thread::get_id());
      }
      job(job_context, j);
    });
  }
  for (std::thread& t : threads) t.join();
}

// A host with no threads to spare: the jobs one after another, last first.
void run_backwards_here(void* context, int jobs, Job job, void* job_context) {
  note(context, jobs);
  for (int j = jobs - 1; j >= 0; --j) job(job_context, j);
}

// A careless host: job 1 twice, a job that does not exist, and none of the others.
void run_carelessly(void* context, int jobs, Job job, void* job_context) {
  note(context, jobs);
  job(job_context, 1);
  job(job_context, 1);
  job(job_context, jobs);
}

// A host that runs nothing at all: the calling thread does every task.
void run_nothing(void* context, int jobs, Job, void*) { note(context, jobs); }

// A host that gives up before its jobs (context != null: throws instead of returning).
void give_up(void* context) {
  if (context) throw std::runtime_error("the host's pool is shutting down");
}

// ...at once: every job runs on the calling thread.
void leave_at_once(void* context, int, Job, void*) { give_up(context); }

// ...while job 0, started on a thread of its own, still runs a task: run() returns (or throws) once that task has
// begun, which tells it that job 0 claimed itself (a job called after run() left would reach a region that is gone,
// which nothing can make safe: parallel.h forbids it).
std::atomic<bool> g_task_begun{false};
void leave_while_running(void* context, int, Job job, void* job_context) {
  g_task_begun.store(false);
  std::thread([job, job_context] { job(job_context, 0); }).detach();
  while (!g_task_begun.load()) std::this_thread::yield();
  give_up(context);
}

TEST(ParallelRunner, EveryHostGivesTheBitsOfAttnkitsPool) {
  const std::vector<Case> cases = runner_cases();
  ASSERT_GE(cases.size(), 5u);
  constexpr int kThreads = 3;
  std::vector<std::vector<std::string>> own;
  for (const Case& c : cases) own.push_back(output_bytes(c, kThreads));
  const struct {
    const char* name;
    void (*run)(void*, int, Job, void*);
  } hosts[] = {{"own threads", run_on_own_threads},
               {"backwards on the caller", run_backwards_here},
               {"careless", run_carelessly},
               {"nothing", run_nothing}};
  for (const auto& host : hosts) {
    HostLog log;
    const ParallelRunner previous = set_thread_parallel_runner({host.run, &log});
    for (size_t i = 0; i < cases.size(); ++i)
      EXPECT_TRUE(output_bytes(cases[i], kThreads) == own[i]) << cases[i].name << " on a host that runs " << host.name;
    set_thread_parallel_runner(previous);
    EXPECT_GE(log.calls, static_cast<int>(cases.size())) << host.name;
    EXPECT_EQ(log.most_jobs, kThreads) << host.name;
    if (host.run == run_on_own_threads) {
      EXPECT_EQ(log.threads.count(std::this_thread::get_id()), 0u);
      EXPECT_GT(log.threads.size(), 1u);
    }
  }
}

// Outside the contract, but no exception crosses the call and no job outlives it: the call runs what the host
// left out and waits for what it left running.
TEST(ParallelRunner, AHostThatReturnsOrThrowsBeforeItsJobsEndStillGivesTheBits) {
  const std::vector<Case> cases = runner_cases();
  ASSERT_GE(cases.size(), 5u);
  int throws = 0;
  for (void* context : {static_cast<void*>(nullptr), static_cast<void*>(&throws)}) {
    for (const Case& c : cases) {
      const std::vector<std::string> own = output_bytes(c, 2);
      const ParallelRunner previous = set_thread_parallel_runner({leave_at_once, context});
      EXPECT_TRUE(output_bytes(c, 2) == own) << c.name << (context ? " (throws)" : "");
      set_thread_parallel_runner(previous);
    }
    // A region whose task on the host's thread is still running when run() returns: parallel_for waits for it.
    std::atomic<int> done{0};
    const ParallelRunner previous = set_thread_parallel_runner({leave_while_running, context});
    parallel_for(2, 2, [&](size_t, int worker) {
      if (worker == 0) {
        g_task_begun.store(true);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      done.fetch_add(1);
    });
    set_thread_parallel_runner(previous);
    EXPECT_EQ(done.load(), 2) << (context ? "(throws)" : "");
  }
}

TEST(ParallelRunner, OnlyTheThreadThatSetItAndOnlyForMoreThanOneThread) {
  const std::vector<Case> cases = runner_cases();
  ASSERT_FALSE(cases.empty());
  HostLog log;
  set_thread_parallel_runner({run_backwards_here, &log});
  output_bytes(cases[0], 1);  // one thread: the calling thread alone
  EXPECT_EQ(log.calls, 0);
  std::thread([&] { output_bytes(cases[0], 2); }).join();  // another thread: attnkit's pool
  EXPECT_EQ(log.calls, 0);
  output_bytes(cases[0], 2);
  EXPECT_GT(log.calls, 0);
  set_thread_parallel_runner(ParallelRunner());
  const int calls = log.calls;
  output_bytes(cases[0], 2);
  EXPECT_EQ(log.calls, calls);
}

TEST(ParallelRunner, TheCAbiSetsReadsAndClearsTheCallingThreadsRunner) {
  const std::vector<Case> cases = runner_cases();
  ASSERT_FALSE(cases.empty());
  HostLog log;
  attnkit_set_thread_parallel_runner(run_on_own_threads, &log);
  attnkit_parallel_run_fn run = nullptr;
  void* run_context = nullptr;
  attnkit_get_thread_parallel_runner(&run, &run_context);
  EXPECT_TRUE(run == run_on_own_threads && run_context == &log);
  const std::vector<std::string> hosted = output_bytes(cases[0], 2);
  attnkit_set_thread_parallel_runner(nullptr, nullptr);
  attnkit_get_thread_parallel_runner(&run, &run_context);
  EXPECT_TRUE(run == nullptr && run_context == nullptr);
  const int calls = log.calls;
  EXPECT_GT(calls, 0);
  EXPECT_TRUE(output_bytes(cases[0], 2) == hosted);
  EXPECT_EQ(log.calls, calls);
}

#endif

}  // namespace
}  // namespace attnkit
