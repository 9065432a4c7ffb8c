// attnkit tests: the `attnkit` CLI end to end (run, bench, info, exit codes, one-line errors) on the
// hand-written tests/cases/gqa/cli-*.json cases. The CLI is found beside this binary's build tree (or
// through ATTNKIT_CLI); where no runnable CLI exists (the wasm build) the tests are skipped.
#include <gtest/gtest.h>
#if defined(_WIN32)
#include <io.h>
#include <windows.h>
#else
#include <sys/wait.h>
#include <unistd.h>
#endif

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "case_file.h"
#include "common/half.h"
#include "common/json.h"

namespace attnkit {
namespace {

std::string dirname_of(const std::string& path) { return path.substr(0, path.find_last_of('/')); }

std::string source_root() { return dirname_of(dirname_of(dirname_of(__FILE__))); }

std::string cases_dir() { return source_root() + "/tests/cases/gqa/"; }

std::string cli_path() {
  if (const char* env = std::getenv("ATTNKIT_CLI")) return env;
  char self[4096];
#if defined(_WIN32)
  DWORD n = GetModuleFileNameA(nullptr, self, sizeof(self));
  if (n == 0 || n >= sizeof(self)) return "";
  for (DWORD i = 0; i < n; ++i) self[i] = self[i] == '\\' ? '/' : self[i];
  self[n] = '\0';
  return dirname_of(dirname_of(dirname_of(self))) + "/attnkit.exe";
#else
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "";
  self[n] = '\0';
  return dirname_of(dirname_of(dirname_of(self))) + "/attnkit";  // <build>/tests/native/attnkit_tests
#endif
}

bool cli_exists(const std::string& path) {
#if defined(_WIN32)
  return _access(path.c_str(), 0) == 0;
#else
  return access(path.c_str(), X_OK) == 0;
#endif
}

struct Result {
  int code = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

Result cli(const std::string& args) {
  std::string dir = ::testing::TempDir();
  std::string out = dir + "attnkit_cli_out.txt", err = dir + "attnkit_cli_err.txt";
  Result r;
#if defined(_WIN32)
  // cmd.exe drops the first and the last quote of a line that starts with one, hence the outer pair.
  std::string cmd = "\"\"" + cli_path() + "\" " + args + " >\"" + out + "\" 2>\"" + err + "\"\"";
  // -1: cmd.exe itself did not start (under Wine, now and then), so nothing of the CLI ran: start it again.
  for (int attempt = 0; attempt < 3 && (r.code = std::system(cmd.c_str())) == -1; ++attempt) {
  }
#else
  std::string cmd = "'" + cli_path() + "' " + args + " >'" + out + "' 2>'" + err + "'";
  int status = std::system(cmd.c_str());
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
#endif
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// An environment variable set for the CLI runs in one scope (std::system passes the environment on), then restored.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    set(value);
  }
  ~ScopedEnv() { had_ ? set(old_.c_str()) : set(nullptr); }

 private:
  void set(const char* value) {
#if defined(_WIN32)
    _putenv_s(name_.c_str(), value ? value : "");
#else
    value ? setenv(name_.c_str(), value, 1) : unsetenv(name_.c_str());
#endif
  }
  std::string name_, old_;
  bool had_ = false;
};

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cli_exists(cli_path()) || cli("info").code != 0) {
      FAIL() << "no runnable attnkit CLI at " << cli_path() << " (set ATTNKIT_CLI)";
    }
  }
};

JsonValue json_of(const std::string& text) {
  JsonValue v;
  Status st = parse_json(text, &v);
  EXPECT_TRUE(st.ok()) << st.message() << "\n" << text.substr(0, 200);
  return v;
}

