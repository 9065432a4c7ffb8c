// attnkit tests: the whole suite runs on poisoned buffers (detail::set_poison_new_buffers). Every tensor and
// scratch buffer starts as 0xFF bytes, so an output byte a call leaves unwritten fails the comparisons that read
// it, where a recycled buffer would have passed them with an earlier, identical call's bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "attnkit/tensor.h"

namespace attnkit {
namespace {

class PoisonNewBuffers : public ::testing::Environment {
 public:
  void SetUp() override { detail::set_poison_new_buffers(true); }
};

const ::testing::Environment* const kPoisonNewBuffers = ::testing::AddGlobalTestEnvironment(new PoisonNewBuffers);

TEST(MemoryPoison, UnsetStorageIsPoisonedFreshOrRecycled) {
  // 1 KiB comes from operator new, 256 KiB from the pool; the second round gets the blocks the first zeroed back.
  for (int64_t elements : {256, 65536}) {
    for (int round = 0; round < 2; ++round) {
      Tensor t;
      t.reset_uninitialized(DType::kFloat32, Shape{elements});
      EXPECT_TRUE(std::all_of(t.storage.begin(), t.storage.end(), [](uint8_t b) { return b == 0xFF; }))
          << elements << " elements, round " << round;
      std::fill(t.storage.begin(), t.storage.end(), uint8_t{0});
    }
  }
  Tensor zeroed;
  zeroed.reset(DType::kInt8, Shape{65536});
  EXPECT_TRUE(std::all_of(zeroed.storage.begin(), zeroed.storage.end(), [](uint8_t b) { return b == 0; }));
}

#if defined(__linux__) && !defined(__EMSCRIPTEN__)
// Blocks above what the pool keeps (256 MiB) are mapped afresh for each call, on Linux 2 MiB-aligned so that
// transparent huge pages can back them (tensor.cc); poisoned, written and freed like any other.
TEST(MemoryPoison, BlocksAboveThePoolAreHugePageAlignedAndWhole) {
  for (int round = 0; round < 2; ++round) {
    Tensor t;
    t.reset_uninitialized(DType::kUInt8, Shape{int64_t{260} << 20});
    ASSERT_EQ(t.storage.size(), size_t{260} << 20);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.storage.data()) % (uintptr_t{2} << 20), 0u);
    EXPECT_TRUE(std::all_of(t.storage.begin(), t.storage.end(), [](uint8_t b) { return b == 0xFF; }));
    t.storage.front() = t.storage.back() = 0;
  }
}
#endif

}  // namespace
}  // namespace attnkit
