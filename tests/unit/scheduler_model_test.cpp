// The optimized scheduler must decide exactly like the simple one it replaced
// (tests/unit/reference_scheduler.*), which rescans every client on every
// event and is easy to check by reading. Contended notices are compared only
// as "was the holder told", since the optimized one may fold the notice into
// the Grant. The reference knows modes on and off (first come first served,
// one user, one class). Auto mode's soft turns, groups, priorities and
// fairness came after it: the scheduler must stay within the auto-mode model
// (reference::AutoModel), which decides each GPU's turn style and what the
// scheduler must and may do, and starve nobody (SchedulerModel.Auto*).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
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

// ---- auto mode against the model --------------------------------------------

static_assert(r::kStartWindow == d::policy::kStartupWindow);
static_assert(r::kShrinkWindow == d::Room::kGrowthRound);

d::Turns daemon_turns(r::Turns t)
{
    switch (t) {
        case r::Turns::Free:
            return d::Turns::Free;
        case r::Turns::Soft:
            return d::Turns::Soft;
        case r::Turns::Groups:
            return d::Turns::Groups;
        case r::Turns::Strict:
            return d::Turns::Strict;
    }
    return d::Turns::Strict;
}

std::string ms_at(std::optional<d::TimePoint> t)
{
    if (!t)
        return "-";
    return std::to_string(
               std::chrono::duration_cast<std::chrono::milliseconds>(t->time_since_epoch())
                   .count()) +
           " ms";
}

// One random run in auto mode: the scheduler and the model are told the same
// events, the model is told the scheduler's actions, and after every event
// the two must agree on each GPU's turn style, who holds and who waits for
// what, and the model's invariants must hold. Time passes as in the daemon's
// loop: every deadline the scheduler names is ticked when it comes, so that
// a bound the model states is one the scheduler had the chance to keep.
// Clients let go of what they hold when asked to (most of them, within the
// grace period; the others are revoked).
class AutoRun {
public:
    struct Shape {
        uint32_t gpus = 1;
        bool users = false;    // three users (root among them), else one
        bool classes = false;  // every class, else normal only
    };
    AutoRun(unsigned seed, Shape shape)
        : shape_(shape),
          rng_(seed),
          s_(d::SchedulerSettings{d::Mode::Auto, kQuantum, kGrace}),
          m_(d::Mode::Auto, kQuantum, kGrace)
    {
        for (uint32_t g = 0; g < shape_.gpus; ++g) {
            s_.ensure_gpu({"GPU-" + std::to_string(g), "", 16 * GiB});
            m_.add_gpu(16 * GiB);
        }
    }

    static constexpr d::Duration kQuantum = 5s;
    static constexpr d::Duration kGrace = 2s;

