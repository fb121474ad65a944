// What the waiters of one GPU were told of their wait (Waiting actions), and
// whom a change makes the scheduler tell again (Scheduler::publish_waits).
// A waiter among the first kNamedPlaces is told of every change of its
// facts. One further back is told its place and reason when it is queued,
// when its place enters or leaves the first kNamedPlaces, and when the GPU's
// own reason changes (its mode or turn style): not as it moves among the
// places further back, whose facts as told are a snapshot. So an event
// looks at the first kNamedPlaces, at those told a place among them and at
// those told nothing yet, never at the rest of the line, and tells at most
// 2 x kNamedPlaces waiters besides the ones it queued; a change of the GPU's
// reason looks at every waiter. Part of the scheduler, and pure like it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "common/protocol.h"
#include "daemon/action.h"
#include "daemon/client.h"
#include "daemon/scheduler_types.h"
#include "daemon/waiting_line.h"

namespace nvshare::daemon {

class WaitNotices {
public:
    static constexpr uint32_t kNamedPlaces = proto::kNamedPlaces;

    // `c` joined the line of `gpu` (what it was told there, if anything,
    // stands: wait_sent).
    void queued(const ClientRecord& c, GpuIndex gpu);
    // `c` leaves it (before its wait_sent for `gpu` changes).
    void left(const ClientRecord& c, GpuIndex gpu);
    // Tells each waiter of `gpu` that has news (the rule above) what its
    // facts are now, in the order of their places. `holder`: what is the
    // same for every waiter (the holder's facts, the GPU's reason; place 0).
    void publish(GpuIndex gpu, const WaitingLine& line, const LineOrder& order,
                 const WaitFacts& holder, std::map<ClientId, ClientRecord>& clients,
                 std::vector<Action>& out);

    // What waiter `c` of `line` would be told now, at its exact place (the
    // status view's; no walk of the line).
    static WaitFacts due(const WaitingLine& line, const LineOrder& order, const WaitFacts& holder,
                         const std::map<ClientId, ClientRecord>& clients, const ClientRecord& c);

private:
    using Key = std::pair<uint64_t, ClientId>;  // (sequence, client)
    // The rank of the line's first waiter where some may outrank others.
    static std::optional<int> first_rank(const WaitingLine& line, const LineOrder& order,
                                         const std::map<ClientId, ClientRecord>& clients);
    static WaitFacts facts(const WaitingLine& line, const LineOrder& order, const WaitFacts& holder,
                           std::optional<int> first_rank, const ClientRecord& c, uint32_t place);

    std::set<Key> untold_;  // told nothing yet here
    std::set<Key> named_;   // told a place among the first kNamedPlaces
    // The GPU's reason when they were last told: a new one is news for all.
    std::optional<WaitReason> reason_;
};

}  // namespace nvshare::daemon
