// attnkit: how many CPUs this process may run on, for the default thread count. std::thread::hardware_concurrency()
// counts the machine's, so in a container limited to 4 of 64 cores, or under taskset, every call would start a
// thread per host core on the few it has (on a 16-core Xeon, a call waiting on a set-aside thread took 2-10x).
#pragma once
#include <string>

namespace attnkit {

// The CPUs in this thread's affinity mask, lowered to a cgroup CPU quota where one is set (rounded up); at least 1.
// Elsewhere (not Linux, wasm) std::thread::hardware_concurrency(), or 1 where that is unknown.
int available_cpus();

// CPUs a cgroup quota allows, rounded up: cgroup v2's cpu.max text ("max 100000", "150000 100000"), or v1's
// cfs_quota_us and cfs_period_us as one "quota period" line (quota -1: none). 0 when there is no limit or the text
// does not parse.
int cpus_from_cgroup_quota(const std::string& quota_and_period);

}  // namespace attnkit
