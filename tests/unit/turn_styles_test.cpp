// The turn styles on their own: the style from the mode and the memory,
// each GPU in one style, and what an update reports changed.
#include "daemon/turn_styles.h"

#include <gtest/gtest.h>

#include <vector>

using namespace nvshare::daemon;

// Named: the unit tests are built in unity chunks.
namespace turn_styles_test {
namespace {

TEST(TurnStyles, StyleFromModeAndMemory)
{
    EXPECT_EQ(TurnStyles::style(Mode::Off, false), Turns::Free);
    EXPECT_EQ(TurnStyles::style(Mode::Off, true), Turns::Free);
    EXPECT_EQ(TurnStyles::style(Mode::On, false), Turns::Strict);
    EXPECT_EQ(TurnStyles::style(Mode::On, true), Turns::Strict);
    EXPECT_EQ(TurnStyles::style(Mode::Auto, false), Turns::Soft);
    EXPECT_EQ(TurnStyles::style(Mode::Auto, true), Turns::Groups);
}

TEST(TurnStyles, EachGpuInOneStyle)
{
    TurnStyles t;
    std::vector<Turns> styles{Turns::Free, Turns::Soft, Turns::Groups, Turns::Strict, Turns::Soft};
    const auto style_of = [&](GpuIndex g) { return styles[g]; };
    t.update(static_cast<GpuIndex>(styles.size()), style_of);
    for (GpuIndex g = 0; g < styles.size(); ++g)
        EXPECT_EQ(t.of(g), styles[g]) << g;
    EXPECT_EQ(t.of(5), Turns::Free);   // not known
    EXPECT_EQ(t.of(64), Turns::Free);  // not one it can know
    EXPECT_EQ(t.with({Turns::Soft}), gpu_bit(1) | gpu_bit(4));
    EXPECT_EQ(t.serialized(), gpu_bit(2) | gpu_bit(3));
    EXPECT_EQ(t.scheduled(), GpuSet{0b11110});
    EXPECT_FALSE(t.serializing(0));
    EXPECT_FALSE(t.serializing(1));
    EXPECT_TRUE(t.serializing(2));
    EXPECT_TRUE(t.serializing(3));
}

TEST(TurnStyles, AnUpdateSaysWhatChanged)
{
    TurnStyles t;
    std::vector<Turns> styles{Turns::Soft, Turns::Strict, Turns::Free};
    const auto style_of = [&](GpuIndex g) { return styles[g]; };
    auto change = t.update(3, style_of);
    EXPECT_TRUE(change.any);
    EXPECT_EQ(change.became_serialized, gpu_bit(1));
    change = t.update(3, style_of);
    EXPECT_FALSE(change.any);
    EXPECT_EQ(change.became_serialized, 0u);
    // Soft to groups serializes; strict to groups stays serialized.
    styles = {Turns::Groups, Turns::Groups, Turns::Free};
    change = t.update(3, style_of);
    EXPECT_TRUE(change.any);
    EXPECT_EQ(change.became_serialized, gpu_bit(0));
    // A style that changes without serializing still counts.
    styles = {Turns::Groups, Turns::Groups, Turns::Soft};
    change = t.update(3, style_of);
    EXPECT_TRUE(change.any);
    EXPECT_EQ(change.became_serialized, 0u);
    EXPECT_EQ(t.of(2), Turns::Soft);
}

}  // namespace
}  // namespace turn_styles_test
