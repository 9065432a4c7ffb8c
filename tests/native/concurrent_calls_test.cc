// attnkit tests: calls from several application threads at once (a server's sessions, ORT's inter-op threads).
// They share the process-wide thread pool, the tensor pool and the kernel table; each call must still give the bits
// it gives alone, whatever the thread counts of the calls beside it, and the C ABI's info string must stay each
// caller's own.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "attnkit/attnkit.h"
#include "corpus_cases.h"

namespace attnkit {
namespace {

// std::thread in a wasm test would need a free worker of Emscripten's fixed pool, and a page calls from one thread.
#if !defined(__EMSCRIPTEN__)

// Decode with split KV (int4), chunked prompts (int8, int4), flash over several blocks, every GQA feature at once,
// and QAttention prompts and steps.
std::vector<Case> load_cases() {
  return load_corpus_cases({"gqa/models--mqa-h128-int4-split-kv-decode.json",
                            "gqa/models--mistral-g4-h128-rotary-int4-chunked.json",
                            "gqa/models--gemma2-h256-softcap-window-int8-decode.json",
                            "gqa/combo--decode-batch3-rotary-window-softcap-bias-sink-qk.json",
                            "gqa/chunked--past64-s33-h128.json",
                            "qattention/heads--n12-h64-s64.json",
                            "qattention/ort-test--past-state-u8s8-per-column.json",
                            "qattention/uni--past-p4-s6.json"});
}

std::vector<CaseOutput> run(const Case& c, int threads) {
  RunOptions options;
  options.threads = threads;
  std::vector<CaseOutput> outputs;
  const Status st = run_case(c, options, false, &outputs);
  EXPECT_TRUE(st.ok()) << c.name << ": " << st.message();
  return outputs;
}

TEST(ConcurrentCalls, EachCallGivesTheBitsItGivesAlone) {
  const std::vector<Case> cases = load_cases();
  ASSERT_GE(cases.size(), 8u);
  std::vector<std::vector<CaseOutput>> alone;
  for (const Case& c : cases) alone.push_back(run(c, 2));
  const std::string info = attnkit_info_json();

  constexpr int kCallers = 4, kRounds = 3;
  std::vector<std::vector<std::string>> mismatches(kCallers);
  std::vector<std::thread> callers;
  for (int caller = 0; caller < kCallers; ++caller) {
    callers.emplace_back([&, caller] {
      for (int round = 0; round < kRounds; ++round) {
        // The C ABI's info string must stay this thread's while the others ask for theirs.
        const char* own_info = attnkit_info_json();
        for (size_t k = 0; k < cases.size(); ++k) {
          // Each caller walks the cases from its own start with its own thread counts, so different ops, shapes
          // and region sizes overlap.
          const size_t i = (k + static_cast<size_t>(caller) * 3) % cases.size();
          const int threads = 1 + (caller + round + static_cast<int>(k)) % 3;
          const std::vector<CaseOutput> got = run(cases[i], threads);
          bool same = got.size() == alone[i].size();
          for (size_t o = 0; same && o < got.size(); ++o) same = got[o].bytes == alone[i][o].bytes;
          if (!same) mismatches[caller].push_back(cases[i].name + " on " + std::to_string(threads) + " threads");
        }
        if (info != own_info) mismatches[caller].push_back("attnkit_info_json changed under its caller");
      }
    });
  }
  for (std::thread& t : callers) t.join();
  for (int caller = 0; caller < kCallers; ++caller)
    for (const std::string& m : mismatches[caller]) ADD_FAILURE() << "caller " << caller << ": " << m;
}

#endif

}  // namespace
}  // namespace attnkit
