// End-to-end: what the driver answers about swap-engine memory is what it
// answers about cuMemAlloc memory (issue 43, item 7).
#include <gtest/gtest.h>

#include "tests/preload/clients.h"
#include "tests/preload/fake_log.h"
#include "tests/support/daemon.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace nvshare::test {
namespace {

// The line of `out` that starts with `prefix`, or "".
std::string line_of(const std::string& out, const std::string& prefix)
{
    const size_t at = out.find(prefix);
    if (at == std::string::npos)
        return {};
    return out.substr(at, out.find('\n', at) - at);
}

// What does not change from one query to the next: the line without its
// label and timing.
std::string answers(const std::string& line)
{
    const size_t from = line.find(' '), to = line.find(" ms=");
    return from == std::string::npos || to == std::string::npos ? line
                                                                : line.substr(from, to - from);
}

// Memory that found no room on the device is host memory mapped at its
// address: the driver calls that host memory with no context, and each
// chunk a buffer of its own; a cuMemAlloc buffer is device memory of the
// context it was made in, one buffer.
TEST(PointerAttributes, AreThoseOfCuMemAllocMemoryWhereverItLies)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto", "--capacity", "1G"});
    Process p =
        start_client(dir, daemon.socket(),
                     {{"--alloc", "300M", "--late-alloc", "300M", "--kernels", "1", "--attrs"},
                      {{"FAKECUDA_MEMORY", std::to_string(512ull << 20)}},
                      false},
                     "p");
    expect_clean_exit(p);
    const std::string first = line_of(p.out(), "attrs-first");
    EXPECT_NE(first.find("r=0/0 ctx=same/same type=2 ordinal=0 "), std::string::npos) << p.out();
    EXPECT_NE(first.find("start=ok"), std::string::npos) << first;
    EXPECT_GE(count_events(dir / "fake.log", p.pid(), "alloc vmm-host"), 1)
        << "nothing went to host memory:\n"
        << read_text(dir / "fake.log");
}

// A small allocation is a block of a slab (one swappable allocation): the
// driver's questions about it are answered for the block, as cuMemAlloc
// memory: its own start, size and buffer ID. Freeing a block (the middle of
// three, here) leaves its neighbours' data, and a new block in its place
// holds what is written there.
TEST(PointerAttributes, OfASmallAllocationAreThoseOfItsBlock)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto"});
    Process p = start_client(dir, daemon.socket(),
                             {{"--alloc", "100000", "--allocs", "3", "--kernels", "1", "--attrs",
                               "--check-data", "--free-middle"},
                              {},
                              false},
                             "p");
    expect_clean_exit(p);
    const std::string first = line_of(p.out(), "attrs-first");
    EXPECT_NE(first.find("r=0/0 ctx=same/same type=2 ordinal=0 "), std::string::npos) << p.out();
    EXPECT_NE(first.find("start=ok size=100000 "), std::string::npos) << first;
    const size_t id_at = first.find(" id=");
    ASSERT_NE(id_at, std::string::npos) << first;
    EXPECT_GE(std::stoull(first.substr(id_at + 4)), 1ull << 62) << first;
    EXPECT_NE(p.out().find("refill=ok"), std::string::npos) << p.out();
    EXPECT_NE(p.out().find("data=ok"), std::string::npos) << p.out();
    // One slab for all four blocks, no managed memory.
    const std::string log = dir / "fake.log";
    EXPECT_EQ(count_events(log, p.pid(), "alloc managed"), 0) << read_text(log);
    EXPECT_EQ(count_events(log, p.pid(), "alloc vmm 8388608"), 1) << read_text(log);
}

