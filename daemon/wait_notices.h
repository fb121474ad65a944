// What the waiters of one GPU were told of their wait (Waiting actions), and
// whom a change makes the scheduler tell again (Scheduler::publish_waits). A
// waiter among the first kNamedPlaces is told of every change of its facts;
// one further back when its place moves into another power of two or its
// reason changes (Scheduler::kNamedPlaces). Those are found without walking
// the line: the waiters told a place further back are kept in groups of one
// (user, class), one power of two and one reason. In a group the order is
// the line's, so its places rise along it, and so does its waiters' rank:
// the ones whose place left the group's power of two, or whose reason
// changed, are at its two ends. Part of the scheduler, and pure like it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "daemon/action.h"
#include "daemon/client.h"
#include "daemon/scheduler_types.h"
#include "daemon/waiting_line.h"

namespace nvshare::daemon {

class WaitNotices {
public:
    static constexpr uint32_t kNamedPlaces = 8;

    // `c` joined the line of `gpu` (what it was told there, if anything,
    // stands: wait_sent).
    void queued(const ClientRecord& c, GpuIndex gpu);
    // `c` leaves it (before its wait_sent for `gpu` changes).
    void left(const ClientRecord& c, GpuIndex gpu);
    // Tells each waiter of `gpu` whose facts changed what they are now, in
    // the order of their places. `holder`: what is the same for every
    // waiter (the holder's facts, the GPU's reason; place 0).
    void publish(GpuIndex gpu, const WaitingLine& line, const LineOrder& order,
                 const WaitFacts& holder, std::map<ClientId, ClientRecord>& clients,
                 std::vector<Action>& out);

private:
    using Key = std::pair<uint64_t, ClientId>;  // (sequence, client)
    // (principal, class rank, bit width of the place told, told Priority)
    using Group = std::tuple<uint32_t, int, int, bool>;
    static Group group_of(const ClientRecord& c, const WaitFacts& told);

    std::set<Key> untold_;  // told nothing yet here
    std::set<Key> named_;   // told a place among the first kNamedPlaces
    std::map<Group, std::set<Key>> deep_;
    // The GPU's reason when they were last told: a new one is news for all.
    std::optional<WaitReason> reason_;
};

}  // namespace nvshare::daemon
