// attnkit tests: the C ABI (attnkit/attnkit.h) — the wasm build's only door, so its plumbing (names,
// dtypes, attributes, outputs) and its error contract (code 2 + one-line message, never a crash) are checked.
#include <gtest/gtest.h>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "attnkit/attnkit.h"
#include "attnkit/kv_cache.h"
#include "attnkit/gqa.h"
#include "common/json.h"
#include "common/thread_pool.h"
#include "dispatch.h"

namespace attnkit {
namespace {

// A small decode-free prompt: B=1, S=3, N=4, Nk=2, H=8.
struct SmallGqa {
  std::vector<float> q, k, v;
  int32_t seqlens = 2, total = 3;
  int64_t q_shape[3] = {1, 3, 32}, kv_shape[3] = {1, 3, 16}, seq_shape[1] = {1};
  SmallGqa() : q(96), k(48), v(48) {
    for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>((i * 37 % 19)) / 19.0f - 0.5f;
    for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<float>((i * 11 % 23)) / 23.0f - 0.5f;
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 5 % 17)) / 17.0f - 0.5f;
  }
  std::vector<attnkit_tensor> tensors() const {
    return {{"query", ATTNKIT_FLOAT32, 3, q_shape, q.data()},
            {"key", ATTNKIT_FLOAT32, 3, kv_shape, k.data()},
            {"value", ATTNKIT_FLOAT32, 3, kv_shape, v.data()},
            {"seqlens_k", ATTNKIT_INT32, 1, seq_shape, &seqlens},
            {"total_sequence_length", ATTNKIT_INT32, 0, nullptr, &total}};
  }
  GqaOutputs direct(float scale, size_t* peak_scratch_bytes = nullptr) const {
    TensorView tq{DType::kFloat32, {1, 3, 32}, q.data()}, tk{DType::kFloat32, {1, 3, 16}, k.data()},
        tv{DType::kFloat32, {1, 3, 16}, v.data()}, ts{DType::kInt32, {1}, &seqlens}, tt{DType::kInt32, {}, &total};
    GqaInputs in;
    in.query = &tq;
    in.key = &tk;
    in.value = &tv;
    in.seqlens_k = &ts;
    in.total_sequence_length = &tt;
    GqaAttributes a;
    a.num_heads = 4;
    a.kv_num_heads = 2;
    a.scale = scale;
    GqaOutputs out;
    RunOptions options;
    options.peak_scratch_bytes = peak_scratch_bytes;
    Status st = group_query_attention(in, a, GqaRequest(), &out, options);
    EXPECT_TRUE(st.ok()) << st.message();
    return out;
  }
};

struct ResultGuard {
  attnkit_result* r = nullptr;
  ~ResultGuard() { attnkit_result_free(r); }
};

int run(const char* op, const char* attrs, const std::vector<attnkit_tensor>& in, const char* outputs,
        ResultGuard* g, const char* path = nullptr) {
  return attnkit_run(op, attrs, in.data(), static_cast<int>(in.size()), outputs, 0, path, &g->r);
}

TEST(CApi, RunsGqaLikeTheCppApi) {
  SmallGqa g;
  ResultGuard r;
  ASSERT_EQ(run("com.microsoft.GroupQueryAttention", R"({"num_heads":4,"kv_num_heads":2,"scale":0.5})", g.tensors(),
                nullptr, &r),
            ATTNKIT_OK)
      << attnkit_result_error(r.r);
  EXPECT_STREQ(attnkit_result_error(r.r), "");
  ASSERT_EQ(attnkit_result_count(r.r), 3);  // default outputs: output, present_key, present_value
  EXPECT_STREQ(attnkit_result_name(r.r, 0), "output");
  EXPECT_STREQ(attnkit_result_name(r.r, 1), "present_key");
  EXPECT_STREQ(attnkit_result_name(r.r, 2), "present_value");
  size_t peak = 0;
  GqaOutputs want = g.direct(0.5f, &peak);
  EXPECT_GT(peak, 0u);
  EXPECT_EQ(attnkit_result_peak_scratch_bytes(r.r), peak);
  const Tensor* expected[] = {&want.output, &want.present_key, &want.present_value};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(attnkit_result_dtype(r.r, i), ATTNKIT_FLOAT32);
    ASSERT_EQ(attnkit_result_rank(r.r, i), static_cast<int>(expected[i]->shape.size()));
    EXPECT_EQ(Shape(attnkit_result_shape(r.r, i), attnkit_result_shape(r.r, i) + attnkit_result_rank(r.r, i)),
              expected[i]->shape);
    ASSERT_EQ(attnkit_result_bytes(r.r, i), expected[i]->bytes());
    // Same library, same inputs, same attributes: bit-identical.
    EXPECT_EQ(std::memcmp(attnkit_result_data(r.r, i), expected[i]->storage.data(), expected[i]->bytes()), 0);
  }
  // The scale attribute really reaches the op: the default scale (1/sqrt(8)) gives other numbers.
  GqaOutputs other = g.direct(0.0f);
  EXPECT_NE(std::memcmp(attnkit_result_data(r.r, 0), other.output.storage.data(), other.output.bytes()), 0);
  EXPECT_EQ(attnkit_result_data(r.r, 3), nullptr);  // out of range reads nothing
  EXPECT_EQ(attnkit_result_dtype(r.r, -1), -1);
}