    // One random event, after some time has passed.
    ::testing::AssertionResult step()
    {
        if (auto r = pass(std::chrono::milliseconds(rng_() % 1500)); !r)
            return r;
        const int what = static_cast<int>(rng_() % 18);
        if (what == 0 || alive_.empty()) {
            if (alive_.size() >= 8)
                return ::testing::AssertionSuccess();
            return connect();
        }
        const d::ClientId id = alive_[rng_() % alive_.size()];
        const d::ClientRecord& c = *s_.client(id);
        const uint64_t some = c.registered() & (rng_() | 1);
        switch (what) {
            case 1:
            case 2:
            case 3:
            case 4:
                return event("request " + who(id) + " " + std::to_string(some), [&] {
                    s_.request(id, some, now_);
                    m_.request(id, some);
                });
            case 5:
            case 6: {
                const uint64_t mask = rng_() % 2 ? c.registered() : some;
                return event("release " + who(id) + " " + std::to_string(mask), [&] {
                    s_.release(id, mask, now_);
                    m_.release(id, mask);
                });
            }
            case 7:
            case 8:
            case 9:
            case 10: {
                const d::GpuIndex g = c.gpus[rng_() % c.gpus.size()];
                d::MemoryUse use{(rng_() % 13) * GiB, 0};
                if (c.info.uid == 0 && rng_() % 2)
                    use.pinned = (rng_() % 3) * GiB;  // root's counts for others at once
                return event("memory " + who(id) + " gpu " + std::to_string(g) + " " +
                                 std::to_string(use.managed / GiB) + "+" +
                                 std::to_string(use.pinned / GiB) + " GiB",
                             [&] {
                                 s_.report_memory(id, g, use, now_);
                                 m_.report_memory(id, g, {use.managed, use.pinned});
                             });
            }
            case 11:
                std::erase(alive_, id);
                return event("disconnect " + who(id), [&] {
                    s_.disconnect(id, now_);
                    m_.disconnect(id);
                });
            case 12:
                if (rng_() % 4 != 0)
                    break;
                return event("revoke " + who(id), [&] {
                    s_.revoke(id, now_);
                    m_.revoke(id);
                });
            case 13:
                if (rng_() % 4 != 0)
                    break;
                {
                    const auto g = static_cast<d::GpuIndex>(rng_() % shape_.gpus);
                    const uint64_t bytes = (8 + 8 * (rng_() % 3)) * GiB;
                    return event("capacity gpu " + std::to_string(g) + " " +
                                     std::to_string(bytes / GiB) + " GiB",
                                 [&] {
                                     s_.set_capacity(g, bytes, now_);
                                     m_.set_capacity(g, bytes);
                                 });
                }
            case 14:
                if (rng_() % 8 != 0)
                    break;
                {
                    // Mostly back to auto; off and on for a while.
                    const auto mode = rng_() % 2 ? d::Mode::Auto : static_cast<d::Mode>(rng_() % 3);
                    return event("mode " + std::to_string(static_cast<int>(mode)), [&] {
                        s_.set_mode(mode, now_);
                        m_.set_mode(mode);
                    });
                }
            case 15:
                if (rng_() % 8 != 0)
                    break;
                {
                    const d::Duration tq = std::chrono::milliseconds(1000 + rng_() % 9000);
                    return event("quantum " + std::to_string(tq.count() / 1000000) + " ms", [&] {
                        s_.set_time_quantum(tq, now_);
                        m_.set_quantum(tq);
                    });
                }
            default:
                break;
        }
        return pass(std::chrono::milliseconds(rng_() % 3000));
    }

    // Nobody asks for anything more, and every holder asked to let go does:
    // every waiter must be granted within `most` of the times something
    // happens by itself (a deadline, a release as asked). `took`: how many.
    ::testing::AssertionResult drain(size_t most, size_t* took)
    {
        draining_ = true;
        size_t times = 0;
        while (m_.waiting() != 0) {
            const auto next = next_time();
            if (!next)
                return fail("nobody is granted: clients wait and no deadline comes");
            if (++times > most)
                return fail(std::to_string(m_.waiting()) + " still wait after " +
                            std::to_string(most) + " deadlines and releases");
            if (auto r = pass(*next - now_); !r)
                return r;
        }
        draining_ = false;
        *took = times;
        return ::testing::AssertionSuccess();
    }

    const std::map<d::Turns, size_t>& styles_seen() const { return styles_; }
    // Grants that joined other holders, by the GPU's style.
    const std::map<d::Turns, size_t>& joins() const { return joins_; }

private:
    std::string who(d::ClientId id) const { return "client " + std::to_string(id); }

    ::testing::AssertionResult connect()
    {
        std::vector<d::GpuIndex> mine;
        for (d::GpuIndex g = 0; g < shape_.gpus; ++g)
            if (rng_() % 2)
                mine.push_back(g);
        if (mine.empty())
            mine.push_back(static_cast<d::GpuIndex>(rng_() % shape_.gpus));
        const uint32_t uid =
            shape_.users ? std::array<uint32_t, 3>{0, 1000, 1001}[rng_() % 3] : 1000;
        d::ClientInfo info{static_cast<int32_t>(next_), uid, "c"};
        info.priority = shape_.classes ? static_cast<nvshare::proto::Priority>(1 + rng_() % 3)
                                       : nvshare::proto::Priority::Normal;
        const d::ClientId id = next_++;
        alive_.push_back(id);
        std::string gpus;
        for (d::GpuIndex g : mine)
            gpus += " " + std::to_string(g);
        return event("connect " + who(id) + " uid " + std::to_string(uid) + " class " +
                         std::to_string(static_cast<int>(info.priority)) + " gpus" + gpus,
                     [&] {
                         EXPECT_TRUE(s_.connect(id, info, mine, now_));
                         m_.connect(id, uid, info.priority, mine);
                     });
    }

    // The next time something happens by itself: a deadline, or a client
    // letting go as it was asked.
    std::optional<d::TimePoint> next_time() const
    {
        std::optional<d::TimePoint> next = s_.next_deadline();
        if (!letting_go_.empty())
            next = std::min(next.value_or(d::TimePoint::max()), letting_go_.begin()->first);
        return next;
    }

