// One scheduler's action stream, deadlines and queues on a random event
// sequence, as text. Compiled once per scheduler tree (RUN names the entry,
// compare.sh renames the other tree's namespace); main.cpp compares them.
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/scheduler.h"

using namespace nvshare::daemon;
using namespace std::chrono_literals;

namespace {
constexpr uint64_t GiB = uint64_t{1} << 30;
// A client's next deadline: Scheduler::deadline_of where the tree has it
// (a soft-turn follower's is its followers'), else its record's.
template <typename S>
std::optional<TimePoint> deadline_of(const S& s, const ClientRecord& c)
{
    if constexpr (requires { s.deadline_of(c.id); })
        return s.deadline_of(c.id);
    else
        return c.deadline;
}
void dump(std::ostringstream& o, const Scheduler& s, std::vector<Action> acts)
{
    for (const Action& a : acts) {
        o << "A" << int(a.kind) << " c" << a.client << " g" << a.gpus << " x" << a.exclusive
          << a.oversubscribed << a.contended << a.turns_begin << a.bounded << " gr"
          << a.grace.count() << " k" << a.keep << " op" << a.others_pinned << " rr"
          << int(a.revoke_reason);
        if (a.kind == ActionKind::Waiting)
            o << " w" << (a.wait.holder ? *a.wait.holder : 0) << "/" << a.wait.place << "/"
              << int(a.wait.reason) << "/" << a.wait.held_since.time_since_epoch().count() << "/"
              << a.wait.quantum.count();
        o << "\n";
    }
    const auto nd = s.next_deadline();
    o << "ND " << (nd ? nd->time_since_epoch().count() : -1) << "\n";
    for (const auto& [id, c] : s.clients())
        o << "C" << id << " p" << int(c.phase) << " d"
          << deadline_of(s, c).value_or(TimePoint{}).time_since_epoch().count() << " h" << c.held
          << " w" << c.wanted << "\n";
    for (GpuIndex g = 0; g < s.gpus().size(); ++g) {
        o << "Q" << g << ":";
        for (ClientId id : s.queue(g))
            o << " " << id;
        o << " T" << int(s.turns(g)) << "\n";
    }
}
}  // namespace

std::string RUN(unsigned seed, int steps)
{
    std::mt19937 rng(seed);
    std::ostringstream o;
    // Every third seed: auto mode's soft turns, one roomy GPU (most of the
    // time), many clients, so that many wait for the holders' starts.
    const bool dense = seed % 3 == 1;
    const Mode mode = dense            ? Mode::Auto
                      : seed % 6 == 0  ? Mode::On
                      : seed % 11 == 0 ? Mode::Off
                                       : Mode::Auto;
    const Duration tqs[] = {1s, 5s, 30s};
    Scheduler s(SchedulerSettings{mode, tqs[rng() % 3], 2s});
    const uint32_t gpus = dense ? 1 + (rng() % 4 == 0) : 1 + rng() % 3;
    for (uint32_t g = 0; g < gpus; ++g)
        s.ensure_gpu({"GPU-" + std::to_string(g), "", (dense ? 400 : 4 + rng() % 13) * GiB});
    TimePoint now{1s};
    std::vector<ClientId> alive;
    ClientId next = 1;
    const uint32_t users = 1 + rng() % 3;
    const unsigned maxc = dense ? 20 + rng() % 60 : 3 + rng() % 40;
    const Priority prios[] = {Priority::Normal, Priority::Batch, Priority::Interactive,
                              Priority::Normal};
    for (int step = 0; step < steps; ++step) {
        const unsigned gap = rng() % 4;
        now += gap == 0   ? 0ms
               : gap == 1 ? std::chrono::milliseconds(rng() % 50)
                          : std::chrono::milliseconds(rng() % 1500);
        const int what = static_cast<int>(rng() % 20);
        const ClientId id = alive.empty() ? 0 : alive[rng() % alive.size()];
        const ClientRecord* c = id != 0 ? s.client(id) : nullptr;
        const GpuSet reg = c != nullptr ? c->registered() : 0;
        o << "E" << step << " " << what << " " << id << "\n";
        if (what < 2 || alive.empty() || (dense && what == 19 && rng() % 2)) {
            if (alive.size() < maxc) {
                std::vector<GpuIndex> mine;
                for (uint32_t g = 0; g < gpus; ++g)
                    if (rng() % 2)
                        mine.push_back(g);
                if (mine.empty())
                    mine.push_back(rng() % gpus);
                ClientInfo info{static_cast<int32_t>(next),
                                static_cast<uint32_t>(1000 + rng() % users), "x"};
                info.priority = prios[rng() % 4];
                s.connect(next, info, mine, now);
                alive.push_back(next++);
            } else {
                s.tick(now);
            }
        } else if (what < 7) {
            s.request(id, reg & (rng() | 1), now);
        } else if (what < 10) {
            s.release(id, rng() % 4 == 0 ? reg : c->held | c->wanted, now);
        } else if (what < 13) {
            const GpuIndex g = static_cast<GpuIndex>(std::countr_zero(reg));
            MemoryUse use;
            use.managed = (rng() % 7) * GiB / 2;
            if (rng() % 5 == 0)
                use.pinned = use.confirmed_pinned = (rng() % 3) * GiB / 4;
            s.report_memory(id, g, use, now);
        } else if (what == 13) {
            const GpuIndex g = static_cast<GpuIndex>(std::countr_zero(reg));
            SwapStats st = c->swaps.count(g) ? c->swaps.at(g) : SwapStats{};
            st.swap_ins += 1;
            st.swap_in_time += std::chrono::milliseconds(rng() % 3000);
            s.report_swaps(id, g, st, now);
        } else if (what == 14) {
            s.disconnect(id, now);
            alive.erase(std::find(alive.begin(), alive.end(), id));
        } else if (what == 15 && rng() % 4 == 0) {
            s.revoke(id, now);
        } else if (what == 16 && rng() % 8 == 0) {
            s.set_time_quantum(tqs[rng() % 3], now);
        } else if (what == 16 && rng() % 8 == 0) {
            s.set_mode(static_cast<Mode>(rng() % 3), now);
        } else {
            const auto nd = s.next_deadline();
            s.tick(nd && *nd > now && rng() % 2 ? (now = *nd) : now);
        }
        dump(o, s, s.take_actions());
    }
    return o.str();
}
