// attnkit: the native command line — `run` a case file, `bench` one case, print `info`.
// Exit codes are part of the contract (DESIGN.md "Interfaces that must hold"): 0 ok; 2 an invalid case,
// input, attribute or option, with exactly one line on stderr; 1 an I/O error or out of memory.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>
#if defined(_WIN32)
#include <fcntl.h>
#include <io.h>
#endif

#include "attnkit/attnkit.h"
#include "case_file.h"
#include "common/thread_pool.h"
#include "dispatch.h"

namespace attnkit {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitIo = 1;  // and out of memory
constexpr int kExitInvalid = 2;

const char kUsage[] =
    "usage: attnkit run CASE.json [--out OUT.json] [--threads N] [--isa NAME] [--path auto|naive|flash] "
    "[--reference] [--case NAME|INDEX]\n"
    "       attnkit bench CASE.json [--iters N] [--warmup N] [--threads N] [--isa NAME] [--path auto|naive|flash] "
    "[--case NAME|INDEX] [--out OUT.json]\n"
    "       attnkit info [--isa NAME] [--out OUT.json]\n"
    "exit codes: 0 ok; 2 invalid case, input, attribute or option (one line on stderr); 1 I/O error or out of memory\n";

int report(int code, const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  return code;
}

// A failed op: its message, and exit 1 when it ran out of memory (valid inputs), else 2.
int report_op(const Status& st, const std::string& message) {
  return report(st.out_of_memory() ? kExitIo : kExitInvalid, message);
}

struct Options {
  std::string command;
  std::string case_path;
  std::string out_path;
  std::string isa;
  std::string case_selector;
  bool has_case_selector = false;
  int threads = 0;
  AttentionPath path = AttentionPath::kAuto;
  std::string path_name = "auto";
  bool reference = false;
  int iters = 10;
  int warmup = 2;
};

bool parse_count(const char* text, int min, int* out) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < min || v > 1000000) return false;
  *out = static_cast<int>(v);
  return true;
}

bool is_help(const std::string& arg) { return arg == "--help" || arg == "-h" || arg == "help"; }

// Returns an exit code, or -1 when the options are good.
int parse_options(int argc, char** argv, Options* o) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return kExitInvalid;
  }
  // Asked for, usage is the output (stdout, exit 0) wherever the request stands on the line.
  for (int i = 1; i < argc; ++i) {
    if (is_help(argv[i]) && (i == 1 || argv[i][0] == '-')) {
      std::fputs(kUsage, stdout);
      return kExitOk;
    }
  }
  o->command = argv[1];
  if (o->command != "run" && o->command != "bench" && o->command != "info") {
    return report(kExitInvalid, "unknown command \"" + o->command + "\" (run, bench or info)");
  }
  // The options each command takes (its usage line): another command's would be ignored without a word.
  const std::string takes = o->command == "run"     ? " --out --threads --isa --path --reference --case "
                            : o->command == "bench" ? " --out --iters --warmup --threads --isa --path --case "
                                                    : " --out --isa ";
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char** v) {
      if (i + 1 >= argc) return false;
      *v = argv[++i];
      return true;
    };
    static const char* const kValued[] = {"--out", "--isa", "--case", "--threads", "--iters", "--warmup", "--path"};
    bool valued = false;
    for (const char* name : kValued) valued = valued || arg == name;
    if ((valued || arg == "--reference") && takes.find(" " + arg + " ") == std::string::npos)
      return report(kExitInvalid,
                    arg + ": not an option of " + o->command + " (run attnkit without arguments for usage)");
    if (arg == "--reference") {
      o->reference = true;
      continue;
    }
    const char* v = nullptr;
    if (valued && !value(&v)) return report(kExitInvalid, arg + ": needs a value");
    if (arg == "--out") {
      o->out_path = v;
    } else if (arg == "--isa") {
      o->isa = v;
      if (o->isa.empty()) return report(kExitInvalid, "--isa: needs an ISA name");
    } else if (arg == "--case") {
      o->case_selector = v;
      o->has_case_selector = true;
    } else if (arg == "--threads") {
      if (!parse_count(v, 0, &o->threads)) return report(kExitInvalid, "--threads: must be an integer in [0, 1000000]");
    } else if (arg == "--iters") {
      if (!parse_count(v, 1, &o->iters)) return report(kExitInvalid, "--iters: must be an integer in [1, 1000000]");
    } else if (arg == "--warmup") {
      if (!parse_count(v, 0, &o->warmup)) return report(kExitInvalid, "--warmup: must be an integer in [0, 1000000]");
    } else if (arg == "--path") {
      o->path_name = v;
      if (!attention_path_from_name(v, &o->path)) {
        return report(kExitInvalid, std::string("--path: \"") + v + "\" must be auto, naive or flash");
      }
    } else if (arg.compare(0, 2, "--") == 0) {
      return report(kExitInvalid, "unknown option " + arg + " (run attnkit without arguments for usage)");
    } else if (o->case_path.empty() && o->command != "info") {
      o->case_path = arg;
    } else {
      return report(kExitInvalid, "unexpected argument \"" + arg + "\" (run attnkit without arguments for usage)");
    }
  }
  if (o->command != "info" && o->case_path.empty()) return report(kExitInvalid, o->command + ": missing CASE.json (run attnkit without arguments for usage)");
  // The environment's settings that the run uses are checked as the options are: a typo must not silently change it.
  for (const std::string& problem : {o->isa.empty() ? isa_env_problem() : std::string(),
                                     o->threads == 0 ? num_threads_env_problem() : std::string()})
    if (!problem.empty()) return report(kExitInvalid, problem);
  if (!o->isa.empty() && !set_kernel_isa(o->isa)) {
    std::string names;
    for (const std::string& isa : available_isas()) names += (names.empty() ? "" : ", ") + isa;
    return report(kExitInvalid, "--isa: \"" + o->isa + "\" is not available here (available: " + names + ")");
  }
  return -1;
}

