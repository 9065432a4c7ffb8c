// attnkit: copying a cache's rows between layouts of different capacities, (heads, rows a head, row bytes), as the
// GQA and QAttention caches do when they grow, load a present or read one out.
#pragma once
#include <cstdint>
#include <cstring>

namespace attnkit {

// Copies the first `rows` rows of each of `heads` heads between layouts of `from_rows` and `to_rows` rows a head.
inline void copy_head_rows(const void* from, int64_t from_rows, void* to, int64_t to_rows, int64_t heads,
                           int64_t rows, int64_t row_bytes) {
  if (rows == 0) return;  // the source may be an empty tensor without data
  const auto* src = static_cast<const uint8_t*>(from);
  auto* dst = static_cast<uint8_t*>(to);
  for (int64_t h = 0; h < heads; ++h)
    std::memcpy(dst + h * to_rows * row_bytes, src + h * from_rows * row_bytes, static_cast<size_t>(rows * row_bytes));
}

}  // namespace attnkit
