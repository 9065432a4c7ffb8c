// attnkit gemm_u8x8, AVX512-VNNI: vpdpbusd multiplies u8 x s8 and adds groups of 4 into int32 with no
// intermediate saturation, 64 products per instruction. u8 weights are shifted to s8 while packing
// (see gemm_u8x8_impl.h); zero points are corrected with row and column sums.
#include "gemm_u8x8/x86_direct_impl.h"
#include "gemm_u8x8/x86_vnni512_impl.h"

namespace attnkit {
namespace {

using Vnni512 = GemmEntry<Dot4Gemm<kMr, kNr, false, MicroVnni512, PackVnni512>, X86Direct<DirectAvx512>>;

}  // namespace

extern const GemmU8X8Kernels kGemmU8X8_avx512vnni = Vnni512::kernels("avx512vnni", kNr);

}  // namespace attnkit
