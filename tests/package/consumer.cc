// attnkit tests: an application's use of the installed headers and library. On every kernel ISA this machine
// runs, it decodes a prompt and a few tokens over fp32, int8 and int4 KV caches with GqaKvCache, with and without a
// window (past its capacity), checking each step against the stateless op continuing the same past (the same bits),
// and runs a QAttention against the scalar ISA's; then the decode again on a pool of the application's own
// (attnkit/parallel.h); exits non-zero, naming the ISA and step, otherwise.
// Built unoptimized through add_subdirectory as well, where it once met a misaligned store optimized builds hid.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "attnkit/attnkit.h"
#include "attnkit/gqa.h"
#include "attnkit/kv_cache.h"
#include "attnkit/parallel.h"
#include "attnkit/qattention.h"

using namespace attnkit;

namespace {

// Returns an error message, or "" when every step matched. With a window, the cache holds 12 rows and the steps
// run past them (sliding_window_cache on the stateless side).
std::string check_decode(DType cache_dtype, int64_t window) {
  constexpr int64_t N = 8, Nk = 2, H = 64;
  const int64_t steps = window ? 8 : 4, capacity = window ? 12 : 64;
  const int bits = cache_dtype == DType::kInt8 ? 8 : cache_dtype == DType::kUInt8 ? 4 : 0;
  const int64_t row = bits == 4 ? H / 2 : H;
  GqaAttributes attrs;
  attrs.num_heads = N;
  attrs.kv_num_heads = Nk;
  if (bits) {
    attrs.k_quant_type = attrs.v_quant_type = "PER_TENSOR";
    attrs.kv_cache_bit_width = bits;
  }
  float scale = bits == 4 ? 0.2f : 0.01f;
  const TensorView scale_view{DType::kFloat32, {1}, &scale};
  GqaKvCache cache;
  Status st = cache.init({1, Nk, H, capacity, cache_dtype, window});
  if (!st.ok()) return "init: " + st.message();
  GqaAttributes stateless_attrs = attrs;
  if (window) stateless_attrs.sliding_window_cache = 1, stateless_attrs.local_window_size = window;

  Tensor past_key, past_value;
  // A quantized prompt takes a typed empty past, as in ORT; a window cache its whole (zeroed) buffer.
  past_key.reset(cache_dtype, {1, Nk, window ? capacity : 0, row});
  past_value.reset(cache_dtype, {1, Nk, window ? capacity : 0, row});
  for (int64_t step = 0, length = 0; step < steps; ++step) {
    const int64_t S = step == 0 ? 9 : 1;
    std::vector<float> q(S * N * H), k(S * Nk * H), v(S * Nk * H);
    for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.05f * i + step);
    for (size_t i = 0; i < k.size(); ++i) k[i] = std::cos(0.07f * i - step), v[i] = std::sin(0.11f * i);
    const TensorView qv{DType::kFloat32, {1, S, N * H}, q.data()}, kv{DType::kFloat32, {1, S, Nk * H}, k.data()},
        vv{DType::kFloat32, {1, S, Nk * H}, v.data()};
    GqaInputs in;
    in.query = &qv;
    in.key = &kv;
    in.value = &vv;
    if (bits) in.k_scale = in.v_scale = &scale_view;
    Tensor cached;
    if (!(st = cache.step(in, attrs, &cached)).ok()) return "step: " + st.message();

    const int32_t seqlens = static_cast<int32_t>(length + S - 1), total = static_cast<int32_t>(length + S);
    const TensorView seq_view{DType::kInt32, {1}, &seqlens}, total_view{DType::kInt32, {1}, &total};
    const TensorView pk = past_key.view(), pv = past_value.view();
    in.past_key = &pk;
    in.past_value = &pv;
    in.seqlens_k = &seq_view;
    in.total_sequence_length = &total_view;
    GqaOutputs stateless;
    if (!(st = group_query_attention(in, stateless_attrs, GqaRequest(), &stateless)).ok())
      return "stateless: " + st.message();
    if (cached.storage != stateless.output.storage) return "step " + std::to_string(step) + " differs";
    past_key = std::move(stateless.present_key);
    past_value = std::move(stateless.present_value);
    length += S;
  }
  return "";
}