// The wasm package stops the pool before it terminates its workers; the next call must start it again.
TEST(CApi, StopThreadsJoinsThePoolAndTheNextCallRestartsIt) {
  SmallGqa g;
  const char* attrs = R"({"num_heads":4,"kv_num_heads":2})";
  ResultGuard before, after;
  ASSERT_EQ(attnkit_run("com.microsoft.GroupQueryAttention", attrs, g.tensors().data(), 5, "output", 2, nullptr,
                        &before.r),
            ATTNKIT_OK);
  attnkit_stop_threads();
  attnkit_stop_threads();  // nothing left to stop
  ASSERT_EQ(attnkit_run("com.microsoft.GroupQueryAttention", attrs, g.tensors().data(), 5, "output", 2, nullptr,
                        &after.r),
            ATTNKIT_OK);
  ASSERT_EQ(attnkit_result_bytes(before.r, 0), attnkit_result_bytes(after.r, 0));
  EXPECT_EQ(std::memcmp(attnkit_result_data(before.r, 0), attnkit_result_data(after.r, 0),
                        attnkit_result_bytes(before.r, 0)),
            0);
  std::vector<std::atomic<int>> runs(64);
  parallel_for(runs.size(), 2, [&](size_t task, int) { runs[task].fetch_add(1); });
  attnkit_stop_threads();
  for (const auto& r : runs) EXPECT_EQ(r.load(), 1);
}

TEST(CApi, OutputSelectionAndPath) {
  SmallGqa g;
  ResultGuard r;
  ASSERT_EQ(run("GroupQueryAttention", R"({"num_heads":4,"kv_num_heads":2})", g.tensors(), " present_value ,output",
                &r, "naive"),
            ATTNKIT_OK)
      << attnkit_result_error(r.r);
  ASSERT_EQ(attnkit_result_count(r.r), 2);
  EXPECT_STREQ(attnkit_result_name(r.r, 0), "present_value");
  EXPECT_STREQ(attnkit_result_name(r.r, 1), "output");
}

