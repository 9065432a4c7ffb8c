/* attnkit: the C ABI — run an operator by ORT name with JSON attributes and named tensors.
 * Used by the wasm build (the JS package calls these exports) and usable from any FFI. No exception
 * or C++ type crosses it; every failure comes back as a code plus a one-line message in the result. */
#ifndef ATTNKIT_ATTNKIT_H_
#define ATTNKIT_ATTNKIT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dtype codes (the order of attnkit::DType). */
#define ATTNKIT_FLOAT32 0
#define ATTNKIT_FLOAT16 1
#define ATTNKIT_BFLOAT16 2
#define ATTNKIT_INT8 3
#define ATTNKIT_UINT8 4
#define ATTNKIT_INT32 5
#define ATTNKIT_INT64 6

/* return codes */
#define ATTNKIT_OK 0
#define ATTNKIT_INTERNAL_ERROR 1 /* out of memory, or a bug */
#define ATTNKIT_INVALID 2        /* invalid op, attribute or input; the message names it */

/* An input: ORT name, dtype code, shape (rank entries) and dense row-major little-endian data. The
 * data is borrowed for the call only. */
typedef struct attnkit_tensor {
  const char* name;
  int dtype;
  int rank;
  const int64_t* shape;
  const void* data;
} attnkit_tensor;

typedef struct attnkit_result attnkit_result;

/* Runs `op` ("GroupQueryAttention", "com.microsoft.GroupQueryAttention", ...). attrs_json: a JSON
 * object of ORT attributes (NULL or "" = none; a float attribute's infinities and NaN, which JSON lacks, are the
 * strings "Infinity", "-Infinity" and "NaN"). outputs_csv: output names, comma separated (NULL or
 * "" = the op's defaults). threads: 0 = the pool default. path: "auto" | "naive" | "flash" (NULL = auto).
 * Returns 0, 2 (invalid input) or 1 (internal). *result is always set when result is non-NULL — on
 * failure it carries the message (attnkit_result_error) — and must be freed with attnkit_result_free. */
int attnkit_run(const char* op, const char* attrs_json, const attnkit_tensor* inputs, int n_inputs,
                const char* outputs_csv, int threads, const char* path, attnkit_result** result);

/* GroupQueryAttention in ORT's shared-buffer form (past_present_share_buffer): past_key and past_value are
 * the caches, [B, Nk, capacity, H], and must be writable: the new rows are written into them at
 * [seqlens_k + 1 - S, seqlens_k + 1) and nothing else is copied, so the caches hold present_key/present_value
 * afterwards. The result holds "output" (and "output_qk" when requested); the present names may be requested
 * and are then the caches. Codes as attnkit_run. Caches allocated on 64-byte boundaries (aligned_alloc) are read
 * whole lines at a time; a plain malloc block splits the wide loads of an fp32 cache's rows (attnkit/tensor.h). */
int attnkit_run_gqa_in_place(const char* attrs_json, const attnkit_tensor* inputs, int n_inputs,
                             const char* outputs_csv, int threads, const char* path, attnkit_result** result);

/* QAttention with present written over past: past is (2, B, N, P + S, H), each head's P past rows first, and
 * must be writable; the S new rows are written after them, so past holds present afterwards. The result holds
 * "output"; "present" may be requested and is then the past buffer. Codes as attnkit_run. */
int attnkit_run_qattention_in_place(const char* attrs_json, const attnkit_tensor* inputs, int n_inputs,
                                    const char* outputs_csv, int threads, const char* path, attnkit_result** result);

int attnkit_result_count(const attnkit_result* result);
const char* attnkit_result_name(const attnkit_result* result, int i);
int attnkit_result_dtype(const attnkit_result* result, int i);
int attnkit_result_rank(const attnkit_result* result, int i);
const int64_t* attnkit_result_shape(const attnkit_result* result, int i);
const void* attnkit_result_data(const attnkit_result* result, int i);
size_t attnkit_result_bytes(const attnkit_result* result, int i);
/* "" when the call succeeded. */
const char* attnkit_result_error(const attnkit_result* result);
/* The call's scratch high-water mark: the bytes the op allocated beside its inputs and outputs (0 after a
 * failure), as the CLI's `bench` reports it. */
size_t attnkit_result_peak_scratch_bytes(const attnkit_result* result);
void attnkit_result_free(attnkit_result* result);

/* JSON: {"version", "cpu_features", "available_isas", "isa", "quantized_qk", "qattention_gemm", "threads"}. The
 * string lives until the calling thread's next call of attnkit_info_json (each thread has its own). */
const char* attnkit_info_json(void);
/* Forces a kernel ISA for the process: 0 ok, 2 when it is unknown or not available here. */
int attnkit_set_isa(const char* isa);
/* Stops and joins attnkit's worker threads; the next call starts them again. For an embedder that must end
 * every thread (a wasm module before its workers are terminated, a library before it is unloaded); not while
 * another thread is inside a call. */
void attnkit_stop_threads(void);
/* The calls this thread makes from now on run their parallel work on the host's pool (attnkit/parallel.h, whose
 * contract this is): run(run_context, jobs, job, job_context) calls job(job_context, j) for every j in [0, jobs), on
 * any threads, and returns once all have returned; no job may be called after run() returns (job_context is gone
 * by then). run = NULL: on attnkit's own threads again. Not in the wasm build, whose threads are its own workers. */