// A result tensor's elements as doubles (float32/16/bf16 or float64), or raw bytes for the rest.
std::vector<double> values_of(const JsonValue& tensor) {
  std::vector<uint8_t> bytes;
  std::string why;
  EXPECT_TRUE(base64_decode(tensor.find("base64")->as_string(), &bytes, &why)) << why;
  const std::string& dtype = tensor.find("dtype")->as_string();
  std::vector<double> v;
  if (dtype == "float64") {
    v.resize(bytes.size() / 8);
    std::memcpy(v.data(), bytes.data(), bytes.size());
  } else if (dtype == "float32") {
    for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
      float f;
      std::memcpy(&f, &bytes[i], 4);
      v.push_back(f);
    }
  } else if (dtype == "float16" || dtype == "bfloat16") {
    for (size_t i = 0; i + 2 <= bytes.size(); i += 2) {
      uint16_t h = static_cast<uint16_t>(bytes[i] | (bytes[i + 1] << 8));
      v.push_back(dtype == "float16" ? f16_to_float(h) : bf16_to_float(h));
    }
  } else {
    v.assign(bytes.begin(), bytes.end());
  }
  return v;
}

// Compares `run` with `run --reference` for one case result, within the case's own tolerance (the
// tolerance the corpus states against ORT; the fp64 reference is at least as close to exact as ORT).
void expect_close_to_reference(const JsonValue& got, const JsonValue& ref, const JsonValue& case_json) {
  const JsonValue* tol = case_json.find("tolerance");
  double atol = tol ? tol->find("atol")->as_double() : 0.0, rtol = tol ? tol->find("rtol")->as_double() : 0.0;
  const JsonValue* outs = got.find("outputs");
  const JsonValue* ref_outs = ref.find("outputs");
  ASSERT_EQ(outs->size(), ref_outs->size());
  for (const auto& m : outs->members()) {
    const JsonValue* r = ref_outs->find(m.first);
    ASSERT_NE(r, nullptr) << m.first;
    std::vector<double> a = values_of(m.second), b = values_of(*r);
    ASSERT_EQ(a.size(), b.size()) << m.first;
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_LE(std::fabs(a[i] - b[i]), atol + rtol * std::fabs(b[i])) << m.first << "[" << i << "]";
    }
  }
}

TEST_F(Cli, SingleTokenOutputIsTheValueExactly) {
  std::string path = cases_dir() + "cli-single-token-output-is-value.json";
  Result r = cli("run " + path);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  JsonValue result = json_of(r.out);
  EXPECT_EQ(result.find("name")->as_string(), "gqa/cli/single-token-output-is-value");
  const JsonValue* out = result.find("outputs")->find("output");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->find("dtype")->as_string(), "float32");
  JsonValue c = json_of(slurp(path));
  Tensor expected;
  ASSERT_TRUE(build_tensor("output", *c.find("expected")->find("output"), &expected).ok());
  std::vector<double> got = values_of(*out);
  ASSERT_EQ(got.size(), static_cast<size_t>(expected.elements()));
  // One visible key: softmax weight exactly 1, so each head's output is its kv head's value row.
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], expected.as<float>()[i]) << i;
}

TEST_F(Cli, ValidCasesAgreeWithTheReferenceAndAcrossThreadsAndPaths) {
  for (const char* name : {"cli-decode-fp16-past9.json", "cli-multi-three-cases.json"}) {
    std::string path = cases_dir() + name;
    Result run = cli("run " + path + " --threads 2");
    ASSERT_EQ(run.code, 0) << name << ": " << run.err;
    Result one = cli("run " + path + " --threads 1");
    EXPECT_EQ(one.out, run.out) << name << ": results must not depend on the thread count";
    Result ref = cli("run " + path + " --reference");
    ASSERT_EQ(ref.code, 0) << name << ": " << ref.err;
    Result naive = cli("run " + path + " --path naive");
    ASSERT_EQ(naive.code, 0) << name << ": " << naive.err;
    JsonValue cases = json_of(slurp(path)), got = json_of(run.out), want = json_of(ref.out),
              got_naive = json_of(naive.out);
    if (cases.is_object()) {
      expect_close_to_reference(got, want, cases);
      expect_close_to_reference(got_naive, want, cases);
      continue;
    }
    ASSERT_TRUE(got.is_array());
    ASSERT_EQ(got.size(), cases.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      EXPECT_EQ(got.at(i).find("name")->as_string(), cases.at(i).find("name")->as_string());
      expect_close_to_reference(got.at(i), want.at(i), cases.at(i));
      expect_close_to_reference(got_naive.at(i), want.at(i), cases.at(i));
    }
  }
}