TEST(CApi, InvalidInputsReturnTwoWithOneLine) {
  SmallGqa g;
  std::vector<attnkit_tensor> in = g.tensors();
  const char* attrs = R"({"num_heads":4,"kv_num_heads":2})";
  auto expect_invalid = [&](const char* op, const char* a, const std::vector<attnkit_tensor>& t, const char* outs,
                            const std::string& message, const char* path = nullptr) {
    ResultGuard r;
    EXPECT_EQ(run(op, a, t, outs, &r, path), ATTNKIT_INVALID) << message;
    std::string got = attnkit_result_error(r.r);
    EXPECT_EQ(got, message);
    EXPECT_EQ(got.find('\n'), std::string::npos);
    EXPECT_EQ(attnkit_result_count(r.r), 0);
    EXPECT_EQ(attnkit_result_peak_scratch_bytes(r.r), 0u);
  };
  {
    ResultGuard r;
    EXPECT_EQ(run("Attention", attrs, in, nullptr, &r), ATTNKIT_INVALID);
    EXPECT_EQ(std::string(attnkit_result_error(r.r)).rfind("op: \"Attention\" is not a supported operator (", 0), 0u);
  }
  expect_invalid("GroupQueryAttention", "{\"num_heads\":4,", in, nullptr,
                 "attrs: JSON line 1, column 16: expected a string key in object");
  expect_invalid("GroupQueryAttention", "[]", in, nullptr, "attrs: must be a JSON object");
  expect_invalid("GroupQueryAttention", R"({"num_heads":4,"kv_num_heads":2,"num_head":4})", in, nullptr,
                 "num_head: not an attribute of GroupQueryAttention");
  expect_invalid("GroupQueryAttention", R"({"num_heads":4.5,"kv_num_heads":2})", in, nullptr,
                 "num_heads: attribute must be an integer, got 4.5");
  expect_invalid("GroupQueryAttention", R"({"num_heads":"4","kv_num_heads":2})", in, nullptr,
                 "num_heads: attribute must be an integer, got a string");
  expect_invalid("GroupQueryAttention", R"({"kv_num_heads":2})", in, nullptr,
                 "num_heads: required attribute of GroupQueryAttention is missing");
  expect_invalid("GroupQueryAttention", R"({"num_heads":4,"kv_num_heads":2,"scale":"x"})", in, nullptr,
                 "scale: attribute must be a number (\"Infinity\", \"-Infinity\" or \"NaN\" for those), got a string");
  // Non-finite floats, which JSON cannot write as numbers, arrive as strings and meet the op's own rules.
  expect_invalid("GroupQueryAttention", R"({"num_heads":4,"kv_num_heads":2,"scale":"NaN"})", in, nullptr,
                 "scale = nan must be finite");
  expect_invalid("GroupQueryAttention", R"({"num_heads":4,"kv_num_heads":2,"softcap":"Infinity"})", in, nullptr,
                 "softcap = inf must be finite (0 or less: off)");
  expect_invalid("GroupQueryAttention", R"({"num_heads":4,"kv_num_heads":2,"k_quant_type":1})", in, nullptr,
                 "k_quant_type: attribute must be a string, got a number");
  expect_invalid("GroupQueryAttention", attrs, in, "output,bogus",
                 "bogus: not an output of GroupQueryAttention (outputs: output, present_key, present_value, "
                 "output_qk)");
  expect_invalid("GroupQueryAttention", attrs, in, "output,,present_key", "outputs: empty name in \"output,,present_key\"");
  expect_invalid("GroupQueryAttention", attrs, in, "output,output", "output: output requested twice");
  expect_invalid("GroupQueryAttention", attrs, in, nullptr, "path: \"fast\" must be auto, naive or flash", "fast");

  std::vector<attnkit_tensor> extra = in;
  extra.push_back({"mask", ATTNKIT_INT32, 0, nullptr, &g.seqlens});
  ResultGuard r;
  EXPECT_EQ(run("GroupQueryAttention", attrs, extra, nullptr, &r), ATTNKIT_INVALID);
  EXPECT_EQ(std::string(attnkit_result_error(r.r)).substr(0, 45), "mask: not an input of GroupQueryAttention (in");

  std::vector<attnkit_tensor> twice = in;
  twice.push_back(in[0]);
  expect_invalid("GroupQueryAttention", attrs, twice, nullptr, "query: input given twice");
  std::vector<attnkit_tensor> bad_dtype = in;
  bad_dtype[0].dtype = 7;
  expect_invalid("GroupQueryAttention", attrs, bad_dtype, nullptr, "query: dtype code 7 is not valid (0..6)");
  std::vector<attnkit_tensor> bad_rank = in;
  bad_rank[0].rank = -1;
  expect_invalid("GroupQueryAttention", attrs, bad_rank, nullptr, "query: rank -1 is not in [0, 16]");
  std::vector<attnkit_tensor> no_name = in;
  no_name[1].name = nullptr;
  expect_invalid("GroupQueryAttention", attrs, no_name, nullptr, "inputs[1]: name is null");
  std::vector<attnkit_tensor> no_shape = in;
  no_shape[0].shape = nullptr;
  expect_invalid("GroupQueryAttention", attrs, no_shape, nullptr, "query: shape is null");

  // The op's own validation comes through unchanged (whatever its wording, it is one line naming query).
  std::vector<attnkit_tensor> bad_shape = in;
  int64_t rank2[2] = {3, 32};
  bad_shape[0].rank = 2;
  bad_shape[0].shape = rank2;
  ResultGuard r2;
  EXPECT_EQ(run("GroupQueryAttention", attrs, bad_shape, nullptr, &r2), ATTNKIT_INVALID);
  std::string msg = attnkit_result_error(r2.r);
  EXPECT_EQ(msg.rfind("query", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);

  EXPECT_EQ(attnkit_run("GroupQueryAttention", attrs, in.data(), 5, nullptr, 0, nullptr, nullptr),
            ATTNKIT_INTERNAL_ERROR);  // nowhere to put the message
  EXPECT_EQ(attnkit_result_count(nullptr), 0);
  attnkit_result_free(nullptr);
}

TEST(CApi, InfoAndIsa) {
  JsonValue info;
  ASSERT_TRUE(parse_json(std::string(attnkit_info_json()), &info).ok());
  ASSERT_TRUE(info.is_object());
  for (const char* key :
       {"version", "cpu_features", "available_isas", "isa", "quantized_qk", "qattention_gemm", "threads"}) {
    EXPECT_NE(info.find(key), nullptr) << key;
  }
  EXPECT_EQ(info.find("isa")->as_string(), std::string(kernel_table().isa));
  EXPECT_EQ(info.find("qattention_gemm")->as_string(), std::string(kernel_table().gemm_u8x8.variant));
  EXPECT_GE(info.find("threads")->as_double(), 1.0);
  EXPECT_EQ(attnkit_set_isa("no-such-isa"), ATTNKIT_INVALID);
  EXPECT_EQ(attnkit_set_isa(nullptr), ATTNKIT_INVALID);
  std::string before = kernel_table().isa;
  ASSERT_EQ(attnkit_set_isa("scalar"), ATTNKIT_OK);
  ASSERT_TRUE(parse_json(std::string(attnkit_info_json()), &info).ok());
  EXPECT_EQ(info.find("isa")->as_string(), "scalar");
  EXPECT_EQ(info.find("quantized_qk")->as_string(), "exact-int16-limbs");
  EXPECT_EQ(info.find("qattention_gemm")->as_string(), "scalar");
  ASSERT_EQ(attnkit_set_isa(before.c_str()), ATTNKIT_OK);
}

// The C ABI's KV cache gives exactly the C++ GqaKvCache's outputs (the same code path), and reports
// misuse as one-line messages.
TEST(CApi, KvCacheStepsMatchTheCppCache) {
  const int64_t N = 4, Nk = 2, H = 16;
  attnkit_kv_cache* cache = nullptr;
  attnkit_result* r = nullptr;
  ASSERT_EQ(attnkit_kv_cache_create(1, Nk, H, 8, ATTNKIT_FLOAT32, &cache, &r), ATTNKIT_OK);
  attnkit_result_free(r);
  GqaKvCache reference;
  ASSERT_TRUE(reference.init({1, Nk, H, 8, DType::kFloat32}).ok());
  GqaAttributes attrs;
  attrs.num_heads = N;
  attrs.kv_num_heads = Nk;
  const char* attrs_json = "{\"num_heads\": 4, \"kv_num_heads\": 2}";
  for (int64_t S : {3, 1, 1}) {
    std::vector<float> q(S * N * H), k(S * Nk * H), v(S * Nk * H);
    for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.1f * i + S);
    for (size_t i = 0; i < k.size(); ++i) k[i] = std::cos(0.2f * i - S), v[i] = std::sin(0.3f * i);
    int64_t qs[3] = {1, S, N * H}, ks[3] = {1, S, Nk * H};
    std::vector<attnkit_tensor> in = {{"query", ATTNKIT_FLOAT32, 3, qs, q.data()},
                                      {"key", ATTNKIT_FLOAT32, 3, ks, k.data()},
                                      {"value", ATTNKIT_FLOAT32, 3, ks, v.data()}};
    ASSERT_EQ(attnkit_kv_cache_step(cache, attrs_json, in.data(), 3, 1, nullptr, &r), ATTNKIT_OK)
        << attnkit_result_error(r);
    ASSERT_EQ(attnkit_result_count(r), 1);
    TensorView qv{DType::kFloat32, {1, S, N * H}, q.data()}, kv{DType::kFloat32, {1, S, Nk * H}, k.data()},
        vv{DType::kFloat32, {1, S, Nk * H}, v.data()};
    GqaInputs gi;
    gi.query = &qv;
    gi.key = &kv;
    gi.value = &vv;
    Tensor want;
    ASSERT_TRUE(reference.step(gi, attrs, &want).ok());
    ASSERT_EQ(attnkit_result_bytes(r, 0), want.bytes());
    EXPECT_EQ(0, std::memcmp(attnkit_result_data(r, 0), want.storage.data(), want.bytes()));
    attnkit_result_free(r);
  }
  EXPECT_EQ(attnkit_kv_cache_length(cache), 5);
  // Past, seqlens and totals come from the cache: passing them is an error naming them.
  int64_t one[1] = {1};
  int32_t seqlen = 5;
  std::vector<attnkit_tensor> with_seqlens = {{"seqlens_k", ATTNKIT_INT32, 1, one, &seqlen}};
  EXPECT_EQ(attnkit_kv_cache_step(cache, attrs_json, with_seqlens.data(), 1, 1, nullptr, &r), ATTNKIT_INVALID);
  EXPECT_NE(std::string(attnkit_result_error(r)).find("seqlens_k"), std::string::npos) << attnkit_result_error(r);
  attnkit_result_free(r);
  attnkit_kv_cache_clear(cache);
  EXPECT_EQ(attnkit_kv_cache_length(cache), 0);
  attnkit_kv_cache_free(cache);

  EXPECT_EQ(attnkit_kv_cache_create(1, 2, 16, 0, ATTNKIT_FLOAT32, &cache, &r), ATTNKIT_INVALID);
  EXPECT_EQ(cache, nullptr);
  EXPECT_NE(std::string(attnkit_result_error(r)).find("capacity"), std::string::npos);
  attnkit_result_free(r);
}

