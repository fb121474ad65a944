// Subordinate uids charged to their owner (daemon/principals.h).
#include "daemon/principals.h"

#include <gtest/gtest.h>

namespace nvshare::daemon {
namespace {

std::optional<uid_t> users(const std::string& name)
{
    if (name == "alice")
        return 1000;
    if (name == "bob")
        return 1001;
    return std::nullopt;
}

TEST(Principals, ASubordinateUidIsItsOwners)
{
    std::vector<std::string> problems;
    const auto p = Principals::parse("alice:100000:65536\nbob:165536:65536\n1002:231072:10\n",
                                     users, &problems);
    EXPECT_TRUE(problems.empty());
    EXPECT_EQ(p.ranges(), 3u);
    EXPECT_EQ(p.of(100000), 1000u);
    EXPECT_EQ(p.of(165535), 1000u);
    EXPECT_EQ(p.of(165536), 1001u);
    EXPECT_EQ(p.of(231071), 1001u);
    EXPECT_EQ(p.of(231072), 1002u);
    EXPECT_EQ(p.of(231081), 1002u);
    // Anyone else is their own.
    EXPECT_EQ(p.of(231082), 231082u);
    EXPECT_EQ(p.of(99999), 99999u);
    EXPECT_EQ(p.of(1000), 1000u);
    EXPECT_EQ(p.of(0), 0u);
}

TEST(Principals, RootsRangesStayApart)
{
    const auto p = Principals::parse("root:100000:65536\n0:200000:10\n", users, nullptr);
    EXPECT_EQ(p.ranges(), 0u);
    EXPECT_EQ(p.of(100000), 100000u);
    EXPECT_EQ(p.of(200000), 200000u);
}

TEST(Principals, EntriesItCannotUseAreLeftOutAndSaidWhy)
{
    std::vector<std::string> problems;
    const auto p = Principals::parse(
        "# comment\n"
        "\n"
        "carol:300000:10\n"       // no such user
        "alice:100000\n"          // no count
        "alice:x:10\n"            // not a number
        "alice:400000:0\n"        // empty range
        "alice:4294967290:100\n"  // past the last uid
        "alice:500000:100:7\n"    // a field too many
        "bob:600000:100\n"        // kept
        "alice:600050:100\n",     // overlaps bob's
        users, &problems);
    EXPECT_EQ(p.ranges(), 1u);
    EXPECT_EQ(p.of(600000), 1001u);
    EXPECT_EQ(p.of(600120), 600120u);
    ASSERT_EQ(problems.size(), 7u);
    EXPECT_EQ(problems[0], "line 3: no user carol");
    EXPECT_NE(problems[6].find("overlaps"), std::string::npos);
}

}  // namespace
}  // namespace nvshare::daemon
