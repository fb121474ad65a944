// nvshared on the system bus: the connection, driven by the daemon's own
// sd-event loop (no thread), the objects of bus_objects.h, and the
// PropertiesChanged signals for whatever changed since the last ones.
#pragma once

#include <sdbus-c++/sdbus-c++.h>
#include <systemd/sd-event.h>

#include <memory>
#include <vector>

#include "daemon/bus_objects.h"
#include "daemon/server.h"
#include "daemon/settings_control.h"

namespace nvshare::daemon {

class BusService {
public:
    // Connects, registers the objects, requests the name and hooks into the
    // server's loop. Null, after one warning, when that fails: the lock is
    // served all the same.
    static std::unique_ptr<BusService> start(Server& server, SettingsControl& control);
    ~BusService();
    BusService(const BusService&) = delete;
    BusService& operator=(const BusService&) = delete;

private:
    struct ManagerValues {
        uint64_t time_quantum_us = 0;
        Mode mode = Mode::Auto;
        size_t clients = 0;
        bool operator==(const ManagerValues&) const = default;
    };
    struct GpuValues {
        uint64_t physical = 0;  // 0 until a client reports the GPU's memory
        uint64_t capacity = 0;
        uint64_t time_quantum_us = 0;
        bool own_time_quantum = false;
        Mode mode = Mode::Auto;
        bool own_mode = false;
        uint64_t requested = 0;
        bool serializing = false;
        std::vector<ClientId> holders;
        std::vector<ClientId> queue;
        bool operator==(const GpuValues&) const = default;
    };

    BusService(Server& server, SettingsControl& control,
               std::unique_ptr<sdbus::IConnection> connection);
    bool attach(sd_event* event);
    void process();
    void on_state_changed();
    void on_event(const Event& event);
    template <typename Emit>
    void emit(const char* what, Emit&& emit_signal);
    void shut_down(const char* why);
    ManagerValues manager_values() const;
    GpuValues gpu_values(GpuIndex gpu) const;
    static int on_io(sd_event_source* s, int fd, uint32_t revents, void* self);
    static int on_timer(sd_event_source* s, uint64_t usec, void* self);
    static int on_prepare(sd_event_source* s, void* self);

    Server& server_;
    SettingsControl& control_;
    std::unique_ptr<sdbus::IConnection> connection_;
    std::unique_ptr<BusAuthorizer> authorizer_;  // callers' uids and polkit's verdicts
    std::unique_ptr<ManagerObject> manager_;
    std::vector<std::unique_ptr<GpuObject>> gpus_;
    // What the last signals said, to emit only what changed.
    ManagerValues manager_sent_;
    std::vector<GpuValues> gpus_sent_;
    sd_event_source* io_source_ = nullptr;
    sd_event_source* timer_source_ = nullptr;
    bool broken_ = false;
};

}  // namespace nvshare::daemon
