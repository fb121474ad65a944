// The optimized scheduler must decide exactly like the simple one it replaced
// (tests/unit/reference_scheduler.*), which rescans every client on every
// event and is easy to check by reading. Contended notices are compared only
// as "was the holder told", since the optimized one may fold the notice into
// the Grant. The reference knows modes on and off (first come first served,
// one user, one class); auto mode's soft turns, priorities and fairness came
// after it and have their own tests (scheduler_test.cpp, turn_policy_test.cpp)
// and the invariants of SchedulerProperties.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <tuple>

#include "daemon/scheduler.h"
#include "tests/support/sizes.h"
#include "tests/unit/reference_scheduler.h"

namespace {

using namespace std::chrono_literals;
namespace d = nvshare::daemon;
namespace r = nvshare::reference;
using nvshare::test::GiB;

template <typename A>
std::set<std::tuple<int, uint64_t, uint64_t>> decisions(const std::vector<A>& actions)
{
    std::set<std::tuple<int, uint64_t, uint64_t>> out;
    for (const auto& a : actions)
        if (static_cast<int>(a.kind) < 3)  // Grant, Drop, Revoke; not Contended, Unpageable
            out.insert({static_cast<int>(a.kind), a.client, a.gpus});
    return out;
}

TEST(SchedulerModel, DecidesLikeTheReference)
{
    std::mt19937 rng(getenv("MODEL_SEED") ? static_cast<unsigned>(atoi(getenv("MODEL_SEED")))
                                          : 777u);
    for (int round = 0; round < 60; ++round) {
        const auto mode = static_cast<nvshare::proto::Mode>(round % 2);  // on, off
        d::Scheduler fast(d::SchedulerSettings{mode, 5s, 2s});
        r::Scheduler ref(r::SchedulerSettings{mode, 5s, 2s});
        d::TimePoint now{std::chrono::seconds(1)};
        const uint32_t gpus = 1 + round % 4;
        for (uint32_t g = 0; g < gpus; ++g) {
            fast.ensure_gpu({"GPU-" + std::to_string(g), "", 16 * GiB});
            ref.ensure_gpu({"GPU-" + std::to_string(g), "", 16 * GiB});
        }
        std::vector<uint64_t> alive;
        uint64_t next = 1;
        for (int step = 0; step < 1500; ++step) {
            const int what = static_cast<int>(rng() % 10);
            const bool trace = getenv("MODEL_TRACE") != nullptr;
            now += std::chrono::milliseconds(rng() % 1200);
            if (what == 0 || alive.empty()) {
                std::vector<uint32_t> mine;
                for (uint32_t g = 0; g < gpus; ++g)
                    if (rng() % 2)
                        mine.push_back(g);
                if (mine.empty())
                    mine.push_back(static_cast<uint32_t>(rng() % gpus));
                ASSERT_TRUE(fast.connect(next, {}, mine));
                ASSERT_TRUE(ref.connect(next, {}, mine));
                alive.push_back(next++);
                continue;
            }
            const size_t pick = rng() % alive.size();
            const uint64_t id = alive[pick];
            const uint64_t mask = fast.client(id)->registered() & (rng() | 1);
            if (trace)
                fprintf(stderr, "step %d t=%lld what=%d id=%llu mask=%llu\n", step,
                        static_cast<long long>(now.time_since_epoch().count() / 1000000), what,
                        static_cast<unsigned long long>(id), static_cast<unsigned long long>(mask));
            switch (what) {
                case 1:
                case 2:
                case 3:
                    fast.request(id, mask, now);
                    ref.request(id, mask, now);
                    break;
                case 4:
                case 5:
                    fast.release(id, mask, now);
                    ref.release(id, mask, now);
                    break;
                case 6: {
                    const uint32_t g = fast.client(id)->gpus[0];
                    const uint64_t bytes = static_cast<uint64_t>(rng() % 12) * GiB;
                    fast.report_memory(id, g, {bytes, 0}, now);
                    ref.report_memory(id, g, {bytes, 0}, now);
                    break;
                }
                case 7:
                    fast.disconnect(id, now);
                    ref.disconnect(id, now);
                    alive.erase(alive.begin() + static_cast<long>(pick));
                    break;
                case 8:
                    if (rng() % 20 == 0) {
                        const auto m = static_cast<nvshare::proto::Mode>(rng() % 2);
                        fast.set_mode(m, now);
                        ref.set_mode(m, now);
                    } else if (rng() % 10 == 0) {
                        const auto tq = std::chrono::milliseconds(500 + rng() % 8000);
                        fast.set_time_quantum(tq, now);
                        ref.set_time_quantum(tq, now);
                    } else {
                        fast.revoke(id, now);
                        ref.revoke(id, now);
                    }
                    break;
                default:
                    fast.tick(now);
                    ref.tick(now);
            }
            ASSERT_EQ(decisions(fast.take_actions()), decisions(ref.take_actions()))
                << "round " << round << " step " << step;
            ASSERT_EQ(fast.next_deadline(), ref.next_deadline()) << "round " << round;
            for (uint64_t c : alive) {
                const auto* a = fast.client(c);
                const auto* b = ref.client(c);
                ASSERT_EQ(static_cast<int>(a->phase), static_cast<int>(b->phase));
                ASSERT_EQ(a->held, b->held);
                ASSERT_EQ(a->wanted, b->wanted);
                ASSERT_EQ(a->contended_sent, b->contended_sent) << "client " << c;
            }
            for (uint32_t g = 0; g < gpus; ++g) {
                ASSERT_EQ(fast.serializing(g), ref.serializing(g));
                ASSERT_EQ(fast.queue(g), ref.queue(g));
                ASSERT_EQ(fast.requested_memory(g), ref.requested_memory(g));
            }
        }
    }
}

}  // namespace