    // Time passes by `d`, with what happens by itself on the way.
    ::testing::AssertionResult pass(d::Duration d)
    {
        const d::TimePoint until = now_ + d;
        for (auto next = next_time(); next && *next <= until; next = next_time()) {
            now_ = std::max(now_, *next);
            ::testing::AssertionResult r = ::testing::AssertionSuccess();
            if (!letting_go_.empty() && letting_go_.begin()->first <= now_) {
                const d::ClientId id = letting_go_.begin()->second;
                letting_go_.erase(letting_go_.begin());
                const d::ClientRecord* c = s_.client(id);
                if (c == nullptr || c->phase != d::Phase::Holding)
                    continue;
                const uint64_t held = c->held;
                r = event("release " + who(id) + " " + std::to_string(held) + " as asked", [&] {
                    s_.release(id, held, now_);
                    m_.release(id, held);
                });
            } else {
                r = event("tick", [&] { s_.tick(now_); });
            }
            if (!r)
                return r;
        }
        now_ = until;
        return ::testing::AssertionSuccess();
    }

    // Applies an event to both, then hands the scheduler's actions to the
    // model and compares.
    template <typename F>
    ::testing::AssertionResult event(std::string what, F&& apply)
    {
        log_.push_back(ms_at(now_) + ": " + what);
        if (log_.size() > 40)
            log_.pop_front();
        if (trace_)
            fprintf(stderr, "%s\n", log_.back().c_str());
        m_.time(now_);
        apply();
        for (const d::Action& a : s_.take_actions()) {
            if (trace_ && a.kind != d::ActionKind::Waiting)
                fprintf(stderr, "    action %d client %llu gpus %llu\n", static_cast<int>(a.kind),
                        static_cast<unsigned long long>(a.client),
                        static_cast<unsigned long long>(a.gpus));
            using K = d::ActionKind;
            using Did = r::AutoModel::Did;
            switch (a.kind) {
                case K::Grant:
                    m_.observe(Did::Grant, a.client, a.gpus);
                    d::for_each_gpu(a.gpus, [&](d::GpuIndex g) {
                        if (s_.gpus()[g].holders.size() > 1)
                            joins_[s_.turns(g)]++;
                    });
                    break;
                case K::Drop:
                    m_.observe(Did::Drop, a.client, a.gpus);
                    // Most let go within the grace period, the others are revoked.
                    if (draining_ || rng_() % 4 != 0)
                        letting_go_.insert(
                            {now_ + std::chrono::milliseconds(rng_() % 1500), a.client});
                    break;
                case K::Revoke:
                    m_.observe(Did::Revoke, a.client, a.gpus);
                    break;
                case K::Shrink:
                    m_.observe(Did::Shrink, a.client, a.gpus);
                    break;
                default:
                    break;
            }
        }
        return compare();
    }

    ::testing::AssertionResult compare()
    {
        for (const std::string& f : m_.check())
            return fail("the model: " + f);
        for (d::GpuIndex g = 0; g < shape_.gpus; ++g) {
            styles_[s_.turns(g)]++;
            if (s_.turns(g) != daemon_turns(m_.turns(g)))
                return fail("GPU " + std::to_string(g) + " is taken in style " +
                            std::to_string(static_cast<int>(s_.turns(g))) + ", the model says " +
                            std::to_string(static_cast<int>(m_.turns(g))));
            if (s_.requested_memory(g) != m_.requested(g))
                return fail("GPU " + std::to_string(g) + "'s memory differs from the model's");
            const auto& h = s_.gpus()[g].holders;
            if (std::set<d::ClientId>(h.begin(), h.end()) != m_.holders(g))
                return fail("GPU " + std::to_string(g) + "'s holders differ from the model's");
        }
        if (s_.clients().size() != m_.members().size())
            return fail("the clients differ from the model's");
        for (const auto& [id, m] : m_.members()) {
            const d::ClientRecord* c = s_.client(id);
            if (c == nullptr || static_cast<int>(c->phase) != static_cast<int>(m.phase) ||
                c->held != m.held || c->wanted != m.wanted)
                return fail(who(id) + " holds or waits for other GPUs than the model says");
        }
        // The daemon sleeps until the next deadline: one in the past would
        // wake it at once, again and again.
        if (const auto next = s_.next_deadline(); next && *next <= now_)
            return fail("the next deadline is not in the future");
        return ::testing::AssertionSuccess();
    }

