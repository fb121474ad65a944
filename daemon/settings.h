// nvshared's settings as layers: built-in defaults < the admin's config file
// < command-line options < changes made at run time (the state file). Each
// layer holds only what its source sets. Parsing and merging are pure (text
// in, values or errors out), so every bad input is tested directly.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/time_quantum.h"
#include "daemon/priority_rules.h"
#include "daemon/scheduler.h"

namespace nvshare::daemon {

using nvshare::valid_time_quantum;  // the range is common/time_quantum.h's

// How long a wait must last before it is logged (--log-waits-after, the
// config file's log-waits-after): 0, every wait, to 24h.
inline constexpr const char* kWaitLogRange = "0 to 24h";
constexpr bool valid_wait_log_threshold(std::chrono::microseconds d)
{
    return d.count() >= 0 && d <= kMaxTimeQuantum;
}

// A GPU's capacity (--capacity, the config file's capacity, the state file,
// the Capacity property): above 0 and at most the largest GPU memory nvshared
// accepts at all (kMaxReportedBytes); a set at run time is bounded by the
// GPU's own memory too (settings_control.cpp).
inline constexpr const char* kCapacityRange = "1 byte to 8 TiB";
static_assert(kMaxReportedBytes == uint64_t{8} << 40, "kCapacityRange states 8 TiB");
constexpr bool valid_capacity(uint64_t bytes)
{
    return bytes > 0 && bytes <= kMaxReportedBytes;
}

struct SettingsLayer {
    std::optional<Mode> mode;
    std::optional<Duration> time_quantum;
    std::optional<Duration> grace;
    std::optional<Duration> log_waits_after;
    std::optional<uint64_t> default_capacity;    // GPUs without their own
    std::map<std::string, uint64_t> capacities;  // by GPU UUID
    std::vector<PriorityRule> priority_rules;    // the config file's only
    // A GPU's own mode and time quantum, by UUID; others follow `mode` and
    // `time_quantum` (of whichever layer sets them).
    std::map<std::string, Mode> gpu_modes;
    std::map<std::string, Duration> gpu_time_quanta;

    bool empty() const;
    bool operator==(const SettingsLayer&) const = default;
};

// `top` laid over `base`, as a drop-in over the config file: what `top` sets
// wins, per-GPU values merge per GPU, priority rules are appended (base's
// first).
void merge_layer(SettingsLayer& base, const SettingsLayer& top);

// A per-GPU value as the config file and the command line spell it,
// "[UUID=]VALUE", both sides trimmed.
struct GpuSetting {
    std::optional<std::string> uuid;  // none: the host-wide form; "" ("=8G") is an error
    std::string_view value;
};
GpuSetting split_gpu_setting(std::string_view text);

// The config file, nvshare.conf(5): "key = value" lines, '#' comments.
// Lines in error are skipped and reported ("line 3: ..."); the rest applies.
// `names` turns the user and group names of priority rules into ids.
struct ConfigParse {
    SettingsLayer layer;
    std::vector<std::string> errors;
};
ConfigParse parse_config(std::string_view text, const NameLookup& names = {});

// The state file: JSON holding mode, time quantum, capacities and the GPUs'
// own modes and time quanta changed at run time. Anything malformed rejects the whole file (error
// set).
struct StateParse {
    SettingsLayer layer;
    std::optional<std::string> error;
};
StateParse parse_state(std::string_view text);
std::string serialize_state(const SettingsLayer& layer);

}  // namespace nvshare::daemon