TEST_F(Cli, CaseSelectionAndOutFile) {
  std::string path = cases_dir() + "cli-multi-three-cases.json";
  Result by_name = cli("run " + path + " --case gqa/cli/multi/qk-output-after-softmax");
  ASSERT_EQ(by_name.code, 0) << by_name.err;
  JsonValue one = json_of(by_name.out);
  ASSERT_TRUE(one.is_object());
  const JsonValue* outs = one.find("outputs");
  ASSERT_EQ(outs->size(), 2u);
  EXPECT_EQ(outs->members()[0].first, "output");
  EXPECT_EQ(outs->members()[1].first, "output_qk");
  EXPECT_EQ(outs->find("output_qk")->find("shape")->size(), 4u);
  std::string out_file = ::testing::TempDir() + "attnkit_cli_case2.json";
  Result by_index = cli("run " + path + " --case 2 --out " + out_file);
  ASSERT_EQ(by_index.code, 0) << by_index.err;
  EXPECT_EQ(by_index.out, "");
  EXPECT_EQ(slurp(out_file), by_name.out);
  Result missing = cli("run " + path + " --case 3");
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("--case: no case named or numbered \"3\""), std::string::npos) << missing.err;
}

TEST_F(Cli, InvalidCasesExitTwoWithTheirMessage) {
  const char* names[] = {"unknown-attribute", "fractional-int-attribute", "string-attribute-not-string",
                         "unknown-input",     "unknown-output",           "unknown-dtype",
                         "data-length",       "bad-base64",               "int-data-not-integer",
                         "unknown-op",        "misspelt-case-field",      "tolerance-as-text",
                         "tolerance-field",   "expected-not-produced",    "ort-note",
                         "seed-number-above-2-53"};
  for (const char* n : names) {
    std::string path = cases_dir() + "cli-invalid-" + n + ".json";
    JsonValue c = json_of(slurp(path));
    Result r = cli("run " + path);
    EXPECT_EQ(r.code, 2) << n;
    EXPECT_EQ(r.out, "") << n;
    ASSERT_FALSE(r.err.empty()) << n;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << n << ": exactly one line: " << r.err;
    EXPECT_NE(r.err.find(c.find("expect_error")->as_string()), std::string::npos) << n << ": " << r.err;
  }
}

