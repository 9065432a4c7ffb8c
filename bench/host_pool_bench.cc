// attnkit bench: decode steps between a host runtime's own parallel regions, as inside an ONNX Runtime session
// whose intra-op threads spin for a while after each op. On attnkit's pool the step's workers find the cores held
// by the spinning threads; through set_thread_parallel_runner (attnkit/parallel.h) those threads run its jobs.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "attnkit/gqa.h"
#include "attnkit/parallel.h"

namespace attnkit {
namespace {

// A host's pool: job 0 on the caller, job j on worker j % (workers + 1) - 1; a worker spins for `spin` after its
// last job before it sleeps, as ORT's threads do (session.intra_op.allow_spinning, on by default).
class SpinningPool {
 public:
  SpinningPool(int workers, std::chrono::microseconds spin) : spin_(spin) {
    for (int id = 1; id <= workers; ++id) threads_.emplace_back([this, id] { loop(id); });
  }
  ~SpinningPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  void run(int jobs, const std::function<void(int)>& fn) {
    fn_ = &fn;
    jobs_ = jobs;
    pending_.store(static_cast<int>(threads_.size()), std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mu_);
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    run_share(0);
    while (pending_.load(std::memory_order_acquire) > 0) {
    }
  }

 private:
  void run_share(int id) {
    const int stride = static_cast<int>(threads_.size()) + 1;
    for (int j = id; j < jobs_; j += stride) (*fn_)(j);
  }

  void loop(int id) {
    uint64_t seen = 0;
    for (;;) {
      const auto fresh = [&] { return generation_.load(std::memory_order_acquire) != seen || stop_; };
      const auto until = std::chrono::steady_clock::now() + spin_;
      while (!fresh() && std::chrono::steady_clock::now() < until) {
      }
      if (!fresh()) {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, fresh);
      }
      if (stop_) return;
      seen = generation_.load(std::memory_order_acquire);
      run_share(id);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  const std::chrono::microseconds spin_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  const std::function<void(int)>* fn_ = nullptr;
  int jobs_ = 0;
};

void run_on_spinning_pool(void* pool, int jobs, void (*job)(void*, int), void* job_context) {
  static_cast<SpinningPool*>(pool)->run(jobs, [&](int j) { job(job_context, j); });
}

// One decode step of a small model's layer (Qwen2.5-0.5B: N=14, Nk=2, H=64) over 512 cached fp32 tokens: short
// enough that a worker arriving late costs the step much of its time.
struct DecodeStep {
  std::vector<std::vector<float>> data;
  std::vector<TensorView> views;
  int32_t seqlens = 511, total = 512;
  GqaInputs inputs;
  GqaAttributes attrs;

  DecodeStep() {
    constexpr int64_t N = 14, Nk = 2, H = 64, past = 511;
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    const Shape shapes[] = {{1, 1, N * H}, {1, 1, Nk * H}, {1, 1, Nk * H}, {1, Nk, past, H}, {1, Nk, past, H}};
    views.reserve(7);
    for (const Shape& shape : shapes) {
      data.emplace_back(static_cast<size_t>(shape_elements(shape)));
      for (float& v : data.back()) v = dist(rng);
      views.push_back(TensorView{DType::kFloat32, shape, data.back().data()});
    }
    views.push_back(TensorView{DType::kInt32, {1}, &seqlens});
    views.push_back(TensorView{DType::kInt32, {1}, &total});
    inputs.query = &views[0];
    inputs.key = &views[1];
    inputs.value = &views[2];
    inputs.past_key = &views[3];
    inputs.past_value = &views[4];
    inputs.seqlens_k = &views[5];
    inputs.total_sequence_length = &views[6];
    attrs.num_heads = N;
    attrs.kv_num_heads = Nk;
  }
};

// The host's own work between steps: a chain of multiply-adds per job (about 20 us).
void host_op(SpinningPool& pool, int jobs) {
  pool.run(jobs, [](int j) {
    double x = j;
    for (int i = 0; i < 20000; ++i) x = x * 1.0000001 + 1e-9;
    benchmark::DoNotOptimize(x);
  });
}

// mode 0: the step alone on attnkit's pool; 1: after each host op, on attnkit's pool; 2: after each host op, on
// the host's pool; 3: the host op alone. What a step costs beside the host is mode 1's or mode 2's time less mode 3's.
void BM_DecodeBesideHostPool(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0)), mode = static_cast<int>(state.range(1));
  SpinningPool pool(threads - 1, std::chrono::microseconds(1000));
  DecodeStep step;
  RunOptions options;
  options.threads = threads;
  const ParallelRunner previous =
      set_thread_parallel_runner(mode == 2 ? ParallelRunner{run_on_spinning_pool, &pool} : ParallelRunner());
  GqaOutputs outputs;
  for (auto _ : state) {
    if (mode > 0) host_op(pool, threads);
    if (mode == 3) continue;
    const Status st = group_query_attention(step.inputs, step.attrs, GqaRequest(), &outputs, options);
    if (!st.ok()) state.SkipWithError(st.message().c_str());
  }
  set_thread_parallel_runner(previous);
  static const char* const labels[] = {"step alone, attnkit's pool", "host op + step, attnkit's pool",
                                       "host op + step, host's pool", "host op alone"};
  state.SetLabel(labels[mode]);
}

BENCHMARK(BM_DecodeBesideHostPool)
    ->ArgNames({"threads", "mode"})
    ->ArgsProduct({{2}, {0, 1, 2, 3}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace attnkit
