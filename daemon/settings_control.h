// The home of the settings changed at run time (over D-Bus): the one place
// that checks a new value, returns early when it is the current one, asks
// the caller's authorization, saves it in the state file, and only then
// applies it to the scheduler, then hands the change to its target, the
// Server (which tells the clients, logs it and lets the bus signal exactly
// what changed; settings_target.h). The order is timedated's: a value that
// cannot be saved is refused, and nothing changes.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "daemon/options.h"
#include "daemon/settings.h"
#include "daemon/settings_target.h"
#include "daemon/state_store.h"

namespace nvshare::daemon {

// Why a setter changed nothing.
struct Refusal {
    enum class Why { Invalid, NotSaved } why;
    std::string message;  // for the caller, in its units
};

class SettingsControl {
public:
    // `configured`: the settings without run-time changes (defaults, config
    // file, command line), what reset() returns to. `runtime`: the changes
    // loaded from `store` at start.
    SettingsControl(SettingsTarget& target, StateStore store, Options configured,
                    SettingsLayer runtime);

    // Runs once the value is known valid and new: throws to refuse (the
    // caller's authorization check).
    using Authorize = std::function<void()>;

    std::optional<Refusal> set_mode(const std::string& name, const Authorize& authorize);
    std::optional<Refusal> set_time_quantum(uint64_t usec, const Authorize& authorize);
    std::optional<Refusal> set_capacity(GpuIndex gpu, uint64_t bytes, const Authorize& authorize);
    // A GPU's own mode and time quantum, which it keeps whatever the
    // host-wide ones become.
    std::optional<Refusal> set_gpu_mode(GpuIndex gpu, const std::string& name,
                                        const Authorize& authorize);
    std::optional<Refusal> set_gpu_time_quantum(GpuIndex gpu, uint64_t usec,
                                                const Authorize& authorize);
    // Forgets every run-time change and applies the configured settings.
    std::optional<Refusal> reset(const Authorize& authorize);
    // Forgets the run-time changes of one GPU (capacity, mode, time
    // quantum): it gets its configured ones back.
    std::optional<Refusal> reset_gpu(GpuIndex gpu, const Authorize& authorize);

    // The configuration read again (SIGHUP): `configured` becomes what
    // reset() returns to, and the effective settings are it with the
    // run-time changes on top, applied where they differ.
    void reload(Options configured);

    const SettingsLayer& runtime() const { return runtime_; }

private:
    // Saves `next` as the run-time layer; a Refusal when it cannot.
    std::optional<Refusal> save(const SettingsLayer& next);
    // Gives the GPU `uuid` the mode, time quantum and capacity of `target`
    // wherever its effective ones differ; apply_all: the host-wide ones too,
    // and every GPU.
    void apply(const std::string& uuid, const Options& target);
    void apply_all(const Options& target);
    // One setting into the scheduler, then the target's one path after a
    // change (SettingsTarget::after_settings_change). A GPU's own mode or time
    // quantum: nullopt, it follows the host-wide one again.
    void apply_mode(Mode mode);
    void apply_time_quantum(Duration tq);
    void apply_capacity(GpuIndex gpu, uint64_t bytes);
    void apply_gpu_mode(const std::string& uuid, std::optional<Mode> mode);
    void apply_gpu_time_quantum(const std::string& uuid, std::optional<Duration> tq);

    Scheduler& scheduler() { return target_.settings_scheduler(); }

    SettingsTarget& target_;
    StateStore store_;
    Options configured_;
    SettingsLayer runtime_;
};

}  // namespace nvshare::daemon