// read hands out the cached tokens as present tensors, load puts them into another cache (whose next step then
// gives the first cache's bits), reserve grows a cache, truncate drops tokens; misuse is code 2 with a message
// naming the rule.
TEST(CApi, KvCacheReadLoadTruncate) {
  const char* attrs_json = "{\"num_heads\": 4, \"kv_num_heads\": 2}";
  SmallGqa g;
  std::vector<attnkit_tensor> prompt = g.tensors();
  prompt.resize(3);  // query, key, value: the cache supplies the rest
  attnkit_kv_cache *first = nullptr, *second = nullptr;
  ResultGuard created1, created2, stepped, read;
  ASSERT_EQ(attnkit_kv_cache_create(1, 2, 8, 8, ATTNKIT_FLOAT32, &first, &created1.r), ATTNKIT_OK);
  ASSERT_EQ(attnkit_kv_cache_create(1, 2, 8, 5, ATTNKIT_FLOAT32, &second, &created2.r), ATTNKIT_OK);
  ASSERT_EQ(attnkit_kv_cache_step(first, attrs_json, prompt.data(), 3, 1, nullptr, &stepped.r), ATTNKIT_OK);
  ASSERT_EQ(attnkit_kv_cache_read(first, &read.r), ATTNKIT_OK) << attnkit_result_error(read.r);
  ASSERT_EQ(attnkit_result_count(read.r), 2);
  EXPECT_STREQ(attnkit_result_name(read.r, 0), "present_key");
  EXPECT_STREQ(attnkit_result_name(read.r, 1), "present_value");
  ASSERT_EQ(attnkit_result_rank(read.r, 0), 4);
  EXPECT_EQ(attnkit_result_shape(read.r, 0)[2], 3);
  std::vector<attnkit_tensor> past = {
      {"past_key", ATTNKIT_FLOAT32, 4, attnkit_result_shape(read.r, 0), attnkit_result_data(read.r, 0)},
      {"past_value", ATTNKIT_FLOAT32, 4, attnkit_result_shape(read.r, 1), attnkit_result_data(read.r, 1)}};
  ResultGuard loaded;
  ASSERT_EQ(attnkit_kv_cache_load(second, past.data(), 2, -1, &loaded.r), ATTNKIT_OK) << attnkit_result_error(loaded.r);
  EXPECT_EQ(attnkit_kv_cache_length(second), 3);

  // One more token on both: the same bits.
  std::vector<float> q(32, 0.125f), kv(16, -0.25f);
  int64_t qs[3] = {1, 1, 32}, ks[3] = {1, 1, 16};
  std::vector<attnkit_tensor> token = {{"query", ATTNKIT_FLOAT32, 3, qs, q.data()},
                                       {"key", ATTNKIT_FLOAT32, 3, ks, kv.data()},
                                       {"value", ATTNKIT_FLOAT32, 3, ks, kv.data()}};
  ResultGuard a, b;
  ASSERT_EQ(attnkit_kv_cache_step(first, attrs_json, token.data(), 3, 1, nullptr, &a.r), ATTNKIT_OK);
  ASSERT_EQ(attnkit_kv_cache_step(second, attrs_json, token.data(), 3, 1, nullptr, &b.r), ATTNKIT_OK);
  ASSERT_EQ(attnkit_result_bytes(a.r, 0), attnkit_result_bytes(b.r, 0));
  EXPECT_EQ(0, std::memcmp(attnkit_result_data(a.r, 0), attnkit_result_data(b.r, 0), attnkit_result_bytes(a.r, 0)));

  ResultGuard truncated, too_long, over_capacity, stranger;
  ASSERT_EQ(attnkit_kv_cache_truncate(first, 2, &truncated.r), ATTNKIT_OK);
  EXPECT_EQ(attnkit_kv_cache_length(first), 2);
  EXPECT_EQ(attnkit_kv_cache_truncate(first, 3, &too_long.r), ATTNKIT_INVALID);
  EXPECT_NE(std::string(attnkit_result_error(too_long.r)).find("it holds 2"), std::string::npos);
  int64_t big[4] = {1, 2, 6, 8};
  std::vector<float> rows(2 * 6 * 8);
  std::vector<attnkit_tensor> six = {{"past_key", ATTNKIT_FLOAT32, 4, big, rows.data()},
                                     {"past_value", ATTNKIT_FLOAT32, 4, big, rows.data()}};
  EXPECT_EQ(attnkit_kv_cache_load(second, six.data(), 2, -1, &over_capacity.r), ATTNKIT_INVALID);
  EXPECT_NE(std::string(attnkit_result_error(over_capacity.r)).find("capacity 5"), std::string::npos);
  ResultGuard grown, loaded_six;
  ASSERT_EQ(attnkit_kv_cache_reserve(second, 6, &grown.r), ATTNKIT_OK);
  ASSERT_EQ(attnkit_kv_cache_load(second, six.data(), 2, -1, &loaded_six.r), ATTNKIT_OK);
  EXPECT_EQ(attnkit_kv_cache_length(second), 6);
  six[1].name = "value";
  EXPECT_EQ(attnkit_kv_cache_load(second, six.data(), 2, 2, &stranger.r), ATTNKIT_INVALID);
  EXPECT_NE(std::string(attnkit_result_error(stranger.r)).find("not value"), std::string::npos);
  EXPECT_EQ(attnkit_kv_cache_length(second), 6);
  attnkit_kv_cache_free(first);
  attnkit_kv_cache_free(second);
}