// Swapped out while another process holds the GPU (and keeps it until the
// query has been answered), the memory is still described at once (no wait
// for the GPU), and as before: same context, same buffer ID.
TEST(PointerAttributes, StayTheSameAcrossASwapAndNeedNoGpu)
{
    TempDir dir;
    Daemon daemon(dir,
                  {"--anti-thrashing", "auto", "--capacity", "128M", "--time-quantum", "10min"});
    const std::string go_on = dir / "go-on";
    Process a = start_client(
        dir, daemon.socket(),
        {{"--alloc", "80M", "--kernels", "1", "--attrs", "--pause-until", go_on, "--rounds", "2"},
         {{"NVSHARE_IDLE_RELEASE_MS", "1"}, {"NVSHARE_DEBUG", "1"}},
         false},
        "a");
    ASSERT_TRUE(wait_until([&] { return a.out().find("attrs-first") != std::string::npos; }));
    const std::string b_go = dir / "b-go";
    Process b = start_client(dir, daemon.socket(),
                             {{"--alloc", "80M", "--kernels", "1", "--pause-until", b_go},
                              {{"NVSHARE_IDLE_RELEASE_MS", "0"}},
                              false},
                             "b");
    ASSERT_TRUE(wait_until([&] {
        return count_events(dir / "fake.log", b.pid(), "cuLaunchKernel") >= 1 &&
               a.err().find("swapped out ") != std::string::npos;
    })) << a.err();
    touch(go_on);
    const bool answered =
        wait_until([&] { return a.out().find("attrs-paused") != std::string::npos; });
    touch(b_go);
    ASSERT_TRUE(answered) << "the query waited for the GPU\n" << a.out() << a.err();
    expect_clean_exit(a);
    expect_clean_exit(b);
    const std::string first = line_of(a.out(), "attrs-first");
    const std::string paused = line_of(a.out(), "attrs-paused");
    const std::string end = line_of(a.out(), "attrs-end");
    EXPECT_NE(first.find("r=0/0 ctx=same/same type=2 ordinal=0 "), std::string::npos) << a.out();
    EXPECT_EQ(answers(paused), answers(first)) << a.out();
    EXPECT_EQ(answers(end), answers(first)) << a.out();
    const auto ms = numbers_after(paused, " ms=");
    ASSERT_EQ(ms.size(), 1u) << paused;
    EXPECT_LT(ms[0], 1000u) << paused;
    EXPECT_NE(a.err().find("swapped in "), std::string::npos) << a.err();
}

// cudaFreeAsync of cudaMalloc memory: the driver takes it (in stream order);
// the swap engine's memory is freed (its chunks unmapped and released).
TEST(StreamOrderedFree, OfCuMemAllocMemoryFreesIt)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto"});
    Process p = start_client(
        dir, daemon.socket(),
        {{"--alloc", "100M", "--allocs", "2", "--kernels", "1", "--free-async"}, {}, false}, "p");
    expect_clean_exit(p);
    EXPECT_NE(p.out().find("free-async=ok"), std::string::npos) << p.out() << p.err();
    const std::string log = read_text(dir / "fake.log");
    EXPECT_EQ(count_events(dir / "fake.log", p.pid(), "alloc vmm 67108864"),
              count_events(dir / "fake.log", p.pid(), "free vmm 67108864"))
        << log;
    EXPECT_GE(count_events(dir / "fake.log", p.pid(), "free vmm 67108864"), 2) << log;
}

// A graph node that names swapped-out memory, made while another process
// holds the GPU: the driver looks the memory up when the node is made (it
// answered CUDA_ERROR_INVALID_VALUE on a swapped-out chunk), so the call
// waits for the GPU as work does; the graph then writes the memory.
TEST(GraphNodes, AMemsetNodeOnSwappedOutMemoryIsMadeOnceTheMemoryIsBack)
{
    TempDir dir;
    Daemon daemon(dir,
                  {"--anti-thrashing", "auto", "--capacity", "128M", "--time-quantum", "10min"});
    const std::string go_on = dir / "go-on";
    Process a = start_client(dir, daemon.socket(),
                             {{"--alloc", "80M", "--kernels", "1", "--pause-until", go_on,
                               "--graph-memset-node", "--rounds", "2"},
                              {{"NVSHARE_IDLE_RELEASE_MS", "1"}, {"NVSHARE_DEBUG", "1"}},
                              false},
                             "a");
    ASSERT_TRUE(
        wait_until([&] { return count_events(dir / "fake.log", a.pid(), "cuLaunchKernel") >= 1; }));
    const std::string b_go = dir / "b-go";
    Process b =
        start_client(dir, daemon.socket(),
                     {{"--alloc", "80M", "--kernels", "1", "--pause-until", b_go}, {}, false}, "b");
    ASSERT_TRUE(wait_until([&] {
        return count_events(dir / "fake.log", b.pid(), "cuLaunchKernel") >= 1 &&
               a.err().find("swapped out ") != std::string::npos;
    })) << a.err();
    touch(go_on);
    expect_clean_exit(a);
    touch(b_go);
    expect_clean_exit(b);
    EXPECT_EQ(line_of(a.out(), "graph-node="), "graph-node=0 graph-run=0 byte=5a") << a.err();
}

