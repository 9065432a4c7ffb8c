// attnkit: the kernel table — one struct of function pointers per ISA, chosen once from CPU features.
// Drivers call kernel_table() and never name an ISA. ATTNKIT_ISA=scalar|avx2|avx512|neon|wasm128
// (or set_kernel_isa) forces one; tests iterate over available_isas().
#pragma once
#include <string>
#include <vector>

#include "gemm_u8x8/gemm_u8x8.h"
#include "kv_quant/kv_quant.h"
#include "qk_gemm/qk_gemm.h"
#include "rotary/rotary.h"
#include "softmax/softmax.h"
#include "sv_gemm/sv_gemm.h"

namespace attnkit {

struct KernelTable {
  const char* isa;             // "scalar", "avx2", "avx512", "neon", "wasm128"
  QkGemmKernels qk;
  SvGemmKernels sv;
  KvQuantKernels kv;
  SoftmaxKernels softmax;
  RotaryKernels rotary;
  GemmU8X8Kernels gemm_u8x8;  // QAttention projection (u8 x s8/u8 -> s32)
  // How qk.s8/qk.s4 compute (for `attnkit info`): "exact-int16-limbs" (qk_gemm/limb_query.h, the same
  // bits on every ISA that says so) or "fp32-conversion".
  const char* quantized_qk;
};

// The table in use: ATTNKIT_ISA if set (must be available), else the best the CPU runs. An ATTNKIT_ISA that is
// not available here is reported on stderr once, and the best table runs.
const KernelTable& kernel_table();
// What is wrong with ATTNKIT_ISA (unknown or not runnable here), or "" (unset or fine): the CLI refuses it.
std::string isa_env_problem();
// Forces an ISA for the rest of the process; false (and no change) if it is not available here.
bool set_kernel_isa(const std::string& isa);
// The table for one ISA, or nullptr if it is not compiled in or the CPU cannot run it.
const KernelTable* kernel_table_for(const std::string& isa);
// ISAs compiled in and runnable here, best last. Emulated ISAs (NEON and wasm128 through SIMDe on
// x86) are included: they are correct, just not fast.
std::vector<std::string> available_isas();
// The ISA the CPU would pick natively (ignores ATTNKIT_ISA).
std::string best_native_isa();
// CPU feature names detected at start (for `attnkit info`), e.g. "avx2", "avx512vnni", "avxvnni", "dotprod".
std::vector<std::string> cpu_features();
bool cpu_has_feature(const std::string& name);

}  // namespace attnkit
