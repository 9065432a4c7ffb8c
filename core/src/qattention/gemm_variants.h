// attnkit: every gemm_u8x8 kernel variant this build holds and this CPU runs, for the kernel tests
// and the bench (the dispatch table exposes only the one variant each ISA uses).
#pragma once
#include <vector>

#include "gemm_u8x8/gemm_u8x8.h"

namespace attnkit {

std::vector<GemmU8X8Kernels> gemm_u8x8_variants();

}  // namespace attnkit
