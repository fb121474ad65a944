// The fake libcuda's event log, read back to see whose GPU work overlapped.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace nvshare::test {

// One piece of GPU work from the fake's log.
struct Work {
    pid_t pid;
    uint64_t start, end;
    std::string name;
};
std::vector<Work> read_work(const std::string& log);
std::vector<Work> work_of(const std::vector<Work>& all, pid_t pid);
// The work whose driver call's name starts with `prefix` ("cuLaunch": the
// program's kernels; "cuMemcpyAsync": among others, the swap engine's copies).
std::vector<Work> work_named(const std::vector<Work>& all, const std::string& prefix);
// Whether any work of a overlapped in time with any work of b.
bool overlapped(const std::vector<Work>& all, pid_t a, pid_t b);
// One line of the fake's log: when (CLOCK_MONOTONIC ns), whose, and what
// (the rest of the line, "alloc vmm 67108864 cuMemCreate").
struct Event {
    uint64_t ns;
    pid_t pid;
    std::string what;
};
std::vector<Event> read_events(const std::string& log);
// Lines of the fake's log that contain `needle`, for process pid.
int count_events(const std::string& log, pid_t pid, const std::string& needle);

}  // namespace nvshare::test