// A shared-buffer entry's result holds only "output", with the bits of the stateless call's first output.
void expect_same_output(const ResultGuard& shared, const ResultGuard& stateless) {
  ASSERT_EQ(attnkit_result_count(shared.r), 1);
  EXPECT_STREQ(attnkit_result_name(shared.r, 0), "output");
  ASSERT_EQ(attnkit_result_bytes(shared.r, 0), attnkit_result_bytes(stateless.r, 0));
  EXPECT_EQ(0, std::memcmp(attnkit_result_data(shared.r, 0), attnkit_result_data(stateless.r, 0),
                           attnkit_result_bytes(stateless.r, 0)));
}

// The shared-buffer entry on caches laid out with one free row per head gives the stateless call's bits: its
// output, and caches equal to present_key/present_value. A total past the capacity is an error.
TEST(CApi, InPlaceGqaMatchesTheStatelessCall) {
  const int64_t B = 2, N = 4, Nk = 2, H = 8, P = 5, rows = B * Nk;
  std::vector<float> q(B * N * H), k(B * Nk * H), v(B * Nk * H), past_k(rows * P * H), past_v(rows * P * H);
  for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.37f * i);
  for (size_t i = 0; i < k.size(); ++i) k[i] = std::cos(0.21f * i), v[i] = std::sin(0.13f * i + 1);
  for (size_t i = 0; i < past_k.size(); ++i) past_k[i] = std::cos(0.07f * i), past_v[i] = std::sin(0.05f * i);
  int32_t seqlens[2] = {P, P}, total = P + 1;
  int64_t qs[3] = {B, 1, N * H}, ks[3] = {B, 1, Nk * H}, ps[4] = {B, Nk, P, H}, cs[4] = {B, Nk, P + 1, H}, bs[1] = {B};
  const char* attrs = R"({"num_heads":4,"kv_num_heads":2})";
  std::vector<attnkit_tensor> in = {{"query", ATTNKIT_FLOAT32, 3, qs, q.data()},
                                    {"key", ATTNKIT_FLOAT32, 3, ks, k.data()},
                                    {"value", ATTNKIT_FLOAT32, 3, ks, v.data()},
                                    {"past_key", ATTNKIT_FLOAT32, 4, ps, past_k.data()},
                                    {"past_value", ATTNKIT_FLOAT32, 4, ps, past_v.data()},
                                    {"seqlens_k", ATTNKIT_INT32, 1, bs, seqlens},
                                    {"total_sequence_length", ATTNKIT_INT32, 0, nullptr, &total}};
  ResultGuard stateless;
  ASSERT_EQ(run("GroupQueryAttention", attrs, in, nullptr, &stateless), ATTNKIT_OK)
      << attnkit_result_error(stateless.r);

  std::vector<float> cache_k(rows * (P + 1) * H, -1.0f), cache_v(cache_k.size(), -1.0f);
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(past_k.begin() + r * P * H, past_k.begin() + (r + 1) * P * H, cache_k.begin() + r * (P + 1) * H);
    std::copy(past_v.begin() + r * P * H, past_v.begin() + (r + 1) * P * H, cache_v.begin() + r * (P + 1) * H);
  }
  in[3] = {"past_key", ATTNKIT_FLOAT32, 4, cs, cache_k.data()};
  in[4] = {"past_value", ATTNKIT_FLOAT32, 4, cs, cache_v.data()};
  ResultGuard shared;
  ASSERT_EQ(attnkit_run_gqa_in_place(attrs, in.data(), static_cast<int>(in.size()), "output,present_key,present_value",
                                     1, nullptr, &shared.r),
            ATTNKIT_OK)
      << attnkit_result_error(shared.r);
  expect_same_output(shared, stateless);
  ASSERT_EQ(attnkit_result_bytes(stateless.r, 1), cache_k.size() * sizeof(float));
  EXPECT_EQ(0, std::memcmp(attnkit_result_data(stateless.r, 1), cache_k.data(), cache_k.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(attnkit_result_data(stateless.r, 2), cache_v.data(), cache_v.size() * sizeof(float)));

  total = P + 2;  // one more row than the caches hold
  seqlens[0] = seqlens[1] = P + 1;
  ResultGuard too_long;
  EXPECT_EQ(attnkit_run_gqa_in_place(attrs, in.data(), static_cast<int>(in.size()), nullptr, 1, nullptr, &too_long.r),
            ATTNKIT_INVALID);
  EXPECT_NE(std::string(attnkit_result_error(too_long.r)).find("capacity"), std::string::npos)
      << attnkit_result_error(too_long.r);
}

