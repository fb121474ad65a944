#include "daemon/settings_control.h"

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

// Each change is logged (at notice) and signalled by the Server.
void SettingsControl::set_mode(Mode mode)
{
    server_.set_mode(mode);
    runtime_.mode = mode;
    persist();
}

void SettingsControl::set_time_quantum(Duration tq)
{
    server_.set_time_quantum(tq);
    runtime_.time_quantum = tq;
    persist();
}

void SettingsControl::set_capacity(GpuIndex gpu, uint64_t bytes)
{
    const std::string& uuid = server_.scheduler().gpus().at(gpu).description.uuid;
    server_.set_capacity(gpu, bytes);
    runtime_.capacities[uuid] = bytes;
    persist();
}

void SettingsControl::reset()
{
    NVS_NOTICE("run-time settings reset to the configured ones");
    runtime_ = {};
    store_.clear();
    server_.set_mode(configured_.scheduler.mode);
    server_.set_time_quantum(configured_.scheduler.time_quantum);
    const auto& gpus = server_.scheduler().gpus();
    for (GpuIndex g = 0; g < gpus.size(); ++g)
        server_.set_capacity(g, configured_capacity(configured_, gpus[g].description));
}

void SettingsControl::persist()
{
    store_.save(runtime_);
}

}  // namespace nvshare::daemon
