// The maker thread's bookkeeping (preload/swap/wish_ledger.h): which wish it
// works on, when a wish is finished and when the client thread is told.
#include "preload/swap/wish_ledger.h"

#include <gtest/gtest.h>

namespace {

using nvshare::preload::maker::Wish;
using nvshare::preload::maker::WishLedger;
using nvshare::preload::swappable::MakeOrder;

Wish on_gpu0(uint64_t keep, MakeOrder order = MakeOrder::LeavingFirst)
{
    Wish w;
    w.gpus = 1;
    w.keep[0] = keep;
    w.order = order;
    return w;
}

TEST(WishLedger, AWishIsMadeUntilFinishedAndThatIsSaidOnce)
{
    WishLedger l;
    uint64_t asked = 0;
    Wish w;
    EXPECT_FALSE(l.pending(&asked, &w));
    EXPECT_TRUE(l.want(on_gpu0(100), true));
    ASSERT_TRUE(l.pending(&asked, &w));
    EXPECT_EQ(w, on_gpu0(100));
    EXPECT_TRUE(l.want(on_gpu0(100), true));  // still at it: the same number
    uint64_t again = 0;
    ASSERT_TRUE(l.pending(&again, &w));
    EXPECT_EQ(again, asked);
    EXPECT_TRUE(l.finished(asked));
    EXPECT_FALSE(l.pending(&again, &w));
    EXPECT_FALSE(l.want(on_gpu0(100), true));  // finished: said once
    // Asked again after that, it looks again: memory may have changed.
    EXPECT_TRUE(l.want(on_gpu0(100), true));
    ASSERT_TRUE(l.pending(&again, &w));
    EXPECT_GT(again, asked);
}

TEST(WishLedger, ANewWishReplacesTheOneInHand)
{
    WishLedger l;
    uint64_t first = 0, second = 0;
    Wish w;
    l.want(on_gpu0(100), true);
    ASSERT_TRUE(l.pending(&first, &w));
    EXPECT_TRUE(l.want(on_gpu0(50), true));  // what stays changed
    EXPECT_FALSE(l.current(first));          // the maker ends the old one's steps
    ASSERT_TRUE(l.pending(&second, &w));
    EXPECT_EQ(w, on_gpu0(50));
    EXPECT_FALSE(l.finished(first));  // too late: nobody is told of it
    EXPECT_TRUE(l.want(on_gpu0(50), true));
    EXPECT_TRUE(l.want(on_gpu0(50, MakeOrder::CopiedFirst), true));  // the order counts too
}

TEST(WishLedger, AWishForNothingStopsTheMaker)
{
    WishLedger l;
    uint64_t asked = 0;
    Wish w;
    l.want(on_gpu0(100), true);
    ASSERT_TRUE(l.pending(&asked, &w));
    EXPECT_FALSE(l.want(Wish{}, true));
    EXPECT_FALSE(l.current(asked));
    EXPECT_FALSE(l.pending(&asked, &w));
    EXPECT_FALSE(l.want(Wish{}, true));  // again: nothing changes
    EXPECT_FALSE(l.pending(&asked, &w));
    // The same wish as before the stop is a new one.
    EXPECT_TRUE(l.want(on_gpu0(100), true));
    EXPECT_TRUE(l.pending(&asked, &w));
}

TEST(WishLedger, WithoutAMakerAWishIsFinishedAtOnce)
{
    WishLedger l;
    uint64_t asked = 0;
    Wish w;
    EXPECT_FALSE(l.want(on_gpu0(100), false));
    EXPECT_FALSE(l.pending(&asked, &w));
    EXPECT_FALSE(l.want(on_gpu0(100), false));  // asked again: still nothing to wait for
    EXPECT_FALSE(l.pending(&asked, &w));
}

}  // namespace
