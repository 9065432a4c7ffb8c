// attnkit: fills the kernel table once per ISA from the family files compiled into this build.
// CMake compiles core/kernels/<family>/<isa>.cc for the ISAs the target can hold and defines
// ATTNKIT_HAVE_<FAMILY>_<ISA>; CPU features decide which of those ISAs are runnable here.
#include "dispatch.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__x86_64__)
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif

namespace attnkit {

// Each family file <family>/<isa>.cc defines one of these.
#define ATTNKIT_DECLARE_ISA(isa)                   \
  extern const QkGemmKernels kQkGemm_##isa;       \
  extern const SvGemmKernels kSvGemm_##isa;       \
  extern const KvQuantKernels kKvQuant_##isa;     \
  extern const SoftmaxKernels kSoftmax_##isa;     \
  extern const RotaryKernels kRotary_##isa;
ATTNKIT_DECLARE_ISA(scalar)
ATTNKIT_DECLARE_ISA(avx2)
ATTNKIT_DECLARE_ISA(avx512)
ATTNKIT_DECLARE_ISA(neon)
ATTNKIT_DECLARE_ISA(wasm128)
// gemm_u8x8 has no avx512 file (512-bit integer products need VNNI); VNNI kernels serve the avx2/avx512 tables
// where the CPU has them, sdot the neon one.
extern const GemmU8X8Kernels kGemmU8X8_scalar;
extern const GemmU8X8Kernels kGemmU8X8_avx2;
extern const GemmU8X8Kernels kGemmU8X8_neon;
extern const GemmU8X8Kernels kGemmU8X8_wasm128;
extern const GemmU8X8Kernels kGemmU8X8_avxvnni;
extern const GemmU8X8Kernels kGemmU8X8_avx512vnni;
extern const GemmU8X8Kernels kGemmU8X8_neon_dotprod;
#if defined(ATTNKIT_HAVE_GEMM_U8X8_AMX)
extern const GemmU8X8Kernels kGemmU8X8_amx;
#endif
void qk_gemm_s8_approx_avx512vnni(size_t M, size_t N, size_t H, const float* Q, size_t ldq,
                                  const void* K, size_t ldk, float alpha, float* C, size_t ldc);
void qk_gemm_s8_avx512vnni(size_t M, size_t N, size_t H, const float* Q, size_t ldq, const void* K,
                           size_t ldk, float alpha, float* C, size_t ldc);
void qk_gemm_s4_avx512vnni(size_t M, size_t N, size_t H, const float* Q, size_t ldq, const void* K,
                           size_t ldk, float alpha, float* C, size_t ldc);
void qk_gemm_s8_avxvnni(size_t M, size_t N, size_t H, const float* Q, size_t ldq, const void* K, size_t ldk,
                        float alpha, float* C, size_t ldc);
void qk_gemm_s4_avxvnni(size_t M, size_t N, size_t H, const float* Q, size_t ldq, const void* K, size_t ldk,
                        float alpha, float* C, size_t ldc);
void qk_gemm_s8_neon_dotprod(size_t M, size_t N, size_t H, const float* Q, size_t ldq, const void* K,
                             size_t ldk, float alpha, float* C, size_t ldc);
void qk_gemm_s4_neon_dotprod(size_t M, size_t N, size_t H, const float* Q, size_t ldq, const void* K,
                             size_t ldk, float alpha, float* C, size_t ldc);

namespace {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false, avx512 = false, avx512vnni = false, avxvnni = false, amx = false;
  bool dotprod = false;
  std::vector<std::string> names;
};

#if defined(__x86_64__) || defined(__i386__)
// One CPUID bit (register 0-3: eax, ebx, ecx, edx), for the features __builtin_cpu_supports does not name in
// every compiler (clang 14 knows neither "f16c" nor "avxvnni").
bool cpuid_bit(unsigned leaf, unsigned subleaf, int reg, int bit) {
  unsigned r[4];
  if (!__get_cpuid_count(leaf, subleaf, &r[0], &r[1], &r[2], &r[3])) return false;
  return (r[reg] >> bit) & 1u;
}
#endif

#if defined(__x86_64__)
// AMX-INT8 tiles, where the OS keeps their state: Linux (5.16 and later) does so for a process that asks, and
// without asking the first tile instruction faults.
bool amx_int8_usable() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool tile = d & (1u << 24), int8 = d & (1u << 25);
  if (!tile || !int8) return false;
#if defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}
#endif

const CpuFeatures& cpu() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    // __builtin_cpu_supports takes only literals, hence one line per feature.
    auto note = [&f](bool has, const char* name) {
      if (has) f.names.push_back(name);
      return has;
    };
    note(__builtin_cpu_supports("sse4.2"), "sse4.2");
    note(__builtin_cpu_supports("avx"), "avx");
    f.avx2 = note(__builtin_cpu_supports("avx2"), "avx2");
    f.fma = note(__builtin_cpu_supports("fma"), "fma");
    f.f16c = note(cpuid_bit(1, 0, 2, 29), "f16c");
    const bool f512 = note(__builtin_cpu_supports("avx512f"), "avx512f");
    const bool bw = note(__builtin_cpu_supports("avx512bw"), "avx512bw");
    const bool dq = note(__builtin_cpu_supports("avx512dq"), "avx512dq");
    const bool vl = note(__builtin_cpu_supports("avx512vl"), "avx512vl");
    f.avx512 = f512 && bw && dq && vl;
    f.avx512vnni = note(__builtin_cpu_supports("avx512vnni"), "avx512vnni") && f.avx512;
    note(__builtin_cpu_supports("avx512bf16"), "avx512bf16");
    f.avxvnni = note(cpuid_bit(7, 1, 0, 4), "avxvnni") && f.avx2;
#if defined(__x86_64__)
    f.amx = f.avx512vnni && note(amx_int8_usable(), "amx-int8");
#endif
#elif defined(__aarch64__)
    f.names.push_back("neon");
#if defined(__ARM_FEATURE_DOTPROD)
    // The whole build already targets it: Apple's arm64 default (apple-m1), or -march=...+dotprod anywhere, where
    // no getauxval answers (macOS, Windows on ARM).
    f.dotprod = true;
#elif defined(__linux__) && defined(HWCAP_ASIMDDP)
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

// The ISAs this build holds (CMake compiles every family for each of them).
bool isa_compiled(const std::string& isa) {
  return isa == "scalar"
#if defined(ATTNKIT_HAVE_QK_GEMM_AVX2)
         || isa == "avx2"
#endif
#if defined(ATTNKIT_HAVE_QK_GEMM_AVX512)
         || isa == "avx512"
#endif
#if defined(ATTNKIT_HAVE_QK_GEMM_NEON)
         || isa == "neon"  // native on aarch64, SIMDe-emulated elsewhere
#endif
#if defined(ATTNKIT_HAVE_QK_GEMM_WASM128)
         || isa == "wasm128"  // native under Emscripten, SIMDe-emulated elsewhere
#endif
      ;
}

bool isa_runnable(const std::string& isa) {
  if (!isa_compiled(isa)) return false;
  const CpuFeatures& f = cpu();
  if (isa == "avx2") return f.avx2 && f.fma && f.f16c;
  if (isa == "avx512") return f.avx512 && f.fma && f.f16c;
#if defined(__x86_64__) || defined(__i386__)
  if (isa == "neon") return f.fma;  // SIMDe's NEON is built with FMA here, to fuse as ARM does
#endif
  return true;
}

void fill(KernelTable* t, const char* isa, const QkGemmKernels& qk, const SvGemmKernels& sv, const KvQuantKernels& kv,
          const SoftmaxKernels& sm, const RotaryKernels& ro, const GemmU8X8Kernels& gemm) {
  t->isa = isa;
  t->qk = qk;
  t->sv = sv;
  t->kv = kv;
  t->softmax = sm;
  t->rotary = ro;
  t->gemm_u8x8 = gemm;
}
#define ATTNKIT_FILL(isa, gemm) \
  fill(t.get(), #isa, kQkGemm_##isa, kSvGemm_##isa, kKvQuant_##isa, kSoftmax_##isa, kRotary_##isa, gemm)

std::unique_ptr<KernelTable> build_table(const std::string& isa) {
  auto t = std::make_unique<KernelTable>();
  const CpuFeatures& f = cpu();
  (void)f;
  ATTNKIT_FILL(scalar, kGemmU8X8_scalar);
  // Without a fused integer multiply-accumulate that outruns fp32 FMA (VNNI, AVX-VNNI, sdot, wasm's i32x4.dot), the
  // limbs cost twice the fp32 kernel's work at two query rows: AVX2, AVX512 and NEON keep the fp32 conversion
  // kernels for int8/int4 unless one replaces them below.
  t->quantized_qk = isa == "scalar" || isa == "wasm128" ? "exact-int16-limbs" : "fp32-conversion";
#if defined(ATTNKIT_HAVE_QK_GEMM_AVX2)
  if (isa == "avx2") {
    ATTNKIT_FILL(avx2, f.avxvnni ? kGemmU8X8_avxvnni : kGemmU8X8_avx2);
#if defined(ATTNKIT_HAVE_QK_GEMM_AVXVNNI)
    if (f.avxvnni) {
      // The exact integer limb QK on 256-bit vpdpbusd, bit-identical to scalar, VNNI, NEON's sdot and wasm. On this
      // host (pinned, 2048 keys, H=128, against the fp32 conversion): int8 one row 5.7-6.5 against 9.4-9.8 us, int4
      // one row 6.1-7.3 against 13.7-14.2, int4 two rows 13.1-14.4 against 17.9-19.5, int8 two rows level.
      t->qk.s8 = qk_gemm_s8_avxvnni;
      t->qk.s4 = qk_gemm_s4_avxvnni;
      t->quantized_qk = "exact-int16-limbs";
    }
#endif
  }
#endif
#if defined(ATTNKIT_HAVE_QK_GEMM_AVX512)
  if (isa == "avx512") {
    // No 512-bit integer GEMM without VNNI: the AVX2 one (or AVX-VNNI) serves the avx512 table then.
    ATTNKIT_FILL(avx512, f.avxvnni ? kGemmU8X8_avxvnni : kGemmU8X8_avx2);
    if (f.avx512vnni) {
      t->gemm_u8x8 = kGemmU8X8_avx512vnni;
#if defined(ATTNKIT_HAVE_GEMM_U8X8_AMX)
      if (f.amx) t->gemm_u8x8 = kGemmU8X8_amx;
#endif
      // The exact integer limb QK (limb_query.h), bit-identical to scalar and wasm.
      t->qk.s8 = qk_gemm_s8_avx512vnni;
      t->qk.s4 = qk_gemm_s4_avx512vnni;
      t->quantized_qk = "exact-int16-limbs";
      // Its passes of three rows keep pace with packing longer. `attnkit bench` medians, one thread, T=4096, S new
      // tokens (tiles of S rows per query head of a KV head), packing from 12 rows against from 24, 3 rounds, ms:
      // N=32/Nk=8 H=128 S=4 int4 2.64-3.44 against 1.91-2.10 (int8 level); H=96 S=3 int4 1.67-1.83 against
      // 1.27-1.87, int8 1.75-1.93 against 1.54-2.04; N=16/Nk=4 H=256 S=3 int4 2.09-4.64 against 1.51-1.62;
      // N=14/Nk=2 H=64 S=3 int4 0.43-0.57 against 0.41-0.44. At H=128 int4 kept ahead or level up to 64 rows.
      t->qk.quantized_packed_min_rows = 24;
      // The approximate VNNI QK is opt-in (it quantizes the query): the driver uses it only when asked.
      t->qk.s8_approx_vnni = qk_gemm_s8_approx_avx512vnni;
    }
  }
#endif
#if defined(ATTNKIT_HAVE_QK_GEMM_NEON)
  if (isa == "neon") {
#if defined(__aarch64__)
    const bool sdot = f.dotprod;
#else
    const bool sdot = true;  // SIMDe emulates sdot on any host
#endif
    ATTNKIT_FILL(neon, sdot ? kGemmU8X8_neon_dotprod : kGemmU8X8_neon);
#if defined(ATTNKIT_HAVE_QK_GEMM_NEON_DOTPROD)
    if (sdot) {
      // The exact integer limb QK through sdot, bit-identical to scalar, VNNI and wasm. Inner loops of the aarch64
      // build at two query rows (objdump): 11.5 instructions per key and 16 int8 elements where the fp32
      // conversion kernel takes 27, and 23 per 32 int4 elements where it takes 92.
      t->qk.s8 = qk_gemm_s8_neon_dotprod;
      t->qk.s4 = qk_gemm_s4_neon_dotprod;
      t->quantized_qk = "exact-int16-limbs";
    }
#endif
  }
#endif
#if defined(ATTNKIT_HAVE_QK_GEMM_WASM128)
  if (isa == "wasm128") ATTNKIT_FILL(wasm128, kGemmU8X8_wasm128);
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

std::string isa_env_problem() {
  const char* forced = std::getenv("ATTNKIT_ISA");
  if (!forced || !*forced || isa_runnable(forced)) return std::string();
  std::string names;
  for (const std::string& isa : available_isas()) names += (names.empty() ? "" : ", ") + isa;
  return std::string("ATTNKIT_ISA: \"") + forced + "\" is not available here (available: " + names + ")";
}

const KernelTable& kernel_table() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.selected) {
    const char* forced = std::getenv("ATTNKIT_ISA");
    if (forced && *forced) r.selected = table_locked(r, forced);
    if (!r.selected) {
      r.selected = table_locked(r, best_native_isa());
      // A mistyped ISA must not pass unnoticed: the caller asked for other bits than these.
      const std::string problem = isa_env_problem();
      if (!problem.empty()) std::fprintf(stderr, "attnkit: %s; using %s\n", problem.c_str(), r.selected->isa);
    }
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

bool cpu_has_feature(const std::string& name) {
  const auto& names = cpu().names;
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace attnkit
