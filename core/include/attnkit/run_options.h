// attnkit: per-call execution options shared by both operators.
// Threads only change speed (results are bit-identical); the path and the flash block change the order of the
// softmax sums (results within the accuracy bound). (The approximate VNNI int8 QK is no option here: it is the
// environment's, ATTNKIT_QKGEMM_S8_APPROX_VNNI.)
#pragma once
#include <cstddef>
#include <string>

namespace attnkit {

enum class AttentionPath { kAuto, kNaive, kFlash };

struct RunOptions {
  int threads = 0;  // 0: ATTNKIT_NUM_THREADS, else the CPUs this process may use (affinity mask, cgroup quota)
  AttentionPath path = AttentionPath::kAuto;
  size_t* peak_scratch_bytes = nullptr;   // when set, receives the scratch high-water mark of the call
  // GroupQueryAttention prompts (S > 1) on the flash path: keys per online-softmax block, a multiple of 16 up to
  // 65536. 0 lets the planner choose by head size (the fastest measured); the tests set small blocks so that short
  // sequences cross block boundaries.
  int flash_block_keys = 0;
};

// Parses "auto" | "naive" | "flash".
bool attention_path_from_name(const std::string& name, AttentionPath* path);

}  // namespace attnkit
