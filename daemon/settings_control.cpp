#include "daemon/settings_control.h"

#include <algorithm>
#include <set>

#include "common/mode.h"
#include "common/units.h"
#include "daemon/log.h"

namespace nvshare::daemon {

namespace {

// The refusal of a time quantum out of range, in the caller's microseconds.
std::optional<Refusal> check_time_quantum(uint64_t usec, Duration* tq)
{
    const uint64_t max_usec = to_usec(kMaxTimeQuantum);
    *tq = std::chrono::microseconds(std::min(usec, max_usec + 1));
    if (valid_time_quantum(*tq))
        return std::nullopt;
    return Refusal{Refusal::Why::Invalid,
                   "time quantum " + std::to_string(usec) +
                       " us is out of range (valid: " + std::to_string(to_usec(kMinTimeQuantum)) +
                       " to " + std::to_string(max_usec) + " us, i.e. " + kTimeQuantumRange + ")"};
}

Refusal unknown_mode(const std::string& name)
{
    return Refusal{Refusal::Why::Invalid,
                   "unknown anti-thrashing mode '" + name + "' (valid: on, off, auto)"};
}

// The value `map` holds for `key`, if any.
template <typename Map>
std::optional<typename Map::mapped_type> find_in(const Map& map, const std::string& key)
{
    const auto it = map.find(key);
    return it == map.end() ? std::nullopt : std::optional(it->second);
}

}  // namespace

SettingsControl::SettingsControl(SettingsTarget& target, StateStore store, Options configured,
                                 SettingsLayer runtime)
    : target_(target),
      store_(std::move(store)),
      configured_(std::move(configured)),
      runtime_(std::move(runtime))
{
}

std::optional<Refusal> SettingsControl::save(const SettingsLayer& next)
{
    if (!store_.save(next))
        return Refusal{Refusal::Why::NotSaved, "cannot save the setting in " + store_.path() +
                                                   " (see nvshared's log); nothing changed"};
    runtime_ = next;
    return std::nullopt;
}

std::optional<Refusal> SettingsControl::set_mode(const std::string& name,
                                                 const Authorize& authorize)
{
    const auto mode = parse_mode(name);
    if (!mode)
        return unknown_mode(name);
    if (*mode == scheduler().settings().mode)
        return std::nullopt;
    authorize();
    SettingsLayer next = runtime_;
    next.mode = *mode;
    if (auto refused = save(next))
        return refused;
    apply_mode(*mode);
    return std::nullopt;
}

std::optional<Refusal> SettingsControl::set_time_quantum(uint64_t usec, const Authorize& authorize)
{
    Duration tq{};
    if (auto refused = check_time_quantum(usec, &tq))
        return refused;
    if (tq == scheduler().settings().time_quantum)
        return std::nullopt;
    authorize();
    SettingsLayer next = runtime_;
    next.time_quantum = tq;
    if (auto refused = save(next))
        return refused;
    apply_time_quantum(tq);
    return std::nullopt;
}

std::optional<Refusal> SettingsControl::set_capacity(GpuIndex gpu, uint64_t bytes,
                                                     const Authorize& authorize)
{
    if (bytes == 0)
        return Refusal{Refusal::Why::Invalid, "capacity must be greater than 0 bytes"};
    if (!valid_capacity(bytes))
        return Refusal{Refusal::Why::Invalid, "capacity " + std::to_string(bytes) +
                                                  " is too large (valid: " + kCapacityRange + ")"};
    const Gpu& known = scheduler().gpus().at(gpu);
    if (bytes == known.capacity)
        return std::nullopt;
    // More than the GPU has would let processes that do not fit run side by
    // side, thrashing: what anti-thrashing is there to prevent.
    const uint64_t physical = known.description.physical_memory;
    if (physical != 0 && bytes > physical)
        return Refusal{Refusal::Why::Invalid, "capacity " + format_size(bytes) +
                                                  " is more than GPU " + std::to_string(gpu) +
                                                  "'s memory (valid: 1 byte to " +
                                                  format_size(physical) + ")"};
    authorize();
    SettingsLayer next = runtime_;
    next.capacities[known.description.uuid] = bytes;
    if (auto refused = save(next))
        return refused;
    apply_capacity(gpu, bytes);
    return std::nullopt;
}

std::optional<Refusal> SettingsControl::set_gpu_mode(GpuIndex gpu, const std::string& name,
                                                     const Authorize& authorize)
{
    const auto mode = parse_mode(name);
    if (!mode)
        return unknown_mode(name);
    const std::string& uuid = scheduler().gpus().at(gpu).description.uuid;
    // Unchanged only when it is the GPU's own already: the same value
    // inherited would still follow the host-wide one.
    if (find_in(scheduler().gpu_modes(), uuid) == mode)
        return std::nullopt;
    authorize();
    SettingsLayer next = runtime_;
    next.gpu_modes[uuid] = *mode;
    if (auto refused = save(next))
        return refused;
    apply_gpu_mode(uuid, *mode);
    return std::nullopt;
}

std::optional<Refusal> SettingsControl::set_gpu_time_quantum(GpuIndex gpu, uint64_t usec,
                                                             const Authorize& authorize)
{
    Duration tq{};
    if (auto refused = check_time_quantum(usec, &tq))
        return refused;
    const std::string& uuid = scheduler().gpus().at(gpu).description.uuid;
    if (find_in(scheduler().gpu_time_quanta(), uuid) == tq)
        return std::nullopt;
    authorize();
    SettingsLayer next = runtime_;
    next.gpu_time_quanta[uuid] = tq;
    if (auto refused = save(next))
        return refused;
    apply_gpu_time_quantum(uuid, tq);
    return std::nullopt;
}

void SettingsControl::apply_mode(Mode mode)
{
    scheduler().set_mode(mode, Clock::now());
    const std::string name = proto::mode_name(mode);
    target_.after_settings_change(
        {"anti-thrashing", "", name, "anti-thrashing set to " + name, true});
}

void SettingsControl::apply_time_quantum(Duration tq)
{
    scheduler().set_time_quantum(tq, Clock::now());
    const uint64_t us = to_usec(tq);
    target_.after_settings_change(
        {"time-quantum", "", std::to_string(us),
         "time quantum set to " + format_duration(std::chrono::microseconds(us)), true});
}

void SettingsControl::apply_capacity(GpuIndex gpu, uint64_t bytes)
{
    scheduler().set_capacity(gpu, bytes, Clock::now());
    const std::string& uuid = scheduler().gpus().at(gpu).description.uuid;
    target_.after_settings_change(
        {"capacity", uuid, std::to_string(bytes),
         "capacity of GPU " + std::to_string(gpu) + " (" + uuid + ") set to " + format_size(bytes),
         true});
}

void SettingsControl::apply_gpu_mode(const std::string& uuid, std::optional<Mode> mode)
{
    scheduler().set_gpu_mode(uuid, mode, Clock::now());
    const std::string value = mode ? proto::mode_name(*mode) : "default";
    target_.after_settings_change(
        {"anti-thrashing", uuid, value,
         mode ? "anti-thrashing of GPU " + uuid + " set to " + value
              : "anti-thrashing of GPU " + uuid + " follows the host-wide mode (" +
                    proto::mode_name(scheduler().settings().mode) + ") again",
         false});
}

void SettingsControl::apply_gpu_time_quantum(const std::string& uuid, std::optional<Duration> tq)
{
    scheduler().set_gpu_time_quantum(uuid, tq, Clock::now());
    const std::string value = tq ? std::to_string(to_usec(*tq)) : "default";
    const std::string shown = format_duration(
        std::chrono::microseconds(to_usec(tq.value_or(scheduler().settings().time_quantum))));
    target_.after_settings_change(
        {"time-quantum", uuid, value,
         tq ? "time quantum of GPU " + uuid + " set to " + shown
            : "time quantum of GPU " + uuid + " follows the host-wide one (" + shown + ") again",
         false});
}

void SettingsControl::apply(const std::string& uuid, const Options& target)
{
    const Scheduler& s = scheduler();
    const auto mode = find_in(target.gpu_modes, uuid);
    if (find_in(s.gpu_modes(), uuid) != mode)
        apply_gpu_mode(uuid, mode);
    const auto tq = find_in(target.gpu_time_quanta, uuid);
    if (find_in(s.gpu_time_quanta(), uuid) != tq)
        apply_gpu_time_quantum(uuid, tq);
    const auto& gpus = s.gpus();
    for (GpuIndex g = 0; g < gpus.size(); ++g) {
        if (gpus[g].description.uuid != uuid)
            continue;
        const uint64_t capacity = configured_capacity(target, gpus[g].description);
        if (gpus[g].capacity != capacity) {
            const uint64_t physical = gpus[g].description.physical_memory;
            if (physical != 0 && capacity > physical)
                NVS_WARN(
                    "GPU %u: capacity %s is more than its memory (%s): processes that do "
                    "not fit are let run side by side",
                    g, format_size(capacity).c_str(), format_size(physical).c_str());
            apply_capacity(g, capacity);
        }
    }
}

void SettingsControl::apply_all(const Options& target)
{
    const auto& s = scheduler().settings();
    if (s.mode != target.scheduler.mode)
        apply_mode(target.scheduler.mode);
    if (s.time_quantum != target.scheduler.time_quantum)
        apply_time_quantum(target.scheduler.time_quantum);
    // Every GPU with settings of its own, and every GPU met: the UUIDs first
    // (apply changes the maps).
    std::set<std::string> uuids;
    for (const auto& [uuid, mode] : scheduler().gpu_modes())
        uuids.insert(uuid);
    for (const auto& [uuid, tq] : scheduler().gpu_time_quanta())
        uuids.insert(uuid);
    for (const auto& [uuid, mode] : target.gpu_modes)
        uuids.insert(uuid);
    for (const auto& [uuid, tq] : target.gpu_time_quanta)
        uuids.insert(uuid);
    for (const Gpu& gpu : scheduler().gpus())
        uuids.insert(gpu.description.uuid);
    for (const std::string& uuid : uuids)
        apply(uuid, target);
}

void SettingsControl::reload(Options configured)
{
    configured_ = std::move(configured);
    Options effective = configured_;
    apply_layer(runtime_, effective);  // run-time changes stay on top
    target_.set_admin_rules(effective.priority_rules, effective.scheduler.grace,
                            effective.log_waits_after);
    apply_all(effective);
}

std::optional<Refusal> SettingsControl::reset_gpu(GpuIndex gpu, const Authorize& authorize)
{
    const std::string uuid = scheduler().gpus().at(gpu).description.uuid;
    SettingsLayer next = runtime_;
    next.gpu_modes.erase(uuid);
    next.gpu_time_quanta.erase(uuid);
    next.capacities.erase(uuid);
    if (next == runtime_)
        return std::nullopt;  // nothing of this GPU's was changed at run time
    authorize();
    if (auto refused = save(next))
        return refused;
    NVS_NOTICE("run-time settings of GPU %s reset to the configured ones", uuid.c_str());
    apply(uuid, configured_);
    return std::nullopt;
}

std::optional<Refusal> SettingsControl::reset(const Authorize& authorize)
{
    authorize();
    if (!store_.clear())
        return Refusal{Refusal::Why::NotSaved,
                       "cannot remove " + store_.path() + " (see nvshared's log); nothing changed"};
    NVS_NOTICE("run-time settings reset to the configured ones");
    runtime_ = {};
    apply_all(configured_);
    return std::nullopt;
}

}  // namespace nvshare::daemon
