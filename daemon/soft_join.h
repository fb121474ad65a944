// The rules for joining the holders of a GPU taken in soft or group turns:
// when a process has settled after its start, when a waiter may join the
// holders, and how many of a user's processes may hold the GPU together
// (its share). Pure and without state: it reads the holders' records and
// the users waiting that the scheduler hands it, at the time it is given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "daemon/client.h"
#include "daemon/scheduler_types.h"
#include "daemon/waiting_line.h"

namespace nvshare::daemon::soft_join {

// When a process has settled after its start (policy::settled_at): never
// where it has not held a GPU yet.
TimePoint settled_time(const ClientRecord& c);
// Whether it is still starting: it has not held a GPU yet, or its memory
// grew just now, shortly after it first did.
inline bool starting(const ClientRecord& c, TimePoint now)
{
    return settled_time(c) > now;
}

// One GPU's turn as those who would join it see it.
struct Turn {
    const std::vector<ClientId>& holders;
    const std::map<ClientId, ClientRecord>& clients;  // the holders' records among them
    const WaitingLine& line;                          // who waits for the GPU
};

// When the last of the holders settles; the epoch where none holds it.
TimePoint holders_settled(const Turn& t);

// Soft turns. When waiter `c` may join the holders by policy::join_after
// alone (its class, burst and wait, the holders' bursts and the GPU's time
// quantum), not counting starts.
TimePoint policy_join_time(const ClientRecord& c, const Turn& t, Duration quantum, TimePoint now);
// The same, and where `c` is still starting (but interactive) not before
// the holders have settled.
TimePoint join_time(const ClientRecord& c, const Turn& t, Duration quantum, TimePoint now);
// How many processes of user `uid` may hold the GPU together: as many as
// the least of the other users present, holding or waiting, runs
// (policy::user_share_cap).
size_t share_cap(uint32_t uid, const Turn& t);
// Whether user `uid` holds fewer processes there than its share.
bool user_may_join(uint32_t uid, const Turn& t);
// Whether `c` may join the holders now: its join time has come and its
// user is below its share.
bool may_join(const ClientRecord& c, const Turn& t, Duration quantum, TimePoint now);
// Whether holder `c` is beyond its user's share: as many of its user's
// processes, granted before it, hold the GPU as the share allows.
bool over_share(const ClientRecord& c, const Turn& t);
// When the followers (soft_followers.h) may join: once the holders have
// settled; none where they have by `now`.
std::optional<TimePoint> followers_due(const Turn& t, TimePoint now);
// Whether followers may join now: nobody holds the GPU or the holders
// have settled.
bool followers_may_start(const Turn& t, TimePoint now);

// Group turns: whether the holders take one more now, memory permitting:
// none of them is starting or leaving (what it will use is not known yet)
// and they do not wait for room (`short_of_room_until`,
// Room::short_of_room_until): a joiner would wait for the same room while
// holding the lock.
bool group_open(const Turn& t, TimePoint short_of_room_until, TimePoint now);

}  // namespace nvshare::daemon::soft_join
