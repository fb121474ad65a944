// A client process's resident anonymous memory, as the host confirms it.
#include "daemon/process_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <vector>

namespace nvshare::daemon {
namespace {

TEST(ProcessMemory, RssAnonLineInBytes)
{
    EXPECT_EQ(rss_anon_of("Name:\tpython3\nVmRSS:\t  900000 kB\nRssAnon:\t  524288 kB\n"
                          "RssFile:\t  375712 kB\n"),
              uint64_t{512} << 20);
    EXPECT_EQ(rss_anon_of("Name:\tx\nRssAnon:\t0 kB\n"), 0u);
    EXPECT_FALSE(rss_anon_of("Name:\tx\nVmRSS:\t100 kB\n"));  // a kernel thread has none
    EXPECT_FALSE(rss_anon_of("Name:\tx\nRssAnon:\t kB\n"));
    EXPECT_FALSE(rss_anon_of("Name:\tx\nRssAnon:\t99999999999999999999 kB\n"));
}

TEST(ProcessMemory, ThisProcessesMemoryGrowsWithWhatItTouches)
{
    const auto before = process_anon_memory(getpid());
    ASSERT_TRUE(before);
    std::vector<char> block(size_t{64} << 20, 1);
    const auto after = process_anon_memory(getpid());
    ASSERT_TRUE(after);
    EXPECT_GE(*after, *before + (uint64_t{60} << 20));
    EXPECT_FALSE(process_anon_memory(-1));
}

}  // namespace
}  // namespace nvshare::daemon
