// attnkit: in-place VNNI multiply-accumulates for the x86 kernel files that have VNNI enabled.
// GCC 12 compiles acc = _mm512_dpbusd_epi32(acc, a, b) in a register tile into a fresh destination
// plus a copy back (24 zmm copies per 16 vpdpbusd in the 4x4 projection tile); binding the
// accumulator as an in-out asm operand keeps each one in its register.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace attnkit {
namespace {

inline void dpbusd_into(__m512i& acc, __m512i u8, __m512i s8) {
#if defined(__GNUC__) && !defined(__clang__)
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u8), "vm"(s8));
#else
  acc = _mm512_dpbusd_epi32(acc, u8, s8);
#endif
}

// acc += u8 . (the four signed bytes at s8x4, broadcast to every lane as a {1to16} memory operand).
inline void dpbusd_bcast_into(__m512i& acc, __m512i u8, const int32_t* s8x4) {
#if defined(__GNUC__) && !defined(__clang__)
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u8), "m"(*s8x4));
#else
  acc = _mm512_dpbusd_epi32(acc, u8, _mm512_set1_epi32(*s8x4));
#endif
}

}  // namespace
}  // namespace attnkit
