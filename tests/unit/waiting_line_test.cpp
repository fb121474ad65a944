// The structures that keep an event's cost from growing with the number of
// clients (issue 46 item 3), each against the plain computation it stands
// for: the counting map against a sorted set, a GPU's line against sorting
// its waiters, and the wait notices against the rule they keep (no waiter is
// left with news it was not told).
#include "daemon/waiting_line.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "daemon/ranked_map.h"
#include "daemon/scheduler.h"
#include "tests/support/sizes.h"

using namespace nvshare::daemon;
using namespace std::chrono_literals;

namespace {

using nvshare::test::GiB;

TEST(RankedMap, CountsLikeASortedSet)
{
    std::mt19937 rng(46);
    RankedMap<uint64_t, int> ranked;
    std::set<uint64_t> plain;
    for (int step = 0; step < 20000; ++step) {
        const uint64_t key = rng() % 500;
        if (rng() % 3 == 0) {
            EXPECT_EQ(ranked.erase(key), plain.erase(key) == 1);
        } else {
            EXPECT_EQ(ranked.insert(key, static_cast<int>(key)), plain.insert(key).second);
        }
        ASSERT_EQ(ranked.size(), plain.size());
        const uint64_t probe = rng() % 520;
        const auto below =
            static_cast<size_t>(std::distance(plain.begin(), plain.lower_bound(probe)));
        ASSERT_EQ(ranked.rank(probe), below);
        ASSERT_EQ(ranked.prefix_while([&](uint64_t k, int) { return k < probe; }), below);
        ASSERT_EQ(ranked.contains(probe), plain.count(probe) == 1);
        if (!plain.empty()) {
            const size_t i = rng() % plain.size();
            const auto [key_at, value_at] = ranked.at(i);
            ASSERT_EQ(key_at, *std::next(plain.begin(), static_cast<long>(i)));
            ASSERT_EQ(value_at, static_cast<int>(key_at));
        }
    }
    std::vector<uint64_t> walked;
    ranked.for_each([&](uint64_t k, int) {
        walked.push_back(k);
        return true;
    });
    EXPECT_EQ(walked, std::vector<uint64_t>(plain.begin(), plain.end()));
}

// The line's order is the scheduler's one order, (rank raised by waiting,
// user's held time, arrival), as a sort of all its waiters gives it. 1,000
// random steps, up to some 300 waiters: every step sorts them all, which
// under the sanitizer pass's unoptimised build took a minute at 3,000.
TEST(WaitingLine, IsInTheOrderASortGives)
{
    std::mt19937 rng(3);
    constexpr Duration kAging = 5s;
    policy::UserShares shares;
    WaitingLine line;
    std::map<ClientId, ClientRecord> waiters;
    TimePoint now{std::chrono::seconds(100)};
    uint64_t sequence = 0;
    for (int step = 0; step < 1000; ++step) {
        now += std::chrono::milliseconds(rng() % 2000);
        if (waiters.empty() || rng() % 3 != 0) {
            ClientRecord c;
            c.id = static_cast<ClientId>(step + 1);
            c.info = ClientInfo{static_cast<int32_t>(c.id), 1000 + static_cast<uint32_t>(rng() % 4),
                                "c"};
            c.info.priority = static_cast<Priority>(1 + rng() % 3);
            c.sequence = ++sequence;
            c.waiting_since = now;
            line.add(c);
            waiters[c.id] = c;
        } else {
            auto it = std::next(waiters.begin(), static_cast<long>(rng() % waiters.size()));
            line.remove(it->second);
            waiters.erase(it);
        }
        // Some user holds for a while now and then.
        const uint32_t user = 1000 + static_cast<uint32_t>(rng() % 4);
        shares.hold_began(user, now - std::chrono::milliseconds(rng() % 3000));
        shares.hold_ended(user, now - std::chrono::milliseconds(rng() % 3000), now);

        const LineOrder order{now, kAging, &shares};
        std::vector<std::pair<std::tuple<int, double, uint64_t>, ClientId>> keyed;
        for (const auto& [id, c] : waiters)
            keyed.push_back({{policy::waiting_rank(c.info.priority, now - c.waiting_since, kAging),
                              shares.held(c.info.principal, now), c.sequence},
                             id});
        std::sort(keyed.begin(), keyed.end());
        std::vector<ClientId> sorted;
        for (const auto& [key, id] : keyed)
            sorted.push_back(id);
        // One (user, class) alone goes first come first, whatever the time.
        std::set<std::pair<uint32_t, int>> buckets;
        for (const auto& [id, c] : waiters)
            buckets.insert({c.info.principal, policy::class_rank(c.info.priority)});
        if (buckets.size() == 1)
            std::sort(sorted.begin(), sorted.end(), [&](ClientId a, ClientId b) {
                return waiters.at(a).sequence < waiters.at(b).sequence;
            });

        ASSERT_EQ(line.size(), waiters.size());
        ASSERT_EQ(line.all(order), sorted) << "step " << step;
        const auto first = line.first(order, 8);
        ASSERT_EQ(first, std::vector<ClientId>(sorted.begin(),
                                               sorted.begin() + std::min<long>(8, sorted.size())));
        ASSERT_EQ(line.head(order), sorted.empty() ? std::nullopt : std::optional(sorted[0]));
        if (!sorted.empty()) {
            ASSERT_EQ(line.goes_next(order, sorted[0]),
                      sorted.size() > 1 ? std::optional(sorted[1]) : std::nullopt);
        }
        for (size_t i = 0; i < sorted.size(); i += 1 + rng() % 5)
            ASSERT_EQ(line.place(order, waiters.at(sorted[i])), i + 1) << "step " << step;
    }
}

// any_of, what the scheduler asks instead of walking the line, calls its
// predicate on the waiters in for_each's order until it holds.
TEST(WaitingLine, AnyOfStopsAtTheFirstMatch)
{
    WaitingLine line;
    for (ClientId id = 1; id <= 30; ++id) {
        ClientRecord c;
        c.id = id;
        c.info = ClientInfo{static_cast<int32_t>(id), 1000 + static_cast<uint32_t>(id % 3), "c"};
        c.info.priority = id % 2 == 0 ? Priority::Batch : Priority::Normal;
        c.sequence = id;
        c.waiting_since = TimePoint{std::chrono::seconds(id)};
        line.add(c);
    }
    std::vector<ClientId> walk;
    line.for_each([&](ClientId id) { walk.push_back(id); });
    ASSERT_EQ(walk.size(), 30u);
    for (size_t i = 0; i < walk.size(); ++i) {
        size_t calls = 0;
        EXPECT_TRUE(line.any_of([&](ClientId id) {
            ++calls;
            return id == walk[i];
        }));
        EXPECT_EQ(calls, i + 1);
    }
    size_t calls = 0;
    EXPECT_FALSE(line.any_of([&](ClientId) {
        ++calls;
        return false;
    }));
    EXPECT_EQ(calls, walk.size());
    EXPECT_FALSE(WaitingLine{}.any_of([](ClientId) { return true; }));
}

// Whether `sent` tells a waiter what it would be told now, by the rule of
// Scheduler::kNamedPlaces: all of it among the first places, and whether it
// is among them; further back a snapshot, whose reason is the GPU's own one
// (`gpu_reason`) as it is now, or Priority.
bool up_to_date(const WaitFacts& sent, const WaitFacts& now, WaitReason gpu_reason)
{
    if (sent.same_news(now))
        return true;
    return now.place > Scheduler::kNamedPlaces && sent.place > Scheduler::kNamedPlaces &&
           (sent.reason == gpu_reason || sent.reason == WaitReason::Priority);
}

// Random events on two GPUs with many clients of three users and every
// class; now and then every GPU's waiters are looked at again (the mode set
// to what it is). Then no waiter is left with news, worked out from the
// whole line: the notices find every one without walking it.
TEST(WaitNotices, LeaveNoWaiterWithNews)
{
    for (const Mode mode : {Mode::On, Mode::Auto}) {
        std::mt19937 rng(mode == Mode::On ? 11 : 12);
        Scheduler s(SchedulerSettings{mode, 5s, 2s});
        for (int g = 0; g < 2; ++g)
            s.ensure_gpu({"GPU-" + std::to_string(g), "", 16 * GiB});
        TimePoint now{std::chrono::seconds(10)};
        std::vector<ClientId> alive;
        ClientId next = 1;
        size_t deep = 0;  // waiters checked beyond the named places
        for (int step = 0; step < 4000; ++step) {
            now += std::chrono::milliseconds(rng() % 4 == 0 ? rng() % 6000 : rng() % 200);
            const auto what = static_cast<unsigned>(rng() % 12);
            if (alive.size() < 150 && (what == 0 || alive.empty())) {
                ClientInfo info{static_cast<int32_t>(next), 1000 + static_cast<uint32_t>(rng() % 3),
                                "c"};
                info.priority = static_cast<Priority>(1 + rng() % 3);
                std::vector<GpuIndex> on{static_cast<GpuIndex>(rng() % 2)};
                if (rng() % 3 == 0)
                    on = {0, 1};
                ASSERT_TRUE(s.connect(next, info, on, now));
                alive.push_back(next++);
            } else if (!alive.empty()) {
                const size_t pick = rng() % alive.size();
                const ClientId id = alive[pick];
                const uint64_t all = s.client(id)->registered();
                if (what <= 6) {
                    s.request(id, all, now);
                } else if (what == 7) {
                    s.release(id, all, now);
                } else if (what == 8) {
                    s.report_memory(id, s.client(id)->gpus[0], {(rng() % 10) * GiB, 0}, now);
                } else if (what == 9 && rng() % 4 == 0) {
                    s.disconnect(id, now);
                    alive.erase(alive.begin() + static_cast<long>(pick));
                } else {
                    s.tick(now);
                }
            }
            s.take_actions();
            if (step % 10 != 9)
                continue;
            s.set_mode(s.settings().mode, now);  // every GPU's waiters are looked at
            s.take_actions();
            for (GpuIndex g = 0; g < 2; ++g) {
                if (s.turns(g) == Turns::Free)
                    continue;
                const std::vector<ClientId> line = s.queue(g);
                std::set<std::pair<uint32_t, int>> buckets;
                const auto rank = [&](ClientId id) {
                    const ClientRecord& c = *s.client(id);
                    return policy::waiting_rank(c.info.priority, now - c.waiting_since,
                                                s.settings().time_quantum);
                };
                for (ClientId id : line)
                    buckets.insert({s.client(id)->info.principal,
                                    policy::class_rank(s.client(id)->info.priority)});
                for (ClientId id : line) {
                    const std::optional<WaitFacts> facts = s.wait_facts(id, g);
                    ASSERT_TRUE(facts.has_value());
                    // Deep in the line no holder is named.
                    WaitFacts due;
                    due.place = facts->place;
                    due.reason = facts->reason;
                    if (due.place <= Scheduler::kNamedPlaces) {
                        due.holder = facts->holder;
                        due.held_since = facts->held_since;
                        due.quantum = facts->quantum;
                    }
                    if (buckets.size() > 1 && rank(line[0]) < rank(id))
                        due.reason = WaitReason::Priority;
                    const auto sent = s.client(id)->wait_sent.find(g);
                    ASSERT_NE(sent, s.client(id)->wait_sent.end()) << "step " << step;
                    const WaitReason gpu_reason = s.mode_of(g) == Mode::On ? WaitReason::ModeOn
                                                  : s.serializing(g) ? WaitReason::Oversubscribed
                                                                     : WaitReason::Turns;
                    ASSERT_TRUE(up_to_date(sent->second, due, gpu_reason))
                        << "step " << step << " client " << id << " told place "
                        << sent->second.place << ", now " << due.place;
                    deep += due.place > Scheduler::kNamedPlaces;
                }
            }
        }
        EXPECT_GT(deep, 2000u) << static_cast<int>(mode);
    }
}

}  // namespace
