// attnkit: the scalar element rule shared by qk_gemm and sv_gemm (and their scalar tails): element d
// of a cache row in its stored dtype, as float, without scales. s4 is the nibble of byte d/2 (low
// nibble for even d) minus 8.
#pragma once
#include <cstddef>
#include <cstdint>

#include "common/half.h"

namespace attnkit {
namespace cache_elem {

struct F32 {
  static constexpr size_t kBits = 32;
  static float at(const uint8_t* row, size_t d) { return reinterpret_cast<const float*>(row)[d]; }
};
struct F16 {
  static constexpr size_t kBits = 16;
  static float at(const uint8_t* row, size_t d) {
    return f16_to_float(reinterpret_cast<const uint16_t*>(row)[d]);
  }
};
// F16 for rows known to hold no inf or NaN (no exponent-31 pattern), such as a GqaKvCache's checked past: a loader
// may skip the exponent-31 handling. For those rows the kernels give F16's bits.
struct F16Finite : F16 {};
struct BF16 {
  static constexpr size_t kBits = 16;
  static float at(const uint8_t* row, size_t d) {
    return bf16_to_float(reinterpret_cast<const uint16_t*>(row)[d]);
  }
};
struct S8 {
  static constexpr size_t kBits = 8;
  static float at(const uint8_t* row, size_t d) {
    return static_cast<float>(reinterpret_cast<const int8_t*>(row)[d]);
  }
};
struct S4 {
  static constexpr size_t kBits = 4;
  static float at(const uint8_t* row, size_t d) {
    const uint8_t b = row[d / 2];
    return static_cast<float>(((d & 1) ? (b >> 4) : (b & 0xf)) - 8);
  }
};

// Bytes holding elements [0, n) of a row: what a kernel reads of it, where the row's stride may be longer (a
// QAttention head's K inside the projection's rows of 3 x hidden).
template <class E>
constexpr size_t row_bytes(size_t n) {
  return (n * E::kBits + 7) / 8;
}

}  // namespace cache_elem
}  // namespace attnkit
