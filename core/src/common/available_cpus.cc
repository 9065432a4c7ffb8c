// attnkit: the CPUs this process may use (available_cpus.h): the affinity mask, then the cgroup quota of the
// cgroup namespace's root, where Docker and Kubernetes put a container's limit (cgroup v2, then v1). On Windows,
// the process affinity mask.
#include "common/available_cpus.h"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>
#include <thread>

#if defined(__linux__) && !defined(__EMSCRIPTEN__)
#include <sched.h>
#elif defined(_WIN32)
#ifndef NOMINMAX
#define NOMINMAX  // std::min, not windows.h's macro
#endif
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#endif

namespace attnkit {

int cpus_from_cgroup_quota(const std::string& quota_and_period) {
  std::istringstream in(quota_and_period);
  std::string quota;
  long long period = 0;
  if (!(in >> quota >> period) || period <= 0 || quota == "max") return 0;
  long long q = 0;
  try {
    size_t used = 0;
    q = std::stoll(quota, &used);
    if (used != quota.size()) return 0;
  } catch (...) {
    return 0;
  }
  if (q <= 0) return 0;  // v1 writes -1 for no limit
  return static_cast<int>(std::min<long long>((q + period - 1) / period, 1 << 20));
}

#if defined(__linux__) && !defined(__EMSCRIPTEN__)
namespace {

std::string read_first_line(const char* path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

int cgroup_quota_cpus() {
  if (int v2 = cpus_from_cgroup_quota(read_first_line("/sys/fs/cgroup/cpu.max"))) return v2;
  const std::string quota = read_first_line("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
  const std::string period = read_first_line("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
  return quota.empty() || period.empty() ? 0 : cpus_from_cgroup_quota(quota + " " + period);
}

}  // namespace
#endif

int available_cpus() {
  int cpus = static_cast<int>(std::thread::hardware_concurrency());
#if defined(__linux__) && !defined(__EMSCRIPTEN__)
  // Sized for any machine: a fixed cpu_set_t holds 1024 CPUs, and sched_getaffinity fails on a mask too small.
  for (int capacity = 1024; capacity <= (1 << 20); capacity *= 2) {
    cpu_set_t* set = CPU_ALLOC(capacity);
    if (!set) break;
    const size_t bytes = CPU_ALLOC_SIZE(capacity);
    CPU_ZERO_S(bytes, set);
    const bool ok = sched_getaffinity(0, bytes, set) == 0;
    if (ok) cpus = CPU_COUNT_S(bytes, set);
    const int error = errno;
    CPU_FREE(set);
    if (ok || error != EINVAL) break;
  }
  if (int quota = cgroup_quota_cpus()) cpus = std::min(cpus, quota);
#elif defined(_WIN32)
  // A process whose threads span processor groups gets zero masks, and keeps the count of all processors.
  DWORD_PTR process_mask = 0, system_mask = 0;
  if (GetProcessAffinityMask(GetCurrentProcess(), &process_mask, &system_mask) && process_mask != 0) {
    cpus = 0;
    for (; process_mask != 0; process_mask &= process_mask - 1) ++cpus;
  }
#endif
  return std::max(cpus, 1);
}

}  // namespace attnkit