TEST_F(Cli, BadFilesAndOptionsNeverCrash) {
  std::string dir = ::testing::TempDir();
  Result missing = cli("run " + dir + "no-such-case.json");
  EXPECT_EQ(missing.code, 1) << missing.err;
  std::ofstream(dir + "attnkit_truncated.json") << "{\"op\": \"GroupQueryAttention\", \"inputs\": {";
  Result truncated = cli("run " + dir + "attnkit_truncated.json");
  EXPECT_EQ(truncated.code, 2);
  EXPECT_NE(truncated.err.find("JSON line 1, column 42"), std::string::npos) << truncated.err;
  std::string noise;
  for (int i = 0; i < 4096; ++i) noise.push_back(static_cast<char>((i * 7919) % 251));
  std::ofstream(dir + "attnkit_noise.json", std::ios::binary) << noise;
  EXPECT_EQ(cli("run " + dir + "attnkit_noise.json").code, 2);
  std::ofstream(dir + "attnkit_number.json") << "[1, 2]";
  EXPECT_EQ(cli("run " + dir + "attnkit_number.json").code, 2);
  std::string valid = cases_dir() + "cli-decode-fp16-past9.json";
  Result isa = cli("run " + valid + " --isa no-such-isa");
  EXPECT_EQ(isa.code, 2);
  EXPECT_NE(isa.err.find("(available: scalar"), std::string::npos) << isa.err;
  EXPECT_EQ(cli("run " + valid + " --threads -1").code, 2);
  EXPECT_EQ(cli("run " + valid + " --path fastest").code, 2);
  EXPECT_EQ(cli("run " + valid + " --bogus 1").code, 2);
  // Another command's option is refused, not ignored (bench --reference timed the optimised op).
  for (const std::string& line :
       {"bench " + valid + " --reference", "run " + valid + " --iters 5", std::string("info --threads 3")}) {
    Result other = cli(line);
    EXPECT_EQ(other.code, 2) << line;
    EXPECT_NE(other.err.find(": not an option of "), std::string::npos) << line << ": " << other.err;
  }
  EXPECT_EQ(cli("run").code, 2);
  EXPECT_EQ(cli("frobnicate").code, 2);
  EXPECT_EQ(cli("run " + valid + " --out " + dir + "no-such-dir/out.json").code, 1);
  Result scalar = cli("run " + valid + " --isa scalar");
  EXPECT_EQ(scalar.code, 0) << scalar.err;
  EXPECT_EQ(cli("run " + valid + " --isa \"\"").code, 2);
  // The environment's ISA and thread count are checked as the options are, where no option overrides them.
  {
    ScopedEnv env("ATTNKIT_ISA", "NEON");
    Result typo = cli("run " + valid);
    EXPECT_EQ(typo.code, 2);
    EXPECT_NE(typo.err.find("ATTNKIT_ISA: \"NEON\" is not available here (available: scalar"), std::string::npos)
        << typo.err;
    EXPECT_EQ(cli("run " + valid + " --isa scalar").code, 0);
  }
  {
    ScopedEnv env("ATTNKIT_NUM_THREADS", "two");
    Result typo = cli("bench " + valid + " --iters 1");
    EXPECT_EQ(typo.code, 2);
    EXPECT_NE(typo.err.find("ATTNKIT_NUM_THREADS: \"two\" must be a thread count"), std::string::npos) << typo.err;
    EXPECT_EQ(cli("bench " + valid + " --iters 1 --threads 2").code, 0);
  }
}

TEST_F(Cli, HelpPrintsUsageAndSucceeds) {
  for (const char* line : {"--help", "-h", "help", "run --help", "bench some-case.json -h"}) {
    Result r = cli(line);
    EXPECT_EQ(r.code, 0) << line;
    EXPECT_EQ(r.out.rfind("usage: attnkit run CASE.json", 0), 0u) << line << ": " << r.out;
    EXPECT_EQ(r.err, "") << line;
  }
  Result bare = cli("");
  EXPECT_EQ(bare.code, 2);
  EXPECT_EQ(bare.err.rfind("usage:", 0), 0u) << bare.err;
}

TEST_F(Cli, BenchPrintsOneJsonLine) {
  Result r = cli("bench " + cases_dir() + "cli-decode-fp16-past9.json --iters 3 --warmup 1 --threads 1");
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
  JsonValue b = json_of(r.out);
  for (const char* key : {"median_us", "min_us", "mean_us", "iters", "isa", "threads", "path", "peak_scratch_bytes"}) {
    EXPECT_NE(b.find(key), nullptr) << key;
  }
  EXPECT_EQ(b.find("iters")->as_double(), 3.0);
  EXPECT_EQ(b.find("threads")->as_double(), 1.0);
  EXPECT_LE(b.find("min_us")->as_double(), b.find("median_us")->as_double());
  Result many = cli("bench " + cases_dir() + "cli-multi-three-cases.json");
  EXPECT_EQ(many.code, 2);
  EXPECT_NE(many.err.find("pick one with --case"), std::string::npos);
  EXPECT_EQ(cli("bench " + cases_dir() + "cli-multi-three-cases.json --case 1 --iters 2").code, 0);
}

TEST_F(Cli, InfoReportsVersionIsasAndThreads) {
  Result r = cli("info");
  ASSERT_EQ(r.code, 0);
  JsonValue info = json_of(r.out);
  for (const char* key : {"version", "cpu_features", "available_isas", "isa", "threads"}) {
    EXPECT_NE(info.find(key), nullptr) << key;
  }
  Result scalar = cli("info --isa scalar");
  ASSERT_EQ(scalar.code, 0);
  EXPECT_EQ(json_of(scalar.out).find("isa")->as_string(), "scalar");
}

}  // namespace
}  // namespace attnkit
