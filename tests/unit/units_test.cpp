#include "common/units.h"

#include <gtest/gtest.h>

using namespace nvshare;
using std::chrono::microseconds;

TEST(Units, ParsesDurations)
{
    EXPECT_EQ(parse_duration("30s"), microseconds(30000000));
    EXPECT_EQ(parse_duration("500ms"), microseconds(500000));
    EXPECT_EQ(parse_duration("2min"), microseconds(120000000));
    EXPECT_EQ(parse_duration("1.5"), microseconds(1500000));
    EXPECT_EQ(parse_duration("45"), microseconds(45000000));
    EXPECT_EQ(parse_duration("250us"), microseconds(250));
    EXPECT_EQ(parse_duration("1h"), microseconds(3600000000LL));
}

TEST(Units, RejectsBadDurations)
{
    for (const char* bad : {"", "s", "-1s", "3 parsecs", "1..5s", "abc", "1e3s", "5 s s"})
        EXPECT_FALSE(parse_duration(bad)) << bad;
}

// Callers convert to nanoseconds: what does not fit there is refused here.
TEST(Units, RejectsDurationsTooLongForNanoseconds)
{
    EXPECT_EQ(parse_duration("9000000000"), microseconds(9000000000000000));
    EXPECT_FALSE(parse_duration("9223372037"));  // just over INT64_MAX ns
    EXPECT_FALSE(parse_duration("18446744074"));
    EXPECT_FALSE(parse_duration("1000000000000h"));
}

TEST(Units, ParsesSizes)
{
    EXPECT_EQ(parse_size("16G"), 16ull << 30);
    EXPECT_EQ(parse_size("512MiB"), 512ull << 20);
    EXPECT_EQ(parse_size("1GB"), 1000000000ull);
    EXPECT_EQ(parse_size("4096"), 4096ull);
    EXPECT_EQ(parse_size("1.5K"), 1536ull);
    EXPECT_FALSE(parse_size("12Q"));
    EXPECT_FALSE(parse_size("-5G"));
    EXPECT_FALSE(parse_size("99999999999T"));
    // Up to 2^64 - 1, exactly: not stopped at 2^63.
    EXPECT_EQ(parse_size("10000000000000000000"), 10000000000000000000ull);
    EXPECT_EQ(parse_size("16777215T"), uint64_t{16777215} << 40);
    EXPECT_FALSE(parse_size("16777216T"));  // 2^64
}

TEST(Units, FormatsForHumans)
{
    EXPECT_EQ(format_duration(microseconds(30000000)), "30s");
    EXPECT_EQ(format_duration(microseconds(120000000)), "2min");
    EXPECT_EQ(format_duration(microseconds(500000)), "500ms");
    EXPECT_EQ(format_duration(microseconds(1500000)), "1.5s");
    EXPECT_EQ(format_size(512), "512 B");
    EXPECT_EQ(format_size(16ull << 30), "16.0 GiB");
}
