// The objects nvshared puts on the system bus, implementing the adaptors
// generated from dbus/org.nvshare.Scheduler1.xml. Getters read the Scheduler.
// The Set* methods, ResetSettings and RevokeClient check the request, ask
// BusAuthorizer (asynchronously) and reply once it answered, checking the
// request again before it goes through SettingsControl or the Server;
// property writes are for root. All of it runs on the daemon's loop thread
// and none of it waits there, but for a property write's one call to the
// bus driver (the writer's uid).
#pragma once

#include <sdbus-c++/sdbus-c++.h>

#include <memory>

#include "daemon/bus_authorizer.h"
#include "daemon/server.h"
#include "daemon/settings_control.h"
#include "dbus/scheduler1-adaptor.h"

namespace nvshare::daemon {

inline constexpr const char* kBusName = "org.nvshare.Scheduler1";
inline constexpr const char* kManagerPath = "/org/nvshare/Scheduler1";
std::string gpu_object_path(GpuIndex gpu);

class ManagerObject final
    : public sdbus::AdaptorInterfaces<org::nvshare::Scheduler1::Manager_adaptor,
                                      sdbus::Properties_adaptor, sdbus::ObjectManager_adaptor> {
public:
    ManagerObject(sdbus::IConnection& connection, Server& server, SettingsControl& control,
                  BusAuthorizer& authorizer);
    ~ManagerObject();

private:
    using ClientRow = sdbus::Struct<uint64_t, int32_t, uint32_t, std::string, std::string,
                                    std::vector<uint32_t>, uint64_t, uint64_t, uint64_t>;
    void SetTimeQuantum(sdbus::Result<>&& result, uint64_t usec, bool interactive) override;
    void SetAntiThrashing(sdbus::Result<>&& result, std::string mode, bool interactive) override;
    void ListClients(sdbus::Result<std::vector<ClientRow>>&& result) override;
    void GetStatus(sdbus::Result<std::string>&& result) override;
    void RevokeClient(sdbus::Result<>&& result, uint64_t id) override;
    void ResetSettings(sdbus::Result<>&& result) override;
    std::vector<ClientRow> client_rows() const;
    std::string Version() override;
    uint64_t TimeQuantumUSec() override;
    void TimeQuantumUSec(const uint64_t& value) override;
    std::string AntiThrashing() override;
    void AntiThrashing(const std::string& value) override;
    uint64_t GraceUSec() override;
    uint32_t ClientCount() override;

    Server& server_;
    SettingsControl& control_;
    BusAuthorizer& authorizer_;
};

class GpuObject final
    : public sdbus::AdaptorInterfaces<org::nvshare::Scheduler1::Gpu_adaptor,
                                      sdbus::Properties_adaptor, sdbus::ManagedObject_adaptor> {
public:
    GpuObject(sdbus::IConnection& connection, Server& server, SettingsControl& control,
              BusAuthorizer& authorizer, GpuIndex index);
    ~GpuObject();

private:
    using ClientRow = sdbus::Struct<uint64_t, int32_t, uint32_t, std::string, std::string, uint64_t,
                                    uint64_t, uint64_t>;
    const Gpu& gpu() const;
    uint32_t Index() override;
    std::string UUID() override;
    std::string Name() override;
    uint64_t PhysicalMemory() override;
    uint64_t Capacity() override;
    void Capacity(const uint64_t& value) override;
    uint64_t TimeQuantumUSec() override;
    void TimeQuantumUSec(const uint64_t& value) override;
    bool OwnTimeQuantum() override;
    std::string AntiThrashing() override;
    void AntiThrashing(const std::string& value) override;
    bool OwnAntiThrashing() override;
    void ResetSettings(sdbus::Result<>&& result) override;
    void SetCapacity(sdbus::Result<>&& result, uint64_t bytes, bool interactive) override;
    void SetTimeQuantum(sdbus::Result<>&& result, uint64_t usec, bool interactive) override;
    void SetAntiThrashing(sdbus::Result<>&& result, std::string mode, bool interactive) override;
    uint64_t RequestedMemory() override;
    bool Serializing() override;
    std::vector<uint64_t> Holders() override;
    std::vector<uint64_t> Queue() override;
    std::vector<ClientRow> Clients() override;

    Server& server_;
    SettingsControl& control_;
    BusAuthorizer& authorizer_;
    GpuIndex index_;
};

}  // namespace nvshare::daemon
