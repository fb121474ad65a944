// nvsharectl's side of the D-Bus API: its own system-bus connection, proxies
// generated from dbus/org.nvshare.Scheduler1.xml, synchronous calls (no
// event loop thread), and the mapping of bus errors to exit codes.
#pragma once

#include <sdbus-c++/sdbus-c++.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "cli/command.h"
#include "dbus/scheduler1-proxy.h"

namespace nvshare::cli {

inline constexpr const char* kBusName = "org.nvshare.Scheduler1";
inline constexpr const char* kManagerPath = "/org/nvshare/Scheduler1";
inline constexpr const char* kManagerInterface = "org.nvshare.Scheduler1.Manager";
inline constexpr const char* kGpuInterface = "org.nvshare.Scheduler1.Gpu";
// The Set* methods' "interactive" argument: nvsharectl runs no polkit
// authentication agent, so polkit must answer without asking the user.
inline constexpr bool kNoInteraction = false;

// Object path -> interface -> property -> value, as GetManagedObjects says.
using ManagedObjects =
    std::map<sdbus::ObjectPath, std::map<std::string, std::map<std::string, sdbus::Variant>>>;

class ManagerProxy final : public sdbus::ProxyInterfaces<org::nvshare::Scheduler1::Manager_proxy> {
public:
    explicit ManagerProxy(sdbus::IConnection& connection);
    ~ManagerProxy();
    // The manager is also the ObjectManager of the GPU objects.
    ManagedObjects GetManagedObjects();

private:
    // nvsharectl monitor matches the Event signal itself (cli/monitor.cpp).
    void onEvent(const std::string&, const uint64_t&, const int32_t&, const uint32_t&,
                 const std::string&, const std::vector<std::string>&,
                 const std::map<std::string, std::string>&, const std::string&) override
    {
    }
};

class BusClient {
public:
    // Connects to the system bus ($DBUS_SYSTEM_BUS_ADDRESS is honoured).
    // Throws sdbus::Error when there is none.
    BusClient();
    sdbus::IConnection& connection() { return *connection_; }
    ManagerProxy& manager() { return manager_; }
    ManagedObjects managed_objects();
    // The object path of the GPU `gpu` names (its index or UUID, as
    // nvsharectl status shows them); nullopt, after saying so on stderr,
    // when nvshared knows no such GPU.
    std::optional<sdbus::ObjectPath> find_gpu(const std::string& gpu);
    // A proxy of the GPU object at `path`, for its properties and methods.
    std::unique_ptr<sdbus::IProxy> gpu_object(const sdbus::ObjectPath& path);

private:
    std::unique_ptr<sdbus::IConnection> connection_;
    ManagerProxy manager_;
};

// Whether `e` says that nvshared cannot be reached over the bus at all (no
// system bus, or nobody owning the name), rather than that it refused.
bool bus_unreachable(const sdbus::Error& e);

// Prints what went wrong for `e` (what the user tried: `action`) and
// returns the exit code of exit_codes.h that matches it. Where the bus
// cannot reach nvshared and `socket_path` is given, the lock socket says
// whether nvshared runs all the same (then the cause named is the bus).
int report_bus_error(const sdbus::Error& e, const std::string& action,
                     const std::string& socket_path = {});

// Runs `body` with a fresh connection; bus errors become exit codes.
template <typename Body>
int with_bus(const GlobalOptions& options, const std::string& action, Body&& body)
{
    try {
        BusClient bus;
        return body(bus);
    } catch (const sdbus::Error& e) {
        return report_bus_error(e, action, options.socket_path);
    }
}

}  // namespace nvshare::cli
