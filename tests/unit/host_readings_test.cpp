// What a round of the host's readings changes, on clients and GPUs the test
// makes: the confirmations that moved and what to read from now on.
#include "daemon/host_readings.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "tests/support/sizes.h"

using namespace nvshare::daemon;

namespace {

using nvshare::test::GiB;
using Changes = ReadingChanges;

class HostReadingsTest : public ::testing::Test {
protected:
    HostReadingsTest()
    {
        for (const char* uuid : {"GPU-a", "GPU-b"}) {
            Gpu g;
            g.description.uuid = uuid;
            gpus_.push_back(g);
        }
    }
    // A client of `uid` with process `pid` using `use` on GPU 0.
    ClientRecord& add(ClientId id, uint32_t uid, int32_t pid, MemoryUse use)
    {
        ClientRecord& c = clients_[id];
        c.id = id;
        c.info = ClientInfo(pid, uid, "app");
        c.gpus = {0};
        c.memory[0] = use;
        return c;
    }
    Changes changes() const { return reading_changes(clients_, gpus_, readings_); }

    std::vector<Gpu> gpus_;
    std::map<ClientId, ClientRecord> clients_;
    HostReadings readings_;
};

TEST_F(HostReadingsTest, RootIsConfirmedWholeAndSkipped)
{
    add(1, 0, 100, {GiB, GiB});
    readings_.gpus["GPU-a"] = HostReadings::Counts{};  // lists nobody
    readings_.host[100] = GiB;
    const Changes c = changes();
    EXPECT_TRUE(c.gpus.empty());
    EXPECT_TRUE(c.host.empty());
    EXPECT_FALSE(c.confirmations_changed());
    EXPECT_EQ(c.watch, WatchSet{});
}

TEST_F(HostReadingsTest, APidNvmlDoesNotListConfirmsZero)
{
    add(1, 1000, 100, {0, GiB});
    add(2, 1000, 200, {0, GiB});
    readings_.gpus["GPU-a"] = HostReadings::Counts{{200, GiB / 2}};
    const Changes c = changes();
    EXPECT_EQ(c.gpus, (std::vector<Changes::Confirm>{{1, 0, 0}, {2, 0, GiB / 2}}));
    EXPECT_TRUE(c.confirmations_changed());
}

TEST_F(HostReadingsTest, AGpuNvmlCannotCountConfirmsNothing)
{
    ClientRecord& r = add(1, 1000, 100, {0, GiB});
    r.host_confirms[0] = GiB;
    readings_.gpus["GPU-a"] = std::nullopt;
    readings_.gpus["GPU-b"] = HostReadings::Counts{};
    const Changes c = changes();
    EXPECT_EQ(c.gpus, (std::vector<Changes::Confirm>{{1, 0, std::nullopt}}));
    // Each GPU read says whether the host counts its processes.
    EXPECT_EQ(c.counts_processes, (std::vector<std::pair<GpuIndex, bool>>{{0, false}, {1, true}}));
}

TEST_F(HostReadingsTest, NoChangeIsNothing)
{
    ClientRecord& r = add(1, 1000, 100, {GiB, GiB});
    r.host_confirms[0] = GiB;
    r.host_resident = 2 * GiB;
    readings_.gpus["GPU-a"] = HostReadings::Counts{{100, GiB}};
    readings_.host[100] = 2 * GiB;
    const Changes c = changes();
    EXPECT_TRUE(c.gpus.empty());
    EXPECT_TRUE(c.host.empty());
    EXPECT_FALSE(c.confirmations_changed());
}

TEST_F(HostReadingsTest, HostMemoryThatMovedIsConfirmed)
{
    ClientRecord& r = add(1, 1000, 100, {GiB, 0});
    r.host_resident = GiB;
    add(2, 1000, 200, {GiB, 0});
    readings_.host[100] = std::nullopt;  // can no longer say
    readings_.host[200] = 3 * GiB;
    const Changes c = changes();
    EXPECT_EQ(c.host, (std::vector<Changes::HostConfirm>{{1, std::nullopt}, {2, 3 * GiB}}));
    EXPECT_TRUE(c.gpus.empty());  // no GPU read
}

TEST_F(HostReadingsTest, WatchesOnlyClaimsNeedingConfirmation)
{
    add(1, 1000, 100, {0, GiB});                           // pinned: watched
    add(2, 1000, 200, {GiB, 0});                           // managed: watched
    add(3, 1000, 300, {0, 0});                             // nothing claimed
    add(4, 0, 400, {GiB, GiB});                            // root
    add(5, 1000, 500, {0, GiB}).memory = {{1, {0, GiB}}};  // on GPU b
    const Changes c = changes();
    EXPECT_EQ(c.watch, (WatchSet{{"GPU-a", "GPU-b"}, {100, 200, 500}}));
}

TEST(WatchSetTest, AddSaysWhetherItChanged)
{
    WatchSet w;
    EXPECT_TRUE(w.add("GPU-a", 1));
    EXPECT_FALSE(w.add("GPU-a", 1));
    EXPECT_TRUE(w.add("GPU-b", 1));
    EXPECT_TRUE(w.add("GPU-b", 2));
    EXPECT_EQ(w, (WatchSet{{"GPU-a", "GPU-b"}, {1, 2}}));
}

TEST(NeedsConfirmingTest, AnyClaimOfAUserOtherThanRoot)
{
    EXPECT_TRUE(needs_confirming(ClientInfo(1, 1000, "app"), {0, 1}));
    EXPECT_TRUE(needs_confirming(ClientInfo(1, 1000, "app"), {1, 0}));
    EXPECT_FALSE(needs_confirming(ClientInfo(1, 1000, "app"), {0, 0}));
    EXPECT_FALSE(needs_confirming(ClientInfo(1, 0, "app"), {1, 1}));
}

}  // namespace
