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
#include "daemon/host_readings.h"
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

// Group turns: whether waiter `c` stays out of the holders' turn on `gpu`
// because they keep the GPU busy, where the host reads its utilization
// (`readable`, MemoryWatch::watch_util): a holder kept it busy by itself
// when last read alone (ClientRecord::busy_alone), or holds it alone and
// has not been read yet (a reading comes within about a second).
// Interactive waiters, those whose bursts are known to be short
// (policy::kShortBurst) and those whose latest hold ended in a release of
// their own (ClientRecord::let_go_itself: one that let go in a pause of its
// work comes back for the rest of it) join all the same; one that left a
// group that kept the GPU busy (ClientRecord::left_busy_group) joins
// nobody: read alone, the one it left may leave SMs idle and yet fill them
// beside it. The holders' quanta run meanwhile (the waiter is first in
// line), so the wait is bounded.
bool busy_holds_back(const ClientRecord& c, const Turn& t, GpuIndex gpu, bool readable);
// What a utilization reading says of the process `pid` that has held the
// GPU alone since `alone_since`: whether it kept the GPU busy by itself
// (policy::kBusyUtil); nullopt where the reading's window began before that.
std::optional<bool> busy_alone(const UtilReading& reading, int32_t pid, TimePoint alone_since);
// Group turns: which holder, if any, to ask to let go because the holders
// keep the GPU busy together (their utilization in `reading`, counted only
// where its window began after `since`, at least policy::kBusyUtil) and the
// one granted last, a normal process, takes a share of it that a busy GPU
// would not leave idle (100 - kBusyUtil or more): beside the others it only
// shares their SMs, and waits for its turn instead. Holders start together
// in soft turns before the GPU is oversubscribed, so group turns can begin
// with such a group.
std::optional<ClientId> busy_group_leaver(const UtilReading& reading, const Turn& t,
                                          TimePoint since);

}  // namespace nvshare::daemon::soft_join