struct LoadedFile {
  JsonValue doc;
  std::vector<const JsonValue*> cases;
  std::vector<size_t> selected;  // indexes into cases
  bool many = false;             // top-level array without --case: output an array
};

int load_file(const Options& o, LoadedFile* f) {
  std::string text;
  Status st = read_text_file(o.case_path, &text);
  if (!st.ok()) return report(kExitIo, st.message());
  st = parse_json(text, &f->doc);
  if (!st.ok()) return report(kExitInvalid, o.case_path + ": " + st.message());
  std::string().swap(text);
  st = list_cases(f->doc, &f->cases);
  if (!st.ok()) return report(kExitInvalid, st.message());
  if (!o.has_case_selector) {
    for (size_t i = 0; i < f->cases.size(); ++i) f->selected.push_back(i);
    f->many = f->doc.is_array();
    return -1;
  }
  for (size_t i = 0; i < f->cases.size(); ++i) {
    const JsonValue* name = f->cases[i]->find("name");
    if (name && name->is_string() && name->as_string() == o.case_selector) {
      f->selected.push_back(i);
      return -1;
    }
  }
  int index;
  if (parse_count(o.case_selector.c_str(), 0, &index) && static_cast<size_t>(index) < f->cases.size()) {
    f->selected.push_back(static_cast<size_t>(index));
    return -1;
  }
  return report(kExitInvalid, "--case: no case named or numbered \"" + o.case_selector + "\" in " + o.case_path +
                                  " (" + std::to_string(f->cases.size()) + " cases)");
}

// A failing case's message: the op's message as is, prefixed by the case name only in a multi-case run.
std::string case_message(const LoadedFile& f, const std::string& name, const Status& st) {
  return f.many ? "case " + name + ": " + st.message() : st.message();
}

int write_output(const Options& o, const std::string& text) {
  FILE* out = stdout;
  if (!o.out_path.empty()) {
    out = std::fopen(o.out_path.c_str(), "wb");
    if (!out) return report(kExitIo, o.out_path + ": cannot open for writing: " + std::strerror(errno));
  }
  bool ok = std::fwrite(text.data(), 1, text.size(), out) == text.size();
  ok = std::fflush(out) == 0 && ok;
  if (out != stdout) ok = std::fclose(out) == 0 && ok;
  if (!ok) return report(kExitIo, (o.out_path.empty() ? std::string("stdout") : o.out_path) + ": write failed");
  return kExitOk;
}