// After a fault the process's CUDA is gone: an allocation fails with the
// sticky error, as the driver's cuMemAlloc does, not with "out of memory"
// (the swap engine read every cuMemCreate failure as a full device).
TEST(DriverErrors, AnAllocationAfterAFaultFailsWithTheStickyError)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto"});
    std::string lines[2];
    for (int disabled = 0; disabled < 2; ++disabled) {
        std::map<std::string, std::string> env;
        if (disabled != 0)
            env["NVSHARE_DISABLE"] = "1";
        Process p =
            start_client(dir, daemon.socket(),
                         {{"--alloc", "64M", "--kernels", "1", "--fault-then-alloc"}, env, false},
                         disabled != 0 ? "native" : "p");
        expect_clean_exit(p);
        lines[disabled] = line_of(p.out(), "fault=");
        EXPECT_EQ(p.err().find("out of memory"), std::string::npos) << p.err();
    }
    EXPECT_EQ(lines[1], "fault=700 alloc-after-fault=700");
    EXPECT_EQ(lines[0], lines[1]);
}

// A driver error other than a full device while the swap engine gives an
// allocation device memory is the allocation's answer, as cuMemAlloc would
// give it: not "out of memory", and not success with the memory put
// somewhere else (host memory) as if the device were full. The process
// holds the GPU (the late allocation comes after its first round), so the
// allocation maps its memory itself; the fake fails the call named once
// (fakecuda_fail_next), with CUDA_ERROR_UNKNOWN.
void expect_the_allocation_fails_with_the_error_of(const std::string& call)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto"});
    Process p = start_client(dir, daemon.socket(),
                             {{"--alloc", "64M", "--kernels", "1", "--late-alloc", "64M",
                               "--fail-late-alloc", call + ":999"},
                              {},
                              false},
                             "p");
    expect_clean_exit(p);
    EXPECT_EQ(count_events(dir / "fake.log", p.pid(), "fail " + call + " 999"), 1)
        << read_text(dir / "fake.log");
    EXPECT_EQ(line_of(p.out(), "late="), "late=error:999") << p.out() << p.err();
    EXPECT_EQ(p.err().find("out of memory"), std::string::npos) << p.err();
}

TEST(DriverErrors, AFailedCuMemCreateIsTheAllocationsAnswer)
{
    expect_the_allocation_fails_with_the_error_of("cuMemCreate");
}

TEST(DriverErrors, AFailedCuMemMapIsTheAllocationsAnswer)
{
    expect_the_allocation_fails_with_the_error_of("cuMemMap");
}

TEST(DriverErrors, AFailedCuMemSetAccessIsTheAllocationsAnswer)
{
    expect_the_allocation_fails_with_the_error_of("cuMemSetAccess");
}

// A driver error other than a full device while the client thread places,
// at the grant, memory allocated before the process held the GPU: the
// allocation has nobody left to answer (it waits for its memory to be
// mapped), so the chunk is treated as one that found the device full (it
// waits for the next placement, else host memory), with one line naming
// the error; the program runs on, its data kept.
void expect_a_placement_at_the_grant_survives(const std::string& call)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto"});
    Process p = start_client(
        dir, daemon.socket(),
        {{"--alloc", "64M", "--kernels", "2", "--check-data", "--fail-first-alloc", call + ":999"},
         {},
         false},
        "p");
    expect_clean_exit(p);
    const std::string log = read_text(dir / "fake.log");
    EXPECT_EQ(count_events(dir / "fake.log", p.pid(), "fail " + call + " 999"), 1) << log;
    EXPECT_NE(p.out().find("data=ok"), std::string::npos) << p.out() << p.err();
    EXPECT_NE(p.err().find("(CUDA error 999)"), std::string::npos) << p.err();
}

TEST(DriverErrors, AFailedCuMemCreateAtTheGrantIsSurvived)
{
    expect_a_placement_at_the_grant_survives("cuMemCreate");
}

TEST(DriverErrors, AFailedCuMemMapAtTheGrantIsSurvived)
{
    expect_a_placement_at_the_grant_survives("cuMemMap");
}

// After a fault, cuMemFree of swap-engine memory answers the sticky error,
// as the driver's cuMemFree does (it waits for the context's work, which
// failed), not success: the library synchronises the process's contexts
// before it unmaps, and the caller's context's error is the free's answer.
TEST(DriverErrors, AFreeAfterAFaultReturnsTheStickyError)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto"});
    Process p =
        start_client(dir, daemon.socket(),
                     {{"--alloc", "64M", "--kernels", "1", "--fault-then-free"}, {}, false}, "p");
    expect_clean_exit(p);
    EXPECT_EQ(line_of(p.out(), "fault="), "fault=700 free-after-fault=700") << p.out() << p.err();
    EXPECT_GE(count_events(dir / "fake.log", p.pid(), "alloc vmm"), 1)
        << "not swap-engine memory:\n"
        << read_text(dir / "fake.log");
}

}  // namespace
}  // namespace nvshare::test