// QAttention's in-place entry over a past laid out with S free rows per head gives the stateless call's bits:
// its output, and a past buffer equal to present. Head size 16 reads K and V straight from present, 12 gathers
// them into padded rows; S = 3 also masks causally. A past without room for the new rows is an error.
void check_in_place_qattention(int64_t B, int64_t S, int64_t N, int64_t H, int64_t P) {
  SCOPED_TRACE("B=" + std::to_string(B) + " S=" + std::to_string(S) + " H=" + std::to_string(H));
  const int64_t D = N * H, heads = 2 * B * N;
  std::vector<uint8_t> x(B * S * D), w(D * 3 * D);
  std::vector<float> bias(3 * D), past(heads * P * H);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint8_t>((i * 53 + 7) % 256);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.1f * std::sin(0.3f * i);
  for (size_t i = 0; i < past.size(); ++i) past[i] = std::cos(0.11f * i);
  float x_scale = 0.02f, w_scale = 0.003f;
  int64_t xs[3] = {B, S, D}, ws[2] = {D, 3 * D}, bs[1] = {3 * D}, ps[5] = {2, B, N, P, H}, cs[5] = {2, B, N, P + S, H};
  const std::string attrs = R"({"num_heads":)" + std::to_string(N) + R"(,"unidirectional":1})";
  std::vector<attnkit_tensor> in = {{"input", ATTNKIT_UINT8, 3, xs, x.data()},
                                    {"weight", ATTNKIT_INT8, 2, ws, w.data()},
                                    {"bias", ATTNKIT_FLOAT32, 1, bs, bias.data()},
                                    {"input_scale", ATTNKIT_FLOAT32, 0, nullptr, &x_scale},
                                    {"weight_scale", ATTNKIT_FLOAT32, 0, nullptr, &w_scale},
                                    {"past", ATTNKIT_FLOAT32, 5, ps, past.data()}};
  ResultGuard stateless;
  ASSERT_EQ(run("QAttention", attrs.c_str(), in, "output,present", &stateless), ATTNKIT_OK)
      << attnkit_result_error(stateless.r);

  std::vector<float> cache(heads * (P + S) * H, -1.0f);
  for (int64_t h = 0; h < heads; ++h)
    std::copy(past.begin() + h * P * H, past.begin() + (h + 1) * P * H, cache.begin() + h * (P + S) * H);
  in[5] = {"past", ATTNKIT_FLOAT32, 5, cs, cache.data()};
  ResultGuard shared;
  ASSERT_EQ(attnkit_run_qattention_in_place(attrs.c_str(), in.data(), static_cast<int>(in.size()), "output,present", 1,
                                            nullptr, &shared.r),
            ATTNKIT_OK)
      << attnkit_result_error(shared.r);
  expect_same_output(shared, stateless);
  ASSERT_EQ(attnkit_result_bytes(stateless.r, 1), cache.size() * sizeof(float));
  EXPECT_EQ(0, std::memcmp(attnkit_result_data(stateless.r, 1), cache.data(), cache.size() * sizeof(float)));

  int64_t short_shape[5] = {2, B, N, S - 1, H};
  in[5] = {"past", ATTNKIT_FLOAT32, 5, short_shape, cache.data()};
  ResultGuard too_short;
  EXPECT_EQ(attnkit_run_qattention_in_place(attrs.c_str(), in.data(), static_cast<int>(in.size()), nullptr, 1, nullptr,
                                            &too_short.r),
            ATTNKIT_INVALID);
  EXPECT_NE(std::string(attnkit_result_error(too_short.r)).find("room for the"), std::string::npos)
      << attnkit_result_error(too_short.r);
}

