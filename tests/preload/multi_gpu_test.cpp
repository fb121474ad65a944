// End-to-end, a process on two GPUs (two fake devices): work on one GPU that
// reaches the process's memory of the other through peer access.
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

const std::map<std::string, std::string> kTwoGpus{{"FAKECUDA_DEVICES", "2"},
                                                  {"NVSHARE_DEBUG", "1"}};

// A kernel on GPU 1 touches cuMemAlloc memory of GPU 0 (swappable) once GPU
// 1 has peer access to GPU 0, as natively: the library grants GPU 1 access
// to the memory's chunks when the program enables peer access.
TEST(PeerAccess, AKernelOnAnotherGpuReachesSwappableMemory)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto"});
    Process p = start_client(
        dir, daemon.socket(),
        {{"--alloc", "48M", "--allocs", "2", "--kernels", "1", "--rounds", "2", "--peer-kernel"},
         kTwoGpus,
         false},
        "p");
    expect_clean_exit(p);
    EXPECT_NE(p.out().find("peer=ok rounds=2"), std::string::npos) << p.out() << p.err();
    EXPECT_EQ(count_events(dir / "fake.log", p.pid(), "fault"), 0) << read_text(dir / "fake.log");
}

// Disabling peer access takes it away again, as natively: the next kernel
// of GPU 1 on that memory is an illegal address.
TEST(PeerAccess, DisablingItTakesTheAccessAway)
{
    TempDir dir;
    Daemon daemon(dir, {"--anti-thrashing", "auto"});
    Process p = start_client(
        dir, daemon.socket(),
        {{"--alloc", "64M", "--kernels", "1", "--rounds", "2", "--peer-kernel", "--peer-disable"},
         kTwoGpus,
         false},
        "p");
    expect_clean_exit(p);
    EXPECT_NE(p.out().find("peer=error:700 rounds=1"), std::string::npos) << p.out() << p.err();
}

// The memory is swapped out while another process uses GPU 0 and comes back
// at new device memory: GPU 1 still reaches it (access is granted at every
// mapping, not only at the enable).
TEST(PeerAccess, SurvivesASwapOutAndBack)
{
    TempDir dir;
    Daemon daemon(dir,
                  {"--anti-thrashing", "auto", "--capacity", "128M", "--time-quantum", "10min"});
    const std::string go_on = dir / "go-on";
    std::map<std::string, std::string> env = kTwoGpus;
    env["NVSHARE_IDLE_RELEASE_MS"] = "1";
    Process a = start_client(dir, daemon.socket(),
                             {{"--alloc", "80M", "--kernels", "1", "--rounds", "2", "--peer-kernel",
                               "--pause-until", go_on},
                              env,
                              false},
                             "a");
    ASSERT_TRUE(wait_until([&] { return a.out().find("alloc=ok") != std::string::npos; }));
    ASSERT_TRUE(
        wait_until([&] { return count_events(dir / "fake.log", a.pid(), "peer-access") >= 1; }));
    Process b = start_client(
        dir, daemon.socket(),
        {{"--alloc", "80M", "--kernels", "2"}, {{"FAKECUDA_DEVICES", "2"}}, false}, "b");
    expect_clean_exit(b);
    touch(go_on);
    expect_clean_exit(a);
    EXPECT_NE(a.err().find("swapped out "), std::string::npos) << a.err();
    EXPECT_NE(a.err().find("swapped in "), std::string::npos) << a.err();
    EXPECT_NE(a.out().find("peer=ok rounds=2"), std::string::npos) << a.out() << a.err();
    EXPECT_EQ(count_events(dir / "fake.log", a.pid(), "fault"), 0) << read_text(dir / "fake.log");
}

}  // namespace
}  // namespace nvshare::test
