// attnkit fuzz target: the QAttention cache's C ABI as an application drives it, a sequence of create, step,
// truncate, load, read and clear chosen by the fuzzer's bytes. What must hold: no call crashes or returns INTERNAL;
// length follows the calls that succeeded; and a step's output has the bits of the stateless op run with read()'s
// present of just before as its past, and the cache then holds that op's present.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "fuzz_support.h"

namespace attnkit {
namespace fuzz {
namespace {

// One session's model: its sizes and the projection every step shares.
struct Session {
  int batch, heads, head_size, capacity;
  std::map<std::string, OwnedTensor> weights;  // weight, bias, scales, zero points
  std::string attrs;
};

void make_weights(ByteReader& in, Session* s, uint64_t seed) {
  const int64_t D = int64_t{s->heads} * s->head_size;
  const bool u8_weight = in.below(2);
  const DType wtype = u8_weight ? DType::kUInt8 : DType::kInt8;
  s->weights["weight"] = random_cache(wtype, {D, 3 * D}, seed + 1);
  s->weights["bias"] = random_floats(DType::kFloat32, {3 * D}, seed + 2);
  s->weights["input_scale"] = random_floats(DType::kFloat32, {}, seed + 3, 0.002, 0.01);
  const Shape wshape = in.below(2) ? Shape{3 * D} : Shape{};
  s->weights["weight_scale"] = random_floats(DType::kFloat32, wshape, seed + 4, -0.01, 0.01);
  if (in.below(2)) s->weights["input_zero_point"] = random_cache(DType::kUInt8, {}, seed + 5);
  if (u8_weight || in.below(2)) {  // centred weights, as in qattention_c_api_fuzz.cc
    OwnedTensor zp = random_cache(wtype, wshape, seed + 6);
    for (uint8_t& z : zp.bytes) z = u8_weight ? static_cast<uint8_t>(124 + z % 9) : static_cast<uint8_t>(z % 5 - 2);
    s->weights["weight_zero_point"] = std::move(zp);
  }
  std::map<std::string, std::string> attrs = {{"num_heads", json_number(s->heads)}};
  if (in.below(2)) attrs["unidirectional"] = "1";
  if (in.below(32) == 31) attrs["num_heads"] = json_number(s->heads + 1);  // a model the cache does not hold
  s->attrs = json_object(attrs);
}

bool read_cache(attnkit_qattention_cache* cache, CallResult* out) {
  attnkit_result* result = nullptr;
  const int code = attnkit_qattention_cache_read(cache, &result);
  *out = take_result(code, result);
  return out->code == ATTNKIT_OK;
}

// A step of S tokens, then the stateless op over the present read() gave just before.
void step(ByteReader& in, const Session& s, attnkit_qattention_cache* cache, uint64_t seed) {
  const int64_t length = attnkit_qattention_cache_length(cache);
  const int64_t B = s.batch, D = int64_t{s.heads} * s.head_size;
  const int64_t S = 1 + in.below(5), T = length + S;
  std::map<std::string, OwnedTensor> t = s.weights;
  t["input"] = random_cache(DType::kUInt8, {B, S, in.below(16) == 15 ? D + 1 : D}, seed + 7);
  switch (in.below(6)) {  // key lengths, or a 2D / 3D key mask, over the whole T
    case 1: t["mask_index"] = random_ints(in, {B}, 0, T + 2); break;
    case 2: t["mask_index"] = random_ints(in, {B, T}, 0, 2); break;
    case 3: t["mask_index"] = random_ints(in, {B, S, T}, 0, 2); break;
    default: break;
  }
  if (in.below(24) == 23) t["past"] = random_floats(DType::kFloat32, {2, B, s.heads, length, s.head_size}, seed + 8);
  const char* path = kPaths[in.below(3)];
  CallResult before;
  if (!read_cache(cache, &before)) fail("read refused");

  current_case() = "qattention cache step " + s.attrs + " S " + std::to_string(S) + " at length " +
                   std::to_string(length);
  const std::vector<attnkit_tensor> args = c_tensors(t);
  attnkit_result* result = nullptr;
  const int code = attnkit_qattention_cache_step(cache, s.attrs.c_str(), args.data(), static_cast<int>(args.size()),
                                                 static_cast<int>(in.below(4)), path, &result);
  const CallResult got = take_result(code, result);
  const bool ok = got.code == ATTNKIT_OK;
  if (attnkit_qattention_cache_length(cache) != (ok ? T : length)) fail("length after a step");
  if (!ok) return;
  if (t.count("past")) fail("a step took a past of its own");
  t["past"] = owned(*before.find("present"));
  const CallResult stateless = call_c_api("QAttention", t, s.attrs, "output,present", 0, path, false);
  if (stateless.code != ATTNKIT_OK) fail("the stateless op refuses a step the cache took: " + stateless.message);
  if (stateless.find("output")->storage != got.find("output")->storage)
    fail("a cache step's output differs from the stateless op's");
  CallResult after;
  if (!read_cache(cache, &after)) fail("read refused");
  if (after.find("present")->storage != stateless.find("present")->storage)
    fail("the cache after a step holds other rows than the stateless op's present");
}

// A past in ORT's present layout, (2, batch, heads, rows, head_size), now and then of the wrong shape or dtype.
// (Rare mistakes take the largest value of below(): the bytes read as zeros once they run out.)
void load(ByteReader& in, const Session& s, attnkit_qattention_cache* cache, uint64_t seed) {
  const int64_t rows = in.below(static_cast<uint32_t>(std::min(s.capacity, 600)) + 3);
  Shape shape = {2, s.batch, s.heads, rows, s.head_size};
  if (in.below(8) == 7) shape[in.below(5)] += 1;
  std::map<std::string, OwnedTensor> t;
  t[in.below(16) == 15 ? "present" : "past"] =
      random_floats(in.below(16) == 15 ? DType::kFloat16 : DType::kFloat32, shape, seed + 9);
  current_case() = "qattention cache load";
  const std::vector<attnkit_tensor> args = c_tensors(t);
  const int64_t before = attnkit_qattention_cache_length(cache);
  attnkit_result* result = nullptr;
  const int code = attnkit_qattention_cache_load(cache, args.data(), static_cast<int>(args.size()), &result);
  if (attnkit_qattention_cache_length(cache) != (accepted(code, result) ? shape[3] : before))
    fail("length after a load");
}

}  // namespace

void run_one_input(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  pick_isa(in);
  const uint64_t seed = in.u32();
  static const int kHeadSizes[] = {4, 8, 16, 32, 64, 12};
  Session s;
  s.batch = 1 + static_cast<int>(in.below(2));
  s.heads = 1 + static_cast<int>(in.below(4));
  s.head_size = kHeadSizes[in.below(6)];
  s.capacity = 1 + static_cast<int>(in.below(4) ? in.below(64) : in.below(600));
  bool absurd = false;  // then no step or load: their tensors alone would not fit
  if (in.below(16) == 15) {  // sizes an application should never pass
    absurd = true;
    static const int kBad[] = {0, -1, 1 << 30, 1 << 20};
    const int bad = kBad[in.below(4)];
    switch (in.below(4)) {
      case 0: s.batch = bad; break;
      case 1: s.heads = bad; break;
      case 2: s.head_size = bad; break;
      default: s.capacity = bad; break;
    }
  }
  if (left_to_the_replay(8.0 * s.batch * s.heads * s.capacity * s.head_size)) return;
  current_case() = "qattention cache create B " + std::to_string(s.batch) + " N " + std::to_string(s.heads) + " H " +
                   std::to_string(s.head_size) + " capacity " + std::to_string(s.capacity);
  attnkit_qattention_cache* cache = nullptr;
  attnkit_result* result = nullptr;
  const int code = attnkit_qattention_cache_create(s.batch, s.heads, s.head_size, s.capacity, &cache, &result);
  if (!accepted(code, result)) return;
  if (!cache) fail("create succeeded without a cache");
  if (!absurd) make_weights(in, &s, seed);
  for (int op = 0; op < 12 && in.remaining(); ++op) {
    const int64_t length = attnkit_qattention_cache_length(cache);
    const uint32_t kind = in.below(8);
    if (absurd && (kind == 6 || kind < 4)) continue;
    switch (kind) {
      case 4: {
        const int target = static_cast<int>(in.below(static_cast<uint32_t>(length) + 3)) - 1;
        attnkit_result* r = nullptr;
        const int rc = attnkit_qattention_cache_truncate(cache, target, &r);
        if (attnkit_qattention_cache_length(cache) != (accepted(rc, r) ? target : length))
          fail("length after a truncate");
        break;
      }
      case 5:
        attnkit_qattention_cache_clear(cache);
        if (attnkit_qattention_cache_length(cache) != 0) fail("clear left tokens");
        break;
      case 6: load(in, s, cache, seed + op); break;
      case 7: {
        CallResult held;
        if (!read_cache(cache, &held)) fail("read refused");
        const Tensor* present = held.find("present");
        if (!present || present->shape.size() != 5 || present->shape[3] != attnkit_qattention_cache_length(cache))
          fail("read's rows differ from length()");
        break;
      }
      default: step(in, s, cache, seed + 16 * op);
    }
  }
  attnkit_qattention_cache_free(cache);
}

}  // namespace fuzz
}  // namespace attnkit