int command_run(const Options& o) {
  LoadedFile f;
  int rc = load_file(o, &f);
  if (rc >= 0) return rc;
  RunOptions options;
  options.threads = o.threads;
  options.path = o.path;
  // Nothing reaches stdout unless every case succeeds, so a failing run never leaves half a document.
  JsonWriter w;
  if (f.many) w.begin_array();
  for (size_t index : f.selected) {
    Case c;
    Status st = build_case(*f.cases[index], index, &c);
    // A case that fails to build is still named by its "name" field where it has one, as the JS CLI does.
    const JsonValue* named = f.cases[index]->find("name");
    std::string name = named && named->is_string() ? named->as_string() : "#" + std::to_string(index);
    if (!st.ok()) return report(kExitInvalid, case_message(f, name, st));
    std::vector<CaseOutput> outputs;
    st = run_case(c, options, o.reference, &outputs);
    if (!st.ok()) return report_op(st, case_message(f, name, st));
    write_case_result(&w, c.name, outputs);
  }
  if (f.many) w.end_array();
  w.raw("\n");
  return write_output(o, w.str());
}

int command_bench(const Options& o) {
  LoadedFile f;
  int rc = load_file(o, &f);
  if (rc >= 0) return rc;
  if (f.selected.size() != 1) {
    return report(kExitInvalid, "bench: " + o.case_path + " holds " + std::to_string(f.selected.size()) +
                                    " cases; pick one with --case NAME|INDEX");
  }
  size_t index = f.selected[0];
  Case c;
  Status st = build_case(*f.cases[index], index, &c);
  if (!st.ok()) return report(kExitInvalid, st.message());
  InputMap views = c.input_views();
  size_t peak = 0, call_peak = 0;
  RunOptions options;
  options.threads = o.threads;
  options.path = o.path;
  options.peak_scratch_bytes = &call_peak;
  std::vector<double> times_us;
  for (int i = 0; i < o.warmup + o.iters; ++i) {
    NamedTensors outputs;
    call_peak = 0;
    auto start = std::chrono::steady_clock::now();
    st = run_op(c.op, c.attrs, views, c.outputs, options, &outputs);
    auto stop = std::chrono::steady_clock::now();
    if (!st.ok()) return report_op(st, st.message());
    peak = std::max(peak, call_peak);
    if (i >= o.warmup) times_us.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
  }
  std::vector<double> sorted = times_us;
  std::sort(sorted.begin(), sorted.end());
  size_t n = sorted.size();
  double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  double mean = 0;
  for (double t : sorted) mean += t / static_cast<double>(n);
  JsonWriter w;
  w.begin_object();
  w.key("name");
  w.string(c.name);
  w.key("op");
  w.string(canonical_op_name(c.op));
  w.key("median_us");
  w.float64(median);
  w.key("min_us");
  w.float64(sorted.front());
  w.key("mean_us");
  w.float64(mean);
  w.key("iters");
  w.int64(o.iters);
  w.key("warmup");
  w.int64(o.warmup);
  w.key("isa");
  w.string(kernel_table().isa);
  w.key("threads");
  w.int64(resolve_threads(o.threads));
  w.key("path");
  w.string(o.path_name);
  w.key("peak_scratch_bytes");
  w.uint64(peak);
  w.end_object();
  w.raw("\n");
  return write_output(o, w.str());
}

int main_checked(int argc, char** argv) {
  Options o;
  int rc = parse_options(argc, argv, &o);
  if (rc >= 0) return rc;
  if (o.command == "info") return write_output(o, std::string(attnkit_info_json()) + "\n");
  if (o.command == "bench") return command_bench(o);
  return command_run(o);
}

}  // namespace
}  // namespace attnkit

int main(int argc, char** argv) {
#if defined(_WIN32)
  // Text mode would end Windows' lines in \r\n: stdout gets the bytes `--out` writes, on every platform.
  _setmode(_fileno(stdout), _O_BINARY);
#endif
  int rc = 1;
  try {
    rc = attnkit::main_checked(argc, argv);
  } catch (const std::bad_alloc&) {
    rc = attnkit::report(1, "out of memory");
  } catch (const std::exception& e) {
    rc = attnkit::report(1, std::string("internal error: ") + e.what());
  } catch (...) {
    rc = attnkit::report(1, "internal error");
  }
  // Joined here, not killed by the OS at exit: under Wine a killed waiter sometimes left a broken server call.
  attnkit::stop_thread_pool();
  return rc;
}
