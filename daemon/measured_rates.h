// The rates at which memory moves on a GPU, as the processes that used it
// measured them (proto::RatesPayload): the latest figure of each kind that
// any of them reported, shown in status reports, handed to each new client
// (KnownRates) and kept across restarts (rates_store.h). Pure.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>

#include "common/protocol.h"

namespace nvshare::daemon {

// Bytes a second; 0: nobody measured it yet.
struct MeasuredRates {
    uint64_t engine_out = 0;  // the swap engine's copies to host memory
    uint64_t engine_in = 0;   // and back, mapping included
    uint64_t evict = 0;       // the driver's migration of managed memory out
    uint64_t prefetch = 0;    // and in
    uint64_t host_pin = 0;    // making pinned host memory (the host's)

    bool operator==(const MeasuredRates&) const = default;
    bool any() const { return *this != MeasuredRates{}; }
};

// Calls f(name, figure) for each figure of `r` (const or not), in the order
// of the wire; the names are those of status reports and rates.json.
template <typename R, typename F>
void for_each_figure(R& r, F&& f)
{
    f("engine_out", r.engine_out);
    f("engine_in", r.engine_in);
    f("evict", r.evict);
    f("prefetch", r.prefetch);
    f("host_pin", r.host_pin);
}

MeasuredRates rates_from_wire(const proto::RatesPayload& p);
// For the client's GPU index `gpu`.
proto::RatesPayload rates_to_wire(const MeasuredRates& r, uint32_t gpu);

// Whether each figure is 0 or within proto::kMinRate .. proto::kMaxRate.
bool plausible(const MeasuredRates& r);

// Takes every figure `report` has (non-zero) into `known`. True where a
// figure `known` lacked is known now: worth keeping across a restart at once.
bool merge(MeasuredRates& known, const MeasuredRates& report);

// As status reports and rates.json write them: an object of the five
// figures in bytes a second, 0 where unknown.
nlohmann::json rates_json(const MeasuredRates& r);
// Back from that object; nullopt where it is not one (a figure missing, not
// an unsigned integer, or implausible).
std::optional<MeasuredRates> rates_from_json(const nlohmann::json& j);

}  // namespace nvshare::daemon
