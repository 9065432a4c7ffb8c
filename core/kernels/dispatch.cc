// attnkit: fills the kernel table once per ISA from the family files compiled into this build.
// A family without a file for some ISA uses its scalar kernels there, so an ISA can be brought up
// one family at a time; CPU features decide which ISAs are runnable.
#include "dispatch.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace attnkit {

// Each family file <family>/<isa>.cc defines one of these.
#define ATTNKIT_DECLARE_FAMILY(Type, name, isa) extern const Type name##_##isa;
#define ATTNKIT_DECLARE_ALL(isa)                                \
  ATTNKIT_DECLARE_FAMILY(QkGemmKernels, kQkGemm, isa)           \
  ATTNKIT_DECLARE_FAMILY(SvGemmKernels, kSvGemm, isa)           \
  ATTNKIT_DECLARE_FAMILY(KvQuantKernels, kKvQuant, isa)         \
  ATTNKIT_DECLARE_FAMILY(SoftmaxKernels, kSoftmax, isa)         \
  ATTNKIT_DECLARE_FAMILY(RotaryKernels, kRotary, isa)
ATTNKIT_DECLARE_ALL(scalar)
ATTNKIT_DECLARE_ALL(avx2)
ATTNKIT_DECLARE_ALL(avx512)
ATTNKIT_DECLARE_ALL(neon)
ATTNKIT_DECLARE_ALL(wasm128)
// QAttention's projection family has its own ISA files: avx512 uses the VNNI file when the CPU has
// VNNI (else the AVX2 one), and avx2 uses AVX-VNNI where the CPU reports it.
extern const GemmU8X8Kernels kGemmU8X8_scalar;
#if defined(ATTNKIT_HAVE_GEMM_U8X8_AVX2)
extern const GemmU8X8Kernels kGemmU8X8_avx2;
extern const GemmU8X8Kernels kGemmU8X8_avxvnni;
#endif
#if defined(ATTNKIT_HAVE_GEMM_U8X8_AVX512VNNI)
extern const GemmU8X8Kernels kGemmU8X8_avx512vnni;
#endif
#if defined(ATTNKIT_HAVE_GEMM_U8X8_NEON)
extern const GemmU8X8Kernels kGemmU8X8_neon;
#endif
#if defined(ATTNKIT_HAVE_GEMM_U8X8_WASM128)
extern const GemmU8X8Kernels kGemmU8X8_wasm128;
#endif
#if defined(ATTNKIT_HAVE_QK_GEMM_AVX512VNNI)
void qk_gemm_s8_approx_avx512vnni(size_t M, size_t N, size_t H, const float* Q, size_t ldq,
                                  const void* K, size_t ldk, float alpha, float* C, size_t ldc);
#endif

namespace {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false, avx512 = false, avx512vnni = false;
  bool neon = false, dotprod = false;
  std::vector<std::string> names;
};

const CpuFeatures& cpu() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    f.avx2 = __builtin_cpu_supports("avx2");
    f.fma = __builtin_cpu_supports("fma");
    f.f16c = __builtin_cpu_supports("f16c");
    f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    f.avx512vnni = f.avx512 && __builtin_cpu_supports("avx512vnni");
    const char* names[] = {"sse4.2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512dq",
                           "avx512vl", "avx512vnni", "avx512bf16"};
    for (const char* n : names) {
      // __builtin_cpu_supports needs a literal, so probe the list through a switch-free helper.
      bool has = false;
      std::string s(n);
      if (s == "sse4.2") has = __builtin_cpu_supports("sse4.2");
      else if (s == "avx") has = __builtin_cpu_supports("avx");
      else if (s == "avx2") has = f.avx2;
      else if (s == "fma") has = f.fma;
      else if (s == "f16c") has = f.f16c;
      else if (s == "avx512f") has = __builtin_cpu_supports("avx512f");
      else if (s == "avx512bw") has = __builtin_cpu_supports("avx512bw");
      else if (s == "avx512dq") has = __builtin_cpu_supports("avx512dq");
      else if (s == "avx512vl") has = __builtin_cpu_supports("avx512vl");
      else if (s == "avx512vnni") has = __builtin_cpu_supports("avx512vnni");
      else if (s == "avx512bf16") has = __builtin_cpu_supports("avx512bf16");
      if (has) f.names.push_back(s);
    }
#elif defined(__aarch64__)
    f.neon = true;
    f.names.push_back("neon");
#if defined(__linux__) && defined(HWCAP_ASIMDDP)
    f.dotprod = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#endif
    if (f.dotprod) f.names.push_back("dotprod");
#elif defined(__wasm_simd128__)
    f.names.push_back("simd128");
#endif
    return f;
  }();
  return features;
}

