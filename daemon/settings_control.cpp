#include "daemon/settings_control.h"

#include <algorithm>

#include "common/mode.h"
#include "daemon/log.h"

namespace nvshare::daemon {

SettingsControl::SettingsControl(Server& server, StateStore store, Options configured,
                                 SettingsLayer runtime)
    : server_(server),
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
        return Refusal{Refusal::Why::Invalid,
                       "unknown anti-thrashing mode '" + name + "' (valid: on, off, auto)"};
    if (*mode == server_.scheduler().settings().mode)
        return std::nullopt;
    authorize();
    SettingsLayer next = runtime_;
    next.mode = *mode;
    if (auto refused = save(next))
        return refused;
    server_.set_mode(*mode);
    return std::nullopt;
}

std::optional<Refusal> SettingsControl::set_time_quantum(uint64_t usec, const Authorize& authorize)
{
    const uint64_t max_usec = to_usec(kMaxTimeQuantum);
    const Duration tq = std::chrono::microseconds(std::min(usec, max_usec + 1));
    if (!valid_time_quantum(tq))
        return Refusal{Refusal::Why::Invalid,
                       "time quantum " + std::to_string(usec) + " us is out of range (valid: " +
                           std::to_string(to_usec(kMinTimeQuantum)) + " to " +
                           std::to_string(max_usec) + " us, i.e. " + kTimeQuantumRange + ")"};
    if (tq == server_.scheduler().settings().time_quantum)
        return std::nullopt;
    authorize();
    SettingsLayer next = runtime_;
    next.time_quantum = tq;
    if (auto refused = save(next))
        return refused;
    server_.set_time_quantum(tq);
    return std::nullopt;
}

std::optional<Refusal> SettingsControl::set_capacity(GpuIndex gpu, uint64_t bytes,
                                                     const Authorize& authorize)
{
    if (bytes == 0)
        return Refusal{Refusal::Why::Invalid, "capacity must be greater than 0 bytes"};
    const Gpu& known = server_.scheduler().gpus().at(gpu);
    if (bytes == known.capacity)
        return std::nullopt;
    authorize();
    SettingsLayer next = runtime_;
    next.capacities[known.description.uuid] = bytes;
    if (auto refused = save(next))
        return refused;
    server_.set_capacity(gpu, bytes);
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
    const auto& s = server_.scheduler().settings();
    if (s.mode != configured_.scheduler.mode)
        server_.set_mode(configured_.scheduler.mode);
    if (s.time_quantum != configured_.scheduler.time_quantum)
        server_.set_time_quantum(configured_.scheduler.time_quantum);
    const auto& gpus = server_.scheduler().gpus();
    for (GpuIndex g = 0; g < gpus.size(); ++g) {
        const uint64_t configured = configured_capacity(configured_, gpus[g].description);
        if (gpus[g].capacity != configured)
            server_.set_capacity(g, configured);
    }
    return std::nullopt;
}

}  // namespace nvshare::daemon