// QAttention over 17 tokens (D = 96, 4 heads, int8 weights with per-column scales, causal): its output, or an empty
// tensor with the message in *error.
Tensor qattention_output(std::string* error) {
  constexpr int64_t S = 17, D = 96;
  std::vector<uint8_t> input(S * D);
  std::vector<int8_t> weight(D * 3 * D);
  std::vector<float> bias(3 * D), weight_scale(3 * D);
  for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<uint8_t>(i * 37 % 251);
  for (size_t i = 0; i < weight.size(); ++i) weight[i] = static_cast<int8_t>(static_cast<int>(i * 29 % 255) - 127);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.01f * static_cast<float>(i % 7), weight_scale[i] = 0.002f;
  float input_scale = 1.0f / 128;
  uint8_t input_zero = 128;
  const TensorView in_view{DType::kUInt8, {1, S, D}, input.data()}, w_view{DType::kInt8, {D, 3 * D}, weight.data()},
      b_view{DType::kFloat32, {3 * D}, bias.data()}, is_view{DType::kFloat32, {}, &input_scale},
      ws_view{DType::kFloat32, {3 * D}, weight_scale.data()}, iz_view{DType::kUInt8, {}, &input_zero};
  QAttentionInputs in;
  in.input = &in_view;
  in.weight = &w_view;
  in.bias = &b_view;
  in.input_scale = &is_view;
  in.weight_scale = &ws_view;
  in.input_zero_point = &iz_view;
  QAttentionAttributes attrs;
  attrs.num_heads = 4;
  attrs.unidirectional = 1;
  QAttentionOutputs out;
  const Status st = q_attention(in, attrs, QAttentionRequest(), &out);
  if (!st.ok()) *error = "qattention: " + st.message();
  return std::move(out.output);
}

// The application's pool: a thread per job beside the caller's own (job 0).
int g_regions = 0;
void run_on_app_threads(void*, int jobs, void (*job)(void*, int), void* job_context) {
  ++g_regions;
  std::vector<std::thread> threads;
  for (int j = 1; j < jobs; ++j) threads.emplace_back(job, job_context, j);
  job(job_context, 0);
  for (std::thread& t : threads) t.join();
}

}  // namespace

int main() {
  int checked = 0;
  std::string error;
  Tensor scalar_qattention;
  for (const char* isa : {"scalar", "avx2", "avx512", "neon", "wasm128"}) {
    if (attnkit_set_isa(isa) != 0) continue;  // not available here
    for (DType cache : {DType::kFloat32, DType::kInt8, DType::kUInt8}) {
      for (int64_t window : {0, 8}) {
        if (!(error = check_decode(cache, window)).empty())
          return std::fprintf(stderr, "%s, %s cache, window %d: %s\n", isa, dtype_name(cache), static_cast<int>(window),
                              error.c_str()), 1;
        ++checked;
      }
    }
    // The projection is exact on every ISA and the rest fp32: each output within 1e-5 of the tensor's peak from the
    // fp64 reference (the README's QAttention bound), so two ISAs within twice that of each other.
    const Tensor out = qattention_output(&error);
    if (!error.empty()) return std::fprintf(stderr, "%s: %s\n", isa, error.c_str()), 1;
    if (scalar_qattention.empty()) scalar_qattention = out;
    float peak = 0, worst = 0;
    for (int64_t i = 0; i < out.elements(); ++i) {
      peak = std::max(peak, std::fabs(scalar_qattention.as<float>()[i]));
      worst = std::max(worst, std::fabs(out.as<float>()[i] - scalar_qattention.as<float>()[i]));
    }
    if (!(worst <= 2e-5f * peak)) return std::fprintf(stderr, "%s: QAttention %g from scalar's\n", isa, worst), 1;
  }
  // check_decode's calls take the default thread count; on one CPU they never reach the runner.
  const ParallelRunner previous = set_thread_parallel_runner({run_on_app_threads, nullptr});
  error = check_decode(DType::kInt8, 8);
  set_thread_parallel_runner(previous);
  if (!error.empty()) return std::fprintf(stderr, "on the application's pool: %s\n", error.c_str()), 1;
  std::printf("attnkit package consumer: %d ISA x cache x window combinations decode as the stateless op does, "
              "QAttention agrees, and so does a decode on the application's pool (%d parallel regions); %s\n",
              checked, g_regions, attnkit_info_json());
  return checked > 0 ? 0 : 1;
}
