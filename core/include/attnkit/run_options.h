// attnkit: per-call execution options shared by both operators.
// Numbers never depend on them except `path`-independent summation order (flash vs naive) and the
// opt-in approximate VNNI query quantization; threads only change speed (results are bit-identical).
#pragma once
#include <cstddef>
#include <string>

namespace attnkit {

enum class AttentionPath { kAuto, kNaive, kFlash };

struct RunOptions {
  int threads = 0;                        // 0: all threads of the pool (hardware concurrency)
  AttentionPath path = AttentionPath::kAuto;
  size_t* peak_scratch_bytes = nullptr;   // when set, receives the scratch high-water mark of the call
};

// Parses "auto" | "naive" | "flash".
bool attention_path_from_name(const std::string& name, AttentionPath* path);

}  // namespace attnkit
