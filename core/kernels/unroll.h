// attnkit: ATTNKIT_UNROLL, put before a register tile's loops over rows or vectors. Unrolled early,
// GCC keeps the tile's accumulator array in registers; unrolled late (its default at -O2), the array
// lived on the stack around the hot loop (zero-fill, spill, reload per tile): 8-10% of a 12-row fp32
// QK tile at H = 64. (The VNNI tiles' per-step register copies are x86_vnni.h's business.)
#pragma once

#define ATTNKIT_UNROLL _Pragma("GCC unroll 16")
