// attnkit: the C ABI (attnkit/attnkit.h) over run_op — the entry points the wasm build exports.
// Everything is checked and every exception is caught here: JS (or any FFI caller) gets a code and
// a one-line message, never an abort, even for out-of-memory.
#include "attnkit/attnkit.h"

#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "api/op_registry.h"
#include "attnkit/kv_cache.h"
#include "attnkit/parallel.h"
#include "attnkit/qattention_cache.h"
#include "common/json.h"
#include "common/thread_pool.h"
#include "dispatch.h"

struct attnkit_result {
  std::string error;
  std::vector<std::pair<std::string, attnkit::Tensor>> outputs;
  size_t peak_scratch_bytes = 0;
};

struct attnkit_kv_cache {
  attnkit::GqaKvCache cache;
};

struct attnkit_qattention_cache {
  attnkit::QAttentionKvCache cache;
};

namespace {

using attnkit::Status;

constexpr int kMaxRank = 16;

Status split_outputs(const char* csv, std::vector<std::string>* names) {
  if (!csv) return Status::Ok();
  std::string s(csv);
  if (s.empty()) return Status::Ok();
  size_t start = 0;
  for (;;) {
    size_t comma = s.find(',', start);
    std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t b = item.find_first_not_of(" \t");
    size_t e = item.find_last_not_of(" \t");
    if (b == std::string::npos) return Status::Error("outputs: empty name in \"" + s + "\"");
    names->push_back(item.substr(b, e - b + 1));
    if (comma == std::string::npos) return Status::Ok();
    start = comma + 1;
  }
}

Status bind_c_inputs(const attnkit_tensor* inputs, int n, attnkit::InputMap* views) {
  if (n < 0 || (n > 0 && !inputs)) return Status::Error("inputs: null array or negative count");
  for (int i = 0; i < n; ++i) {
    const attnkit_tensor& t = inputs[i];
    if (!t.name) return Status::Error("inputs[" + std::to_string(i) + "]: name is null");
    std::string name(t.name);
    if (t.dtype < ATTNKIT_FLOAT32 || t.dtype > ATTNKIT_INT64) {
      return Status::Error(name + ": dtype code " + std::to_string(t.dtype) + " is not valid (0..6)");
    }
    if (t.rank < 0 || t.rank > kMaxRank) {
      return Status::Error(name + ": rank " + std::to_string(t.rank) + " is not in [0, 16]");
    }
    if (t.rank > 0 && !t.shape) return Status::Error(name + ": shape is null");
    attnkit::TensorView view;
    view.dtype = static_cast<attnkit::DType>(t.dtype);
    view.shape.assign(t.shape, t.shape + t.rank);
    view.data = t.data;
    if (!views->emplace(name, view).second) return Status::Error(name + ": input given twice");
  }
  return Status::Ok();
}

int fail(attnkit_result* r, int code, const std::string& message) {
  if (r) {
    r->outputs.clear();
    r->error = message.empty() ? "unknown error" : message;
  }
  return code;
}

// A failed Status: INVALID, or INTERNAL_ERROR when an allocation failed (attnkit.h).
int fail(attnkit_result* r, const Status& st) {
  return fail(r, st.out_of_memory() ? ATTNKIT_INTERNAL_ERROR : ATTNKIT_INVALID, st.message());
}

const attnkit::Tensor* output_at(const attnkit_result* r, int i) {
  if (!r || i < 0 || static_cast<size_t>(i) >= r->outputs.size()) return nullptr;
  return &r->outputs[static_cast<size_t>(i)].second;
}

std::mutex g_info_mutex;  // attnkit_set_isa against a reader of the selected table
// Per thread: the string attnkit_info_json hands out stays valid while another thread asks for its own. (The
// single-thread wasm build has one thread, and its linker no thread-local storage.)
#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
std::string t_info;
#else
thread_local std::string t_info;
#endif

// What every entry point decodes from its C arguments; the op reports its scratch into the call's result.
struct Call {
  explicit Call(attnkit_result* r) { options.peak_scratch_bytes = &r->peak_scratch_bytes; }
  attnkit::JsonValue attrs = attnkit::JsonValue::MakeObject();
  attnkit::InputMap views;
  attnkit::RunOptions options;
};

Status decode_call(const char* attrs_json, const attnkit_tensor* inputs, int n_inputs, int threads, const char* path,
                   Call* call) {
  if (attrs_json && attrs_json[0] != '\0') {
    Status st = attnkit::parse_json(std::string(attrs_json), &call->attrs);
    if (!st.ok()) return Status::Error("attrs: " + st.message());
    if (!call->attrs.is_object()) return Status::Error("attrs: must be a JSON object");
  }
  ATTNKIT_RETURN_IF_ERROR(bind_c_inputs(inputs, n_inputs, &call->views));
  if (threads < 0) return Status::Error("threads: " + std::to_string(threads) + " must be >= 0");
  call->options.threads = threads;
  if (path && path[0] != '\0' && !attnkit::attention_path_from_name(path, &call->options.path))
    return Status::Error(std::string("path: \"") + path + "\" must be auto, naive or flash");
  return Status::Ok();
}

// decode_call, and the requested output names.
Status decode_call(const char* attrs_json, const attnkit_tensor* inputs, int n_inputs, const char* outputs_csv,
                   int threads, const char* path, Call* call, std::vector<std::string>* outputs) {
  ATTNKIT_RETURN_IF_ERROR(decode_call(attrs_json, inputs, n_inputs, threads, path, call));
  return split_outputs(outputs_csv, outputs);
}

// Runs body(result) with a fresh result in *result; no exception escapes (out of memory included).
template <typename Body>
int guarded(attnkit_result** result, Body body) {
  if (!result) return ATTNKIT_INTERNAL_ERROR;
  *result = nullptr;
  attnkit_result* r = nullptr;
  try {
    r = new attnkit_result();
    *result = r;
    return body(r);
  } catch (const std::bad_alloc&) {
    return fail(r, ATTNKIT_INTERNAL_ERROR, "out of memory");
  } catch (const std::exception& e) {
    return fail(r, ATTNKIT_INTERNAL_ERROR, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(r, ATTNKIT_INTERNAL_ERROR, "internal error");
  }
}

}  // namespace

extern "C" {

int attnkit_run(const char* op, const char* attrs_json, const attnkit_tensor* inputs, int n_inputs,
                const char* outputs_csv, int threads, const char* path, attnkit_result** result) {
  return guarded(result, [&](attnkit_result* r) {
    if (!op) return fail(r, ATTNKIT_INVALID, "op: is null");
    Call call(r);
    std::vector<std::string> outputs;
    Status st = decode_call(attrs_json, inputs, n_inputs, outputs_csv, threads, path, &call, &outputs);
    if (st.ok()) st = attnkit::run_op(op, call.attrs, call.views, outputs, call.options, &r->outputs);
    return st.ok() ? ATTNKIT_OK : fail(r, st);
  });
}

int attnkit_run_gqa_in_place(const char* attrs_json, const attnkit_tensor* inputs, int n_inputs,
                             const char* outputs_csv, int threads, const char* path, attnkit_result** result) {
  return guarded(result, [&](attnkit_result* r) {
    Call call(r);
    attnkit::GqaCall gqa;
    attnkit::GqaOutputs out;
    std::vector<std::string> outputs;
    Status st = decode_call(attrs_json, inputs, n_inputs, outputs_csv, threads, path, &call, &outputs);
    if (st.ok()) st = attnkit::decode_gqa_call(call.attrs, call.views, outputs, &gqa);
    if (st.ok()) st = attnkit::group_query_attention_in_place(gqa.inputs, gqa.attrs, gqa.request, &out, call.options);
    if (!st.ok()) return fail(r, st);
    for (const std::string& name : gqa.outputs) {  // present_key/present_value are the caches themselves
      if (name == "output") r->outputs.emplace_back(name, std::move(out.output));
      if (name == "output_qk") r->outputs.emplace_back(name, std::move(out.output_qk));
    }
    return ATTNKIT_OK;
  });
}

int attnkit_run_qattention_in_place(const char* attrs_json, const attnkit_tensor* inputs, int n_inputs,
                                    const char* outputs_csv, int threads, const char* path, attnkit_result** result) {
  return guarded(result, [&](attnkit_result* r) {
    Call call(r);
    attnkit::QAttentionCall qa;
    attnkit::QAttentionOutputs out;
    std::vector<std::string> outputs;
    Status st = decode_call(attrs_json, inputs, n_inputs, outputs_csv, threads, path, &call, &outputs);
    if (st.ok()) st = attnkit::decode_qattention_call(call.attrs, call.views, outputs, &qa);
    if (st.ok()) st = attnkit::q_attention_in_place(qa.inputs, qa.attrs, &out, call.options);
    if (!st.ok()) return fail(r, st);
    r->outputs.emplace_back("output", std::move(out.output));  // present is the past buffer itself
    return ATTNKIT_OK;
  });
}

int attnkit_kv_cache_create(int batch, int kv_heads, int head_size, int capacity, int cache_dtype,
                            attnkit_kv_cache** cache, attnkit_result** result) {
  return attnkit_kv_cache_create_window(batch, kv_heads, head_size, capacity, 0, cache_dtype, cache, result);
}

int attnkit_kv_cache_create_window(int batch, int kv_heads, int head_size, int capacity, int window,
                                   int cache_dtype, attnkit_kv_cache** cache, attnkit_result** result) {
  if (cache) *cache = nullptr;
  return guarded(result, [&](attnkit_result* r) {
    if (!cache) return fail(r, ATTNKIT_INTERNAL_ERROR, "kv cache: the cache pointer is null (nowhere to return it)");
    if (cache_dtype < ATTNKIT_FLOAT32 || cache_dtype > ATTNKIT_INT64)
      return fail(r, ATTNKIT_INVALID, "kv cache: dtype code " + std::to_string(cache_dtype) + " is not valid");
    auto owned = std::make_unique<attnkit_kv_cache>();
    Status st = owned->cache.init(
        {batch, kv_heads, head_size, capacity, static_cast<attnkit::DType>(cache_dtype), window});
    if (!st.ok()) return fail(r, st);
    *cache = owned.release();
    return ATTNKIT_OK;
  });
}

int attnkit_kv_cache_step(attnkit_kv_cache* cache, const char* attrs_json, const attnkit_tensor* inputs,
                          int n_inputs, int threads, const char* path, attnkit_result** result) {
  return guarded(result, [&](attnkit_result* r) {
    if (!cache) return fail(r, ATTNKIT_INVALID, "kv cache: is null");
    Call call(r);
    attnkit::GqaCall gqa;
    attnkit::Tensor output;
    Status st = decode_call(attrs_json, inputs, n_inputs, threads, path, &call);
    static const std::vector<std::string> kOutput{"output"};
    if (st.ok()) st = attnkit::decode_gqa_call(call.attrs, call.views, kOutput, &gqa);
    if (st.ok()) st = cache->cache.step(gqa.inputs, gqa.attrs, &output, call.options);
    if (!st.ok()) return fail(r, st);
    r->outputs.emplace_back("output", std::move(output));
    return ATTNKIT_OK;
  });
}

int attnkit_kv_cache_length(const attnkit_kv_cache* cache) {
  return cache ? static_cast<int>(cache->cache.length()) : 0;
}

int attnkit_kv_cache_rows(const attnkit_kv_cache* cache) {
  return cache ? static_cast<int>(cache->cache.rows()) : 0;
}

void attnkit_kv_cache_clear(attnkit_kv_cache* cache) {
  if (cache) cache->cache.clear();
}

int attnkit_kv_cache_reserve(attnkit_kv_cache* cache, int capacity, attnkit_result** result) {
  return guarded(result, [&](attnkit_result* r) {
    if (!cache) return fail(r, ATTNKIT_INVALID, "kv cache: is null");
    Status st = cache->cache.reserve(capacity);
    return st.ok() ? ATTNKIT_OK : fail(r, st);
  });
}

int attnkit_kv_cache_truncate(attnkit_kv_cache* cache, int length, attnkit_result** result) {
  return guarded(result, [&](attnkit_result* r) {
    if (!cache) return fail(r, ATTNKIT_INVALID, "kv cache: is null");
    Status st = cache->cache.truncate(length);
    return st.ok() ? ATTNKIT_OK : fail(r, st);
  });
}

int attnkit_kv_cache_load(attnkit_kv_cache* cache, const attnkit_tensor* inputs, int n_inputs, int length,
                          attnkit_result** result) {
  return guarded(result, [&](attnkit_result* r) {
    if (!cache) return fail(r, ATTNKIT_INVALID, "kv cache: is null");
    attnkit::InputMap views;
    Status st = bind_c_inputs(inputs, n_inputs, &views);
    for (const auto& entry : views)
      if (st.ok() && entry.first != "past_key" && entry.first != "past_value")
        st = Status::Error("kv cache: load takes past_key and past_value, not " + entry.first);
    const auto key = views.find("past_key"), value = views.find("past_value");
    if (st.ok() && (key == views.end() || value == views.end()))
      st = Status::Error("kv cache: load needs both past_key and past_value");
    if (st.ok()) st = cache->cache.load(key->second, value->second, length);
    return st.ok() ? ATTNKIT_OK : fail(r, st);
  });
}

int attnkit_kv_cache_read(const attnkit_kv_cache* cache, attnkit_result** result) {
  return guarded(result, [&](attnkit_result* r) {
    if (!cache) return fail(r, ATTNKIT_INVALID, "kv cache: is null");
    attnkit::Tensor key, value;
    Status st = cache->cache.read(&key, &value);
    if (!st.ok()) return fail(r, st);
    r->outputs.emplace_back("present_key", std::move(key));
    r->outputs.emplace_back("present_value", std::move(value));
    return ATTNKIT_OK;
  });
}

void attnkit_kv_cache_free(attnkit_kv_cache* cache) { delete cache; }

int attnkit_qattention_cache_create(int batch, int heads, int head_size, int capacity,
                                    attnkit_qattention_cache** cache, attnkit_result** result) {
  if (cache) *cache = nullptr;
  return guarded(result, [&](attnkit_result* r) {
    if (!cache)
      return fail(r, ATTNKIT_INTERNAL_ERROR, "qattention cache: the cache pointer is null (nowhere to return it)");
    auto owned = std::make_unique<attnkit_qattention_cache>();
    Status st = owned->cache.init({batch, heads, head_size, capacity});
    if (!st.ok()) return fail(r, st);
    *cache = owned.release();
    return ATTNKIT_OK;
  });
}

int attnkit_qattention_cache_step(attnkit_qattention_cache* cache, const char* attrs_json, const attnkit_tensor* inputs,
                                  int n_inputs, int threads, const char* path, attnkit_result** result) {
  return guarded(result, [&](attnkit_result* r) {
    if (!cache) return fail(r, ATTNKIT_INVALID, "qattention cache: is null");
    Call call(r);
    attnkit::QAttentionCall qa;
    attnkit::Tensor output;
    Status st = decode_call(attrs_json, inputs, n_inputs, threads, path, &call);
    static const std::vector<std::string> kOutput{"output"};
    if (st.ok()) st = attnkit::decode_qattention_call(call.attrs, call.views, kOutput, &qa);
    if (st.ok()) st = cache->cache.step(qa.inputs, qa.attrs, &output, call.options);
    if (!st.ok()) return fail(r, st);
    r->outputs.emplace_back("output", std::move(output));
    return ATTNKIT_OK;
  });
}

int attnkit_qattention_cache_length(const attnkit_qattention_cache* cache) {
  return cache ? static_cast<int>(cache->cache.length()) : 0;
}

void attnkit_qattention_cache_clear(attnkit_qattention_cache* cache) {
  if (cache) cache->cache.clear();
}

int attnkit_qattention_cache_truncate(attnkit_qattention_cache* cache, int length, attnkit_result** result) {
  return guarded(result, [&](attnkit_result* r) {
    if (!cache) return fail(r, ATTNKIT_INVALID, "qattention cache: is null");
    Status st = cache->cache.truncate(length);
    return st.ok() ? ATTNKIT_OK : fail(r, st);
  });
}

int attnkit_qattention_cache_load(attnkit_qattention_cache* cache, const attnkit_tensor* inputs, int n_inputs,
                                  attnkit_result** result) {
  return guarded(result, [&](attnkit_result* r) {
    if (!cache) return fail(r, ATTNKIT_INVALID, "qattention cache: is null");
    attnkit::InputMap views;
    Status st = bind_c_inputs(inputs, n_inputs, &views);
    for (const auto& entry : views)
      if (st.ok() && entry.first != "past") st = Status::Error("qattention cache: load takes past, not " + entry.first);
    const auto past = views.find("past");
    if (st.ok() && past == views.end()) st = Status::Error("qattention cache: load needs past");
    if (st.ok()) st = cache->cache.load(past->second);
    return st.ok() ? ATTNKIT_OK : fail(r, st);
  });
}

int attnkit_qattention_cache_read(const attnkit_qattention_cache* cache, attnkit_result** result) {
  return guarded(result, [&](attnkit_result* r) {
    if (!cache) return fail(r, ATTNKIT_INVALID, "qattention cache: is null");
    attnkit::Tensor present;
    Status st = cache->cache.read(&present);
    if (!st.ok()) return fail(r, st);
    r->outputs.emplace_back("present", std::move(present));
    return ATTNKIT_OK;
  });
}

void attnkit_qattention_cache_free(attnkit_qattention_cache* cache) { delete cache; }

int attnkit_result_count(const attnkit_result* r) { return r ? static_cast<int>(r->outputs.size()) : 0; }

const char* attnkit_result_name(const attnkit_result* r, int i) {
  return output_at(r, i) ? r->outputs[static_cast<size_t>(i)].first.c_str() : nullptr;
}

int attnkit_result_dtype(const attnkit_result* r, int i) {
  const attnkit::Tensor* t = output_at(r, i);
  return t ? static_cast<int>(t->dtype) : -1;
}

int attnkit_result_rank(const attnkit_result* r, int i) {
  const attnkit::Tensor* t = output_at(r, i);
  return t ? static_cast<int>(t->shape.size()) : -1;
}

const int64_t* attnkit_result_shape(const attnkit_result* r, int i) {
  const attnkit::Tensor* t = output_at(r, i);
  return t ? t->shape.data() : nullptr;
}

const void* attnkit_result_data(const attnkit_result* r, int i) {
  const attnkit::Tensor* t = output_at(r, i);
  return t ? t->storage.data() : nullptr;
}

size_t attnkit_result_bytes(const attnkit_result* r, int i) {
  const attnkit::Tensor* t = output_at(r, i);
  return t ? t->storage.size() : 0;
}

const char* attnkit_result_error(const attnkit_result* r) { return r ? r->error.c_str() : "no result"; }

size_t attnkit_result_peak_scratch_bytes(const attnkit_result* r) { return r ? r->peak_scratch_bytes : 0; }

void attnkit_result_free(attnkit_result* r) { delete r; }

const char* attnkit_info_json(void) {
  try {
    std::lock_guard<std::mutex> lock(g_info_mutex);
    attnkit::JsonWriter w;
    w.begin_object();
    w.key("version");
    w.string(ATTNKIT_VERSION);
    w.key("cpu_features");
    w.begin_array();
    for (const std::string& f : attnkit::cpu_features()) w.string(f);
    w.end_array();
    w.key("available_isas");
    w.begin_array();
    for (const std::string& isa : attnkit::available_isas()) w.string(isa);
    w.end_array();
    w.key("isa");
    w.string(attnkit::kernel_table().isa);
    w.key("quantized_qk");
    w.string(attnkit::kernel_table().quantized_qk);
    w.key("qattention_gemm");
    w.string(attnkit::kernel_table().gemm_u8x8.variant);
    w.key("threads");
    w.int64(attnkit::default_threads());
    w.end_object();
    t_info = w.str();
    return t_info.c_str();
  } catch (...) {
    return "{}";
  }
}

int attnkit_set_isa(const char* isa) {
  try {
    if (!isa) return ATTNKIT_INVALID;
    std::lock_guard<std::mutex> lock(g_info_mutex);
    return attnkit::set_kernel_isa(isa) ? ATTNKIT_OK : ATTNKIT_INVALID;
  } catch (...) {
    return ATTNKIT_INTERNAL_ERROR;
  }
}

void attnkit_stop_threads(void) {
  try {
    attnkit::stop_thread_pool();
  } catch (...) {
  }
}

void attnkit_set_thread_parallel_runner(attnkit_parallel_run_fn run, void* run_context) {
  attnkit::ParallelRunner runner;
  runner.run = run;
  runner.context = run_context;
  attnkit::set_thread_parallel_runner(runner);
}

void attnkit_get_thread_parallel_runner(attnkit_parallel_run_fn* run, void** run_context) {
  const attnkit::ParallelRunner runner = attnkit::thread_parallel_runner();
  if (run) *run = runner.run;
  if (run_context) *run_context = runner.context;
}

}  // extern "C"
