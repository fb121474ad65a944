// The rules behind the order of waiters and, in auto mode while memory fits,
// behind the choice between taking turns and running together
// (nvshared(8), SCHEDULING, states these constants; doc-ranges holds it to
// them). Pure functions of what the scheduler knows; the Scheduler
// (daemon/scheduler.h) applies them.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <span>

#include "daemon/client.h"
#include "daemon/scheduler_types.h"

namespace nvshare::daemon::policy {

// A waiter whose bursts are this short runs alongside the holders at once:
// waiting for a holder's burst would cost it more than its burst costs them.
inline constexpr Duration kShortBurst = std::chrono::milliseconds(250);
// The longest a lower-class holder keeps a GPU taken in turns while an
// interactive process waits for it.
inline constexpr Duration kInteractivePreempt = std::chrono::milliseconds(250);
// How long a process may run alongside others beyond its user's fair share
// of a GPU whose memory fits (switching there costs only the handoff).
inline constexpr Duration kShareRebalance = std::chrono::seconds(1);
// A process of a higher class keeps a GPU's lower-class holder's queued
// work short (RunAhead) while it waits, holds, or used the GPU this
// recently (registered or asked for it, or let go): a notebook between
// cells goes on counting; one idle for longer no longer slows the holder,
// and its next request waits once for what the holder queued.
inline constexpr Duration kHigherClassIdleRelease = std::chrono::minutes(5);
// Held time counts for the order between users with this half-life.
inline constexpr Duration kUsageHalfLife = std::chrono::seconds(60);
// A process that is still allocating at its start keeps others from joining
// it until its memory has not grown for kStartupSettle, and at most for
// kStartupWindow after its first grant (the whole window if it has not
// allocated anything yet: it is creating its context): programs that start together would
// otherwise fill the card together before either has reported its size,
// and where they do not fit, what they placed must then be moved again.
// Interactive processes join at once all the same.
inline constexpr Duration kStartupSettle = std::chrono::milliseconds(300);
// Growth counts for the start only once a process has this much memory:
// a framework's first small allocations come before a pause (its kernels
// load lazily) and say nothing of its size; counted, that pause would end
// the start and let the next process join before the first one's data.
inline constexpr uint64_t kStartupGrowthFrom = uint64_t{256} << 20;
inline constexpr Duration kStartupWindow = std::chrono::seconds(2);

// 0 interactive, 1 normal, 2 batch: lower goes first.
int class_rank(Priority p);
// A waiter's rank: its class's, raised by one for every `aging` it has
// waited, so that lower classes never starve.
int waiting_rank(Priority p, Duration waited, Duration aging);
// The same from its class's rank.
int aged_rank(int class_rank, Duration waited, Duration aging);
// The quantum a holder of class `holder` keeps while a waiter of rank
// `best_waiting` waits: unchanged unless the waiter ranks higher.
Duration preempted_quantum(Duration quantum, Priority holder, int best_waiting);

// When a process first granted at `first_grant`, whose memory last grew at
// `last_growth` (none: not yet), has settled (see kStartupSettle).
TimePoint settled_at(TimePoint first_grant, std::optional<TimePoint> last_growth);

// A process's typical burst from one more sample (0: none known yet).
Duration next_burst_estimate(Duration current, Duration sample);

// A holder as the join rule sees it.
struct HolderBurst {
    Duration burst{};     // its typical burst, 0 if not known
    Duration held_for{};  // since its grant
};

// How long after it began to wait a waiter of class `cls` with typical burst
// `burst` (0: not known) may run alongside `holders` on a GPU whose memory
// fits; `waited` is how long it has waited so far. A result <= waited means
// now.
//   - interactive: at once; batch: after a quantum (it takes turns);
//   - normal: at once if its bursts are short or not known yet, or if the
//     holders' bursts will last longer than its own (running together then
//     costs everyone less than waiting); otherwise it waits for the end of
//     the holders' burst, but at most twice its own burst (and a quantum).
Duration join_after(Priority cls, Duration burst, Duration waited,
                    std::span<const HolderBurst> holders, Duration quantum);
// Whether join_after reads `holders` for such a waiter at all: only a
// normal one whose bursts are known to be long compares them.
bool join_reads_holders(Priority cls, Duration burst);

// The most processes of one user that may run together on a GPU while other
// users' processes want it too: as many as the least of those users runs,
// but at least one. `others`: the other users present (holding or waiting)
// and how many processes each runs there. No other user: no limit.
size_t user_share_cap(const std::map<uint32_t, size_t>& others);

// Every user's held time, decaying with kUsageHalfLife, including holds still
// running: the order between users is by it, least first.
class UserShares {
public:
    void hold_began(uint32_t uid, TimePoint at);
    void hold_ended(uint32_t uid, TimePoint began, TimePoint now);
    // Held seconds, decayed to `now`.
    double held(uint32_t uid, TimePoint now) const;

private:
    struct Share {
        double decayed_s = 0;  // finished holds, as of `at`
        TimePoint at{};
        size_t running = 0;
        double running_began_s = 0;  // sum of the running holds' grant times
    };
    std::map<uint32_t, Share> shares_;
};

}  // namespace nvshare::daemon::policy