typedef void (*attnkit_job_fn)(void* job_context, int job);
typedef void (*attnkit_parallel_run_fn)(void* run_context, int jobs, attnkit_job_fn job, void* job_context);
void attnkit_set_thread_parallel_runner(attnkit_parallel_run_fn run, void* run_context);
/* The calling thread's runner (NULL, NULL: none), e.g. to restore it after setting another. */
void attnkit_get_thread_parallel_runner(attnkit_parallel_run_fn* run, void** run_context);

/* A GroupQueryAttention KV cache that lives in attnkit memory and grows in place (attnkit/kv_cache.h).
 * Sizes are int (not int64) so JS can pass them to a wasm32 build without BigInt legalization.
 * cache_dtype: ATTNKIT_FLOAT32/FLOAT16/BFLOAT16, ATTNKIT_INT8 (8-bit) or ATTNKIT_UINT8 (4-bit packed).
 * create returns 0 and sets *cache, 2 (invalid sizes or dtype) or 1 (out of memory, or a NULL cache or result
 * pointer), with the message in *result (free it either way). */
typedef struct attnkit_kv_cache attnkit_kv_cache;
int attnkit_kv_cache_create(int batch, int kv_heads, int head_size, int capacity, int cache_dtype,
                            attnkit_kv_cache** cache, attnkit_result** result);
/* A window cache (KvCacheConfig::window > 0): `capacity` rows holding the latest tokens, steps run as
 * sliding_window_cache = 1 with local_window_size = window. create() is this with window 0. */
int attnkit_kv_cache_create_window(int batch, int kv_heads, int head_size, int capacity, int window,
                                   int cache_dtype, attnkit_kv_cache** cache, attnkit_result** result);
/* One step: inputs are GroupQueryAttention's minus past_key, past_value, seqlens_k and total_sequence_length
 * (the cache supplies them); the result holds "output". Codes as attnkit_run. */
int attnkit_kv_cache_step(attnkit_kv_cache* cache, const char* attrs_json, const attnkit_tensor* inputs,
                          int n_inputs, int threads, const char* path, attnkit_result** result);
int attnkit_kv_cache_length(const attnkit_kv_cache* cache);  /* tokens it stands for */
int attnkit_kv_cache_rows(const attnkit_kv_cache* cache);    /* tokens it holds (fewer with a window) */
void attnkit_kv_cache_clear(attnkit_kv_cache* cache);
/* Grows the capacity to `capacity` tokens, keeping the cached ones (attnkit/kv_cache.h); codes as attnkit_run. */
int attnkit_kv_cache_reserve(attnkit_kv_cache* cache, int capacity, attnkit_result** result);
/* The cached tokens themselves (attnkit/kv_cache.h), codes as attnkit_run: truncate keeps the first `length`;
 * load replaces them with the `length` tokens (-1: all rows) of inputs "past_key" and "past_value", tensors of the
 * cache dtype in the present layout (batch, kv_heads, rows, row); read's result holds "present_key" and
 * "present_value" in that layout, the held rows each. */
int attnkit_kv_cache_truncate(attnkit_kv_cache* cache, int length, attnkit_result** result);
int attnkit_kv_cache_load(attnkit_kv_cache* cache, const attnkit_tensor* inputs, int n_inputs, int length,
                          attnkit_result** result);
int attnkit_kv_cache_read(const attnkit_kv_cache* cache, attnkit_result** result);
void attnkit_kv_cache_free(attnkit_kv_cache* cache);

/* A QAttention past/present cache that lives in attnkit memory and grows in place (attnkit/qattention_cache.h):
 * (2, batch, heads, capacity, head_size) float32. create as attnkit_kv_cache_create; step's inputs are QAttention's
 * minus past, its result holds "output"; load takes input "past" (ORT's present layout, (2, batch, heads, rows,
 * head_size)); read's result holds "present", the held rows. Codes as attnkit_run. */
typedef struct attnkit_qattention_cache attnkit_qattention_cache;
int attnkit_qattention_cache_create(int batch, int heads, int head_size, int capacity,
                                    attnkit_qattention_cache** cache, attnkit_result** result);
int attnkit_qattention_cache_step(attnkit_qattention_cache* cache, const char* attrs_json, const attnkit_tensor* inputs,
                                  int n_inputs, int threads, const char* path, attnkit_result** result);
int attnkit_qattention_cache_length(const attnkit_qattention_cache* cache);
void attnkit_qattention_cache_clear(attnkit_qattention_cache* cache);
int attnkit_qattention_cache_truncate(attnkit_qattention_cache* cache, int length, attnkit_result** result);
int attnkit_qattention_cache_load(attnkit_qattention_cache* cache, const attnkit_tensor* inputs, int n_inputs,
                                  attnkit_result** result);
int attnkit_qattention_cache_read(const attnkit_qattention_cache* cache, attnkit_result** result);
void attnkit_qattention_cache_free(attnkit_qattention_cache* cache);

#ifdef __cplusplus
}
#endif

#endif /* ATTNKIT_ATTNKIT_H_ */