TEST(CApi, InPlaceQAttentionMatchesTheStatelessCall) {
  check_in_place_qattention(2, 1, 2, 16, 9);
  check_in_place_qattention(1, 3, 2, 16, 5);
  check_in_place_qattention(2, 1, 2, 12, 9);
  check_in_place_qattention(1, 3, 3, 12, 4);
}

// The QAttention cache's entries: a prompt and a token give the stateless calls' bits and read() their present,
// which load() takes back; a null cache, a step past the capacity, a load of anything but past and null data are
// refused.
TEST(CApi, QAttentionCacheMatchesTheStatelessCalls) {
  const int64_t N = 2, H = 16, D = N * H;
  std::vector<uint8_t> prompt(3 * D), token(D), w(D * 3 * D);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  for (size_t i = 0; i < token.size(); ++i) token[i] = static_cast<uint8_t>((i * 29 + 5) % 256);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint8_t>((i * 53 + 7) % 256);
  std::vector<float> bias(3 * D, 0.05f);
  float x_scale = 0.02f, w_scale = 0.003f;
  int64_t ps[3] = {1, 3, D}, ts[3] = {1, 1, D}, ws[2] = {D, 3 * D}, bs[1] = {3 * D};
  const char* attrs = R"({"num_heads":2,"unidirectional":1})";
  const auto inputs = [&](int64_t* shape, uint8_t* x) {
    return std::vector<attnkit_tensor>{{"input", ATTNKIT_UINT8, 3, shape, x},
                                       {"weight", ATTNKIT_INT8, 2, ws, w.data()},
                                       {"bias", ATTNKIT_FLOAT32, 1, bs, bias.data()},
                                       {"input_scale", ATTNKIT_FLOAT32, 0, nullptr, &x_scale},
                                       {"weight_scale", ATTNKIT_FLOAT32, 0, nullptr, &w_scale}};
  };
  ResultGuard created, first, second, read, stateless_prompt, stateless_token, loaded, too_long, wrong_name, null_cache;
  attnkit_qattention_cache* cache = nullptr;
  ASSERT_EQ(attnkit_qattention_cache_create(1, N, H, 4, &cache, &created.r), ATTNKIT_OK);
  auto in = inputs(ps, prompt.data());
  ASSERT_EQ(attnkit_qattention_cache_step(cache, attrs, in.data(), 5, 1, nullptr, &first.r), ATTNKIT_OK)
      << attnkit_result_error(first.r);
  ASSERT_EQ(run("QAttention", attrs, in, "output,present", &stateless_prompt), ATTNKIT_OK);
  expect_same_output(first, stateless_prompt);
  auto next = inputs(ts, token.data());
  int64_t present_shape[5] = {2, 1, N, 3, H};
  void* prompt_present = const_cast<void*>(attnkit_result_data(stateless_prompt.r, 1));
  next.push_back({"past", ATTNKIT_FLOAT32, 5, present_shape, prompt_present});
  ASSERT_EQ(run("QAttention", attrs, next, "output,present", &stateless_token), ATTNKIT_OK);
  next.pop_back();
  ASSERT_EQ(attnkit_qattention_cache_step(cache, attrs, next.data(), 5, 1, nullptr, &second.r), ATTNKIT_OK);
  expect_same_output(second, stateless_token);
  ASSERT_EQ(attnkit_qattention_cache_read(cache, &read.r), ATTNKIT_OK);
  ASSERT_EQ(attnkit_result_bytes(read.r, 0), attnkit_result_bytes(stateless_token.r, 1));
  EXPECT_EQ(0, std::memcmp(attnkit_result_data(read.r, 0), attnkit_result_data(stateless_token.r, 1),
                           attnkit_result_bytes(read.r, 0)));
  EXPECT_EQ(attnkit_qattention_cache_step(cache, attrs, in.data(), 5, 1, nullptr, &too_long.r), ATTNKIT_INVALID);
  EXPECT_NE(std::string(attnkit_result_error(too_long.r)).find("exceed its capacity 4"), std::string::npos);

  attnkit_tensor past{"past", ATTNKIT_FLOAT32, 5, present_shape, prompt_present};
  ASSERT_EQ(attnkit_qattention_cache_load(cache, &past, 1, &loaded.r), ATTNKIT_OK) << attnkit_result_error(loaded.r);
  EXPECT_EQ(attnkit_qattention_cache_length(cache), 3);
  past.name = "present";
  EXPECT_EQ(attnkit_qattention_cache_load(cache, &past, 1, &wrong_name.r), ATTNKIT_INVALID);
  EXPECT_NE(std::string(attnkit_result_error(wrong_name.r)).find("load takes past, not present"), std::string::npos);
  // A null data pointer for a non-empty tensor is refused by name, never read: each input of the stateless op and of
  // a step, and a load's past (it used to crash the stateless op).
  for (size_t i = 0; i < next.size(); ++i) {
    std::vector<attnkit_tensor> null_data = next;
    null_data[i].data = nullptr;
    const std::string message = std::string(null_data[i].name) + ": data pointer is null for a non-empty tensor";
    ResultGuard stateless, step;
    EXPECT_EQ(run("QAttention", attrs, null_data, nullptr, &stateless), ATTNKIT_INVALID);
    EXPECT_EQ(attnkit_result_error(stateless.r), message);
    EXPECT_EQ(attnkit_qattention_cache_step(cache, attrs, null_data.data(), 5, 1, nullptr, &step.r), ATTNKIT_INVALID);
    EXPECT_EQ(attnkit_result_error(step.r), message);
  }
  past.name = "past";
  past.data = nullptr;
  ResultGuard null_load;
  EXPECT_EQ(attnkit_qattention_cache_load(cache, &past, 1, &null_load.r), ATTNKIT_INVALID);
  EXPECT_STREQ(attnkit_result_error(null_load.r), "past: data pointer is null for a non-empty tensor");
  EXPECT_EQ(attnkit_qattention_cache_length(cache), 3);
  attnkit_qattention_cache_clear(cache);
  EXPECT_EQ(attnkit_qattention_cache_length(cache), 0);
  attnkit_qattention_cache_free(cache);
  EXPECT_EQ(attnkit_qattention_cache_read(nullptr, &null_cache.r), ATTNKIT_INVALID);
  EXPECT_STREQ(attnkit_result_error(null_cache.r), "qattention cache: is null");
}

