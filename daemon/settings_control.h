// Changes to the settings made at run time (over D-Bus): applied through the
// Server, so clients hear of them at once, and recorded in the state file so
// they survive restarts. Validation and authorization are the caller's job.
#pragma once

#include "daemon/options.h"
#include "daemon/server.h"
#include "daemon/settings.h"
#include "daemon/state_store.h"

namespace nvshare::daemon {

class SettingsControl {
public:
    // `configured`: the settings without run-time changes (defaults, config
    // file, command line), what reset() returns to. `runtime`: the changes
    // loaded from `store` at start.
    SettingsControl(Server& server, StateStore store, Options configured, SettingsLayer runtime);

    void set_mode(Mode mode);
    void set_time_quantum(Duration tq);
    void set_capacity(GpuIndex gpu, uint64_t bytes);
    // Forgets every run-time change and applies the configured settings.
    void reset();

    const SettingsLayer& runtime() const { return runtime_; }

private:
    void persist();

    Server& server_;
    StateStore store_;
    Options configured_;
    SettingsLayer runtime_;
};

}  // namespace nvshare::daemon