bool isa_runnable(const std::string& isa) {
  const CpuFeatures& f = cpu();
  if (isa == "scalar") return true;
#if defined(ATTNKIT_HAVE_QK_GEMM_AVX2)
  if (isa == "avx2") return f.avx2 && f.fma && f.f16c;
#endif
#if defined(ATTNKIT_HAVE_QK_GEMM_AVX512)
  if (isa == "avx512") return f.avx512 && f.fma && f.f16c;
#endif
#if defined(ATTNKIT_HAVE_QK_GEMM_NEON)
  if (isa == "neon") return true;  // native on aarch64, SIMDe-emulated elsewhere
#endif
#if defined(ATTNKIT_HAVE_QK_GEMM_WASM128)
  if (isa == "wasm128") return true;  // native under Emscripten, SIMDe-emulated elsewhere
#endif
  (void)f;
  return false;
}

// Picks family `name` for `isa` when its file exists, else the scalar one.
#define ATTNKIT_PICK(table, field, name, isa_token, HAVE) \
  do {                                                     \
    if (HAVE) table.field = name##_##isa_token;            \
  } while (0)

std::unique_ptr<KernelTable> build_table(const std::string& isa) {
  auto t = std::make_unique<KernelTable>();
  t->qk = kQkGemm_scalar;
  t->sv = kSvGemm_scalar;
  t->kv = kKvQuant_scalar;
  t->softmax = kSoftmax_scalar;
  t->rotary = kRotary_scalar;
  t->gemm_u8x8 = kGemmU8X8_scalar;
  t->isa = "scalar";
#define ATTNKIT_FILL(isa_token, FAM_QK, FAM_SV, FAM_KV, FAM_SM, FAM_RO) \
  if (isa == #isa_token) {                                               \
    t->isa = #isa_token;                                                 \
    FAM_QK(t->qk = kQkGemm_##isa_token);                                 \
    FAM_SV(t->sv = kSvGemm_##isa_token);                                 \
    FAM_KV(t->kv = kKvQuant_##isa_token);                                \
    FAM_SM(t->softmax = kSoftmax_##isa_token);                           \
    FAM_RO(t->rotary = kRotary_##isa_token);                             \
  }
#define ATTNKIT_YES(x) x;
#define ATTNKIT_NO(x)
#if defined(ATTNKIT_HAVE_QK_GEMM_AVX2)
#define QK_AVX2 ATTNKIT_YES
#else
#define QK_AVX2 ATTNKIT_NO
#endif
#if defined(ATTNKIT_HAVE_SV_GEMM_AVX2)
#define SV_AVX2 ATTNKIT_YES
#else
#define SV_AVX2 ATTNKIT_NO
#endif
#if defined(ATTNKIT_HAVE_KV_QUANT_AVX2)
#define KV_AVX2 ATTNKIT_YES
#else
#define KV_AVX2 ATTNKIT_NO
#endif
#if defined(ATTNKIT_HAVE_SOFTMAX_AVX2)
#define SM_AVX2 ATTNKIT_YES
#else
#define SM_AVX2 ATTNKIT_NO
#endif
#if defined(ATTNKIT_HAVE_ROTARY_AVX2)
#define RO_AVX2 ATTNKIT_YES
#else
#define RO_AVX2 ATTNKIT_NO
#endif
#if defined(ATTNKIT_HAVE_QK_GEMM_AVX512)
#define QK_AVX512 ATTNKIT_YES
#else
#define QK_AVX512 ATTNKIT_NO
#endif
#if defined(ATTNKIT_HAVE_SV_GEMM_AVX512)
#define SV_AVX512 ATTNKIT_YES
#else
#define SV_AVX512 ATTNKIT_NO
#endif
#if defined(ATTNKIT_HAVE_KV_QUANT_AVX512)
#define KV_AVX512 ATTNKIT_YES
#else
#define KV_AVX512 ATTNKIT_NO
#endif
#if defined(ATTNKIT_HAVE_SOFTMAX_AVX512)
#define SM_AVX512 ATTNKIT_YES
#else
#define SM_AVX512 ATTNKIT_NO
#endif
#if defined(ATTNKIT_HAVE_ROTARY_AVX512)
#define RO_AVX512 ATTNKIT_YES
#else
#define RO_AVX512 ATTNKIT_NO
#endif
#if defined(ATTNKIT_HAVE_QK_GEMM_NEON)
#define QK_NEON ATTNKIT_YES
#else
#define QK_NEON ATTNKIT_NO
#endif
#if defined(ATTNKIT_HAVE_SV_GEMM_NEON)
#define SV_NEON ATTNKIT_YES
#else
#define SV_NEON ATTNKIT_NO
#endif
#if defined(ATTNKIT_HAVE_KV_QUANT_NEON)
#define KV_NEON ATTNKIT_YES
#else
#define KV_NEON ATTNKIT_NO
#endif
#if defined(ATTNKIT_HAVE_SOFTMAX_NEON)
#define SM_NEON ATTNKIT_YES
#else
#define SM_NEON ATTNKIT_NO
#endif
#if defined(ATTNKIT_HAVE_ROTARY_NEON)
#define RO_NEON ATTNKIT_YES
#else
#define RO_NEON ATTNKIT_NO
#endif
#if defined(ATTNKIT_HAVE_QK_GEMM_WASM128)
#define QK_WASM ATTNKIT_YES
#else
#define QK_WASM ATTNKIT_NO
#endif
#if defined(ATTNKIT_HAVE_SV_GEMM_WASM128)
#define SV_WASM ATTNKIT_YES
#else
#define SV_WASM ATTNKIT_NO
#endif
#if defined(ATTNKIT_HAVE_KV_QUANT_WASM128)
#define KV_WASM ATTNKIT_YES
#else
#define KV_WASM ATTNKIT_NO
#endif
#if defined(ATTNKIT_HAVE_SOFTMAX_WASM128)
#define SM_WASM ATTNKIT_YES
#else
#define SM_WASM ATTNKIT_NO
#endif
#if defined(ATTNKIT_HAVE_ROTARY_WASM128)
#define RO_WASM ATTNKIT_YES
#else
#define RO_WASM ATTNKIT_NO
#endif
  ATTNKIT_FILL(avx2, QK_AVX2, SV_AVX2, KV_AVX2, SM_AVX2, RO_AVX2)
  ATTNKIT_FILL(avx512, QK_AVX512, SV_AVX512, KV_AVX512, SM_AVX512, RO_AVX512)
  ATTNKIT_FILL(neon, QK_NEON, SV_NEON, KV_NEON, SM_NEON, RO_NEON)
  ATTNKIT_FILL(wasm128, QK_WASM, SV_WASM, KV_WASM, SM_WASM, RO_WASM)
#if defined(ATTNKIT_HAVE_QK_GEMM_AVX512VNNI)
  // The approximate VNNI QK is opt-in (it quantizes the query); attach it only where the CPU has VNNI.
  if (isa == "avx512" && cpu().avx512vnni) t->qk.s8_approx_vnni = qk_gemm_s8_approx_avx512vnni;
#endif
#if defined(ATTNKIT_HAVE_GEMM_U8X8_AVX2)
  if (isa == "avx2" || isa == "avx512") {
    t->gemm_u8x8 = __builtin_cpu_supports("avxvnni") ? kGemmU8X8_avxvnni : kGemmU8X8_avx2;
  }
#endif
#if defined(ATTNKIT_HAVE_GEMM_U8X8_AVX512VNNI)
  if (isa == "avx512" && cpu().avx512vnni) t->gemm_u8x8 = kGemmU8X8_avx512vnni;
#endif
#if defined(ATTNKIT_HAVE_GEMM_U8X8_NEON)
  if (isa == "neon") t->gemm_u8x8 = kGemmU8X8_neon;
#endif
#if defined(ATTNKIT_HAVE_GEMM_U8X8_WASM128)
  if (isa == "wasm128") t->gemm_u8x8 = kGemmU8X8_wasm128;
#endif
  return t;
}

const char* const kIsaOrder[] = {"scalar", "wasm128", "neon", "avx2", "avx512"};

struct Registry {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<KernelTable>> tables;
  const KernelTable* selected = nullptr;
};

Registry& registry() {
  static Registry r;
  return r;
}

const KernelTable* table_locked(Registry& r, const std::string& isa) {
  if (!isa_runnable(isa)) return nullptr;
  auto it = r.tables.find(isa);
  if (it == r.tables.end()) it = r.tables.emplace(isa, build_table(isa)).first;
  return it->second.get();
}

}  // namespace

std::string best_native_isa() {
#if defined(__aarch64__)
  return isa_runnable("neon") ? "neon" : "scalar";
#elif defined(__wasm_simd128__)
  return isa_runnable("wasm128") ? "wasm128" : "scalar";
#else
  if (isa_runnable("avx512")) return "avx512";
  if (isa_runnable("avx2")) return "avx2";
  return "scalar";
#endif
}

const KernelTable* kernel_table_for(const std::string& isa) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return table_locked(r, isa);
}

bool set_kernel_isa(const std::string& isa) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const KernelTable* t = table_locked(r, isa);
  if (!t) return false;
  r.selected = t;
  return true;
}

const KernelTable& kernel_table() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.selected) {
    const char* forced = std::getenv("ATTNKIT_ISA");
    if (forced && *forced) r.selected = table_locked(r, forced);
    if (!r.selected) r.selected = table_locked(r, best_native_isa());
  }
  return *r.selected;
}

std::vector<std::string> available_isas() {
  std::vector<std::string> out;
  for (const char* isa : kIsaOrder)
    if (isa_runnable(isa)) out.push_back(isa);
  return out;
}

std::vector<std::string> cpu_features() { return cpu().names; }

}  // namespace attnkit
