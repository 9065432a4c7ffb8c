// attnkit fuzz target: the KV cache's C ABI as an application drives it, a sequence of create, step, truncate,
// reserve, load, read and clear chosen by the fuzzer's bytes. What must hold: no call crashes or returns INTERNAL;
// length and rows follow the calls that succeeded; and a step's output has the bits of the stateless op run over
// what read() returned just before (ordinary caches; a window cache is checked for its lengths).
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "fuzz_support.h"

namespace attnkit {
namespace fuzz {
namespace {

struct Config {
  int batch, kv_heads, head_size, capacity, window, dtype;
  int group = 1;
  bool quantized() const { return dtype == ATTNKIT_INT8 || dtype == ATTNKIT_UINT8; }
  DType float_dtype() const { return quantized() ? DType::kFloat32 : static_cast<DType>(dtype); }
};

std::map<std::string, std::string> step_attrs(const Config& c, const std::string& quant, bool rotary) {
  std::map<std::string, std::string> a = {{"num_heads", json_number(c.kv_heads * c.group)},
                                          {"kv_num_heads", json_number(c.kv_heads)}};
  if (c.quantized()) {
    a["k_quant_type"] = a["v_quant_type"] = "\"" + quant + "\"";
    a["kv_cache_bit_width"] = c.dtype == ATTNKIT_INT8 ? "8" : "4";
  }
  if (rotary) a["do_rotary"] = "1";
  return a;
}

bool read_cache(attnkit_kv_cache* cache, CallResult* out) {
  attnkit_result* result = nullptr;
  const int code = attnkit_kv_cache_read(cache, &result);
  *out = take_result(code, result);
  return out->code == ATTNKIT_OK;
}

// A step of S tokens; for an ordinary cache, also the stateless op over the rows read() gave just before.
void step(ByteReader& in, const Config& c, attnkit_kv_cache* cache, uint64_t seed) {
  const int64_t length = attnkit_kv_cache_length(cache), rows = attnkit_kv_cache_rows(cache);
  const int64_t B = c.batch, Nk = c.kv_heads, H = c.head_size, N = Nk * c.group;
  const int64_t S = 1 + in.below(B == 1 || length == 0 ? 6 : 1);  // (chunks after a past: batch 1 only)
  const DType dt = c.float_dtype();
  const bool rotary = in.below(4) == 0 && H % 16 == 0;
  const std::string quant = in.below(2) ? "PER_TENSOR" : "PER_CHANNEL";
  std::map<std::string, OwnedTensor> t;
  t["query"] = random_floats(dt, {B, S, N * H}, seed + 1);
  t["key"] = random_floats(dt, {B, S, Nk * H}, seed + 2);
  t["value"] = random_floats(dt, {B, S, Nk * H}, seed + 3);
  if (c.quantized()) {
    const Shape shape = quant == "PER_TENSOR" ? Shape{1} : Shape{1, Nk, 1, H};
    t["k_scale"] = random_floats(DType::kFloat32, shape, seed + 4, 0.004, 0.02);
    t["v_scale"] = random_floats(DType::kFloat32, shape, seed + 5, 0.004, 0.02);
  }
  if (rotary) {
    const int64_t positions = length + S + in.below(3) - 1;  // one short, now and then
    t["cos_cache"] = random_floats(dt, {positions, H / 2}, seed + 6);
    t["sin_cache"] = random_floats(dt, {positions, H / 2}, seed + 7);
  }
  if (in.below(16) == 0) inject_specials(in, &t["value"]);
  std::map<std::string, std::string> attrs = step_attrs(c, quant, rotary);
  if (c.window) attrs["local_window_size"] = json_number(c.window), attrs["sliding_window_cache"] = "1";
  const std::string attrs_text = json_object(attrs);
  const char* path = kPaths[in.below(3)];
  CallResult before;
  const bool compare = !c.window && read_cache(cache, &before);

  current_case() = "kv cache step " + attrs_text + " S " + std::to_string(S) + " at length " + std::to_string(length);
  const std::vector<attnkit_tensor> args = c_tensors(t);
  attnkit_result* result = nullptr;
  const int code = attnkit_kv_cache_step(cache, attrs_text.c_str(), args.data(), static_cast<int>(args.size()),
                                         static_cast<int>(in.below(4)), path, &result);
  const CallResult got = take_result(code, result);
  const bool ok = got.code == ATTNKIT_OK;
  if (attnkit_kv_cache_length(cache) != (ok ? length + S : length)) fail("length after a step");
  if (!ok) {
    if (attnkit_kv_cache_rows(cache) != rows) fail("rows changed by a refused step");
    return;
  }
  if (!c.window && attnkit_kv_cache_rows(cache) != length + S) fail("rows after a step");
  if (!compare) return;
  t["past_key"] = owned(*before.find("present_key"));
  t["past_value"] = owned(*before.find("present_value"));
  const std::vector<int32_t> seqlens(static_cast<size_t>(B), static_cast<int32_t>(length + S - 1));
  t["seqlens_k"] = int_tensor<int32_t>(DType::kInt32, {B}, seqlens);
  t["total_sequence_length"] = int_tensor<int32_t>(DType::kInt32, {}, {static_cast<int32_t>(length + S)});
  const CallResult stateless = call_c_api("GroupQueryAttention", t, attrs_text, "output", 0, path, false);
  if (stateless.code != ATTNKIT_OK) fail("the stateless op refuses a step the cache took: " + stateless.message);
  if (stateless.find("output")->storage != got.find("output")->storage)
    fail("a cache step's output differs from the stateless op's");
}

// Cached tokens of the cache's dtype in the present layout, `rows` of them.
void load(ByteReader& in, const Config& c, attnkit_kv_cache* cache, uint64_t seed) {
  const int64_t rows = in.below(static_cast<uint32_t>(std::min(c.capacity, 600)) + 3);
  const int64_t row = c.dtype == ATTNKIT_UINT8 ? (c.head_size + 1) / 2 : c.head_size;
  const DType dt = static_cast<DType>(in.below(8) ? c.dtype : in.below(7));
  std::map<std::string, OwnedTensor> t;
  t["past_key"] = random_cache(dt, {c.batch, c.kv_heads, rows, row}, seed + 8);
  t["past_value"] = random_cache(dt, {c.batch, c.kv_heads, rows, in.below(8) ? row : row + 1}, seed + 9);
  const int length = in.below(3) ? -1 : static_cast<int>(in.below(static_cast<uint32_t>(rows) + 2));
  current_case() = "kv cache load, length " + std::to_string(length);
  const std::vector<attnkit_tensor> args = c_tensors(t);
  const int64_t before = attnkit_kv_cache_length(cache);
  attnkit_result* result = nullptr;
  const int code = attnkit_kv_cache_load(cache, args.data(), static_cast<int>(args.size()), length, &result);
  const bool ok = accepted(code, result);
  if (attnkit_kv_cache_length(cache) != (ok ? (length < 0 ? rows : length) : before)) fail("length after a load");
}

}  // namespace

void run_one_input(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  pick_isa(in);
  const uint64_t seed = in.u32();
  static const int kDtypes[] = {ATTNKIT_FLOAT32, ATTNKIT_FLOAT16, ATTNKIT_BFLOAT16, ATTNKIT_INT8, ATTNKIT_UINT8};
  static const int kHeadSizes[] = {8, 16, 32, 64, 24, 128};
  Config c;
  c.batch = 1 + static_cast<int>(in.below(3));
  c.kv_heads = 1 + static_cast<int>(in.below(3));
  c.group = 1 + static_cast<int>(in.below(3));
  c.head_size = kHeadSizes[in.below(6)];
  c.capacity = 1 + static_cast<int>(in.below(4) ? in.below(64) : in.below(600));
  c.window = in.below(4) ? 0 : 1 + static_cast<int>(in.below(static_cast<uint32_t>(c.capacity)));
  c.dtype = kDtypes[in.below(5)];
  bool absurd = false;  // then no step or load: their tensors alone would not fit
  if (in.below(16) == 0) {  // sizes an application should never pass
    absurd = true;
    static const int kBad[] = {0, -1, 1 << 30, 7};
    const int bad = kBad[in.below(4)];
    switch (in.below(5)) {
      case 0: c.batch = bad; break;
      case 1: c.kv_heads = bad; break;
      case 2: c.head_size = bad; break;
      case 3: c.capacity = bad; break;
      default: c.dtype = bad; break;
    }
  }
  const int element =
      c.dtype == ATTNKIT_FLOAT32 ? 4 : c.dtype == ATTNKIT_FLOAT16 || c.dtype == ATTNKIT_BFLOAT16 ? 2 : 1;
  const double bytes = 2.0 * c.batch * c.kv_heads * c.capacity *
                       (c.dtype == ATTNKIT_UINT8 ? (c.head_size + 1) / 2 : c.head_size) * element;
  if (left_to_the_replay(bytes)) return;
  current_case() = "kv cache create B " + std::to_string(c.batch) + " Nk " + std::to_string(c.kv_heads) + " H " +
                   std::to_string(c.head_size) + " capacity " + std::to_string(c.capacity) + " window " +
                   std::to_string(c.window) + " dtype " + std::to_string(c.dtype);
  attnkit_kv_cache* cache = nullptr;
  attnkit_result* result = nullptr;
  const int code = c.window ? attnkit_kv_cache_create_window(c.batch, c.kv_heads, c.head_size, c.capacity, c.window,
                                                             c.dtype, &cache, &result)
                            : attnkit_kv_cache_create(c.batch, c.kv_heads, c.head_size, c.capacity, c.dtype, &cache,
                                                      &result);
  if (!accepted(code, result)) return;
  if (!cache) fail("create succeeded without a cache");
  for (int op = 0; op < 16 && in.remaining(); ++op) {
    const int64_t length = attnkit_kv_cache_length(cache);
    const uint32_t kind = in.below(9);
    if (absurd && (kind == 7 || kind < 4)) continue;
    switch (kind) {
      case 4: {
        const int target = static_cast<int>(in.below(static_cast<uint32_t>(length) + 3)) - 1;
        attnkit_result* r = nullptr;
        const int rc = attnkit_kv_cache_truncate(cache, target, &r);
        if (attnkit_kv_cache_length(cache) != (accepted(rc, r) ? target : length)) fail("length after a truncate");
        break;
      }
      case 5: {
        attnkit_result* r = nullptr;
        const int capacity = static_cast<int>(in.below(2 * std::min(c.capacity, 600) + 3)) - 1;
        const int rc = attnkit_kv_cache_reserve(cache, capacity, &r);
        if (accepted(rc, r)) c.capacity = std::max(c.capacity, capacity);
        if (attnkit_kv_cache_length(cache) != length) fail("reserve changed the length");
        break;
      }
      case 6:
        attnkit_kv_cache_clear(cache);
        if (attnkit_kv_cache_length(cache) != 0 || attnkit_kv_cache_rows(cache) != 0) fail("clear left tokens");
        break;
      case 7: load(in, c, cache, seed + op); break;
      case 8: {
        CallResult held;
        if (!read_cache(cache, &held)) fail("read refused");
        const Tensor* key = held.find("present_key");
        if (!key || key->shape.size() != 4 || key->shape[2] != attnkit_kv_cache_rows(cache))
          fail("read's rows differ from rows()");
        break;
      }
      default: step(in, c, cache, seed + 16 * op);
    }
  }
  attnkit_kv_cache_free(cache);
}

}  // namespace fuzz
}  // namespace attnkit