    ::testing::AssertionResult fail(const std::string& what) const
    {
        std::ostringstream o;
        o << what << "\nthe last events:\n";
        for (const std::string& e : log_)
            o << "  " << e << "\n";
        for (d::GpuIndex g = 0; g < shape_.gpus; ++g) {
            o << "GPU " << g << ": style " << static_cast<int>(s_.turns(g)) << ", capacity "
              << s_.gpus()[g].capacity / GiB << " GiB, line";
            for (d::ClientId id : s_.queue(g))
                o << " " << id;
            o << "\n";
        }
        for (const auto& [id, c] : s_.clients()) {
            o << "client " << id << ": uid " << c.info.uid << " class "
              << static_cast<int>(c.info.priority) << " phase " << static_cast<int>(c.phase)
              << " wants " << c.wanted << " holds " << c.held << (c.drop_sent ? " asked" : "")
              << " since " << ms_at(c.phase == d::Phase::Holding ? c.granted_at : c.waiting_since)
              << ", first grant " << ms_at(c.first_granted_at) << ", grew " << ms_at(c.grew_at)
              << ", deadline " << ms_at(s_.deadline_of(id)) << ", burst "
              << std::chrono::duration_cast<std::chrono::milliseconds>(c.burst).count()
              << " ms, memory";
            for (const auto& [g, m] : c.memory)
                o << " " << g << ":" << m.managed / GiB << "+" << m.pinned / GiB;
            o << "\n";
        }
        return ::testing::AssertionFailure() << o.str();
    }

    Shape shape_;
    std::mt19937 rng_;
    d::Scheduler s_;
    r::AutoModel m_;
    d::TimePoint now_{std::chrono::seconds(1)};
    std::vector<d::ClientId> alive_;
    d::ClientId next_ = 1;
    std::multimap<d::TimePoint, d::ClientId> letting_go_;
    bool draining_ = false;
    std::deque<std::string> log_;
    std::map<d::Turns, size_t> styles_;
    std::map<d::Turns, size_t> joins_;
    const bool trace_ = getenv("MODEL_TRACE") != nullptr;  // every event and action
};

// Random runs in auto mode on one to three GPUs, with one user or three,
// one class or all, capacities, quanta and (for a while) modes changed at
// run time: after every event the scheduler is where the model says it must
// be; every 100 events the clients stop asking, and every waiter is granted
// within a bounded number of steps (no starvation).
TEST(SchedulerModel, AutoModeStaysWithinTheModelAndStarvesNobody)
{
    // 96 seeds in a row, and one that found a bug the others miss (a client's
    // pinned memory leaving a GPU in group turns). MODEL_SEED=n runs the 96
    // from n instead: the seed alone makes the run, so the first replays one.
    std::vector<unsigned> seeds;
    const unsigned first =
        getenv("MODEL_SEED") ? static_cast<unsigned>(atoi(getenv("MODEL_SEED"))) : 0u;
    for (unsigned seed = first; seed < first + 96; ++seed)
        seeds.push_back(seed);
    if (getenv("MODEL_SEED") == nullptr)
        seeds.push_back(2541);
    std::map<d::Turns, size_t> styles, joins;
    size_t most = 0;
    for (unsigned seed : seeds) {
        AutoRun run(seed, {1 + seed % 3, seed % 2 == 1, seed / 2 % 2 == 1});
        for (int step = 0; step < 600; ++step) {
            ASSERT_TRUE(run.step()) << "seed " << seed << " step " << step;
            if (step % 100 == 99) {
                size_t took = 0;
                // At most 8 clients, five steps each (the runs need 8 in all).
                ASSERT_TRUE(run.drain(40, &took)) << "seed " << seed << " step " << step;
                most = std::max(most, took);
            }
        }
        for (const auto& [t, n] : run.styles_seen())
            styles[t] += n;
        for (const auto& [t, n] : run.joins())
            joins[t] += n;
    }
    // The runs reach every auto-mode style, and groups and soft joins form.
    EXPECT_GT(styles[d::Turns::Soft], 1000u);
    EXPECT_GT(styles[d::Turns::Groups], 1000u);
    EXPECT_GT(joins[d::Turns::Soft], 100u);
    EXPECT_GT(joins[d::Turns::Groups], 100u);
    if (getenv("MODEL_TRACE") != nullptr)
        fprintf(stderr,
                "styles soft %zu groups %zu, joins soft %zu groups %zu, drains took %zu steps\n",
                styles[d::Turns::Soft], styles[d::Turns::Groups], joins[d::Turns::Soft],
                joins[d::Turns::Groups], most);
}

}  // namespace
