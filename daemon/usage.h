// Per-user, per-GPU usage for the metrics: what each user's clients held,
// waited, were granted, asked to drop, revoked and swapped on each GPU,
// including clients that have exited. Pure: the scheduler hands each
// departing client to retire(); totals() adds the live clients. The counts
// are the scheduler's own, bumped where it decides (README.md), not events
// counted after the fact.
#pragma once

#include <compare>
#include <cstdint>
#include <map>

#include "daemon/client.h"

namespace nvshare::daemon {

// A client's time holding and waiting so far, the running hold or wait included.
Duration held_so_far(const ClientRecord& client, TimePoint now);
Duration waited_so_far(const ClientRecord& client, TimePoint now);

struct UsageKey {
    GpuIndex gpu = 0;
    uint32_t uid = 0;
    auto operator<=>(const UsageKey&) const = default;
};

struct Usage {
    // Counters: only grow, also over clients' exits.
    Duration held{};
    Duration waited{};
    uint64_t grants = 0;
    uint64_t drops = 0;
    uint64_t revocations = 0;
    uint64_t bytes_swapped_in = 0;
    uint64_t bytes_swapped_out = 0;
    Duration swap_in_time{};
    Duration swap_out_time{};
    // Gauges: the live clients now.
    uint64_t clients = 0;
    uint64_t waiting = 0;
    void add(const Usage& other);
};

// How long the counts of a user with no client stay, and how many users'
// counts stay at most (the least recently active go first): the status and
// the metrics stay bounded however many uids ever connected. A user whose
// counts went starts from zero, which Prometheus takes as a counter reset.
inline constexpr Duration kUsageKeep = std::chrono::hours(24);
inline constexpr size_t kMaxUsageRecords = 4096;

class UsageLedger {
public:
    // A client arrives: its user's counts do not expire while it stays.
    void joined(const ClientRecord& client);
    // A client leaves: its counters stay in the totals.
    void retire(const ClientRecord& client, TimePoint now);
    std::map<UsageKey, Usage> totals(const std::map<ClientId, ClientRecord>& live,
                                     TimePoint now) const;
    size_t records() const { return retired_.size(); }

private:
    struct Record {
        Usage usage;
        TimePoint last_retired{};
    };
    void expire(TimePoint now);
    std::map<UsageKey, Record> retired_;
    std::map<uint32_t, size_t> live_;  // clients by principal
};

}  // namespace nvshare::daemon