// A NULL cache pointer is refused with a message in *result, which is set even so: the header tells callers to
// free it either way, so a result left as the caller's uninitialised pointer would be freed.
TEST(CApi, CreateWithANullCachePointerStillSetsTheResult) {
  auto* const garbage = reinterpret_cast<attnkit_result*>(uintptr_t{0x1234});
  attnkit_result* kv = garbage;
  EXPECT_EQ(attnkit_kv_cache_create(1, 2, 8, 16, ATTNKIT_FLOAT32, nullptr, &kv), ATTNKIT_INTERNAL_ERROR);
  ASSERT_NE(kv, garbage);  // checked before the guard frees it
  ResultGuard kv_guard{kv};
  EXPECT_STREQ(attnkit_result_error(kv), "kv cache: the cache pointer is null (nowhere to return it)");
  attnkit_result* qa = garbage;
  EXPECT_EQ(attnkit_qattention_cache_create(1, 2, 8, 16, nullptr, &qa), ATTNKIT_INTERNAL_ERROR);
  ASSERT_NE(qa, garbage);
  ResultGuard qa_guard{qa};
  EXPECT_STREQ(attnkit_result_error(qa), "qattention cache: the cache pointer is null (nowhere to return it)");
}

}  // namespace
}  // namespace attnkit
