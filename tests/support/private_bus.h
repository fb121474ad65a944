// A private system-like bus: dbus-daemon with tests/dbus/system.conf (which
// includes the shipped policy), and nvshared started on it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tests/support/daemon.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace nvshare::test {

// nvshared's bus name and objects, as dbus/org.nvshare.Scheduler1.xml has them.
inline constexpr const char* kName = "org.nvshare.Scheduler1";
inline constexpr const char* kManager = "/org/nvshare/Scheduler1";
inline constexpr const char* kManagerIface = "org.nvshare.Scheduler1.Manager";
inline constexpr const char* kGpu0 = "/org/nvshare/Scheduler1/gpu/0";
inline constexpr const char* kGpuIface = "org.nvshare.Scheduler1.Gpu";

// dbus-daemon with the config NVSHARE_TEST_BUS_CONFIG names; sets
// DBUS_SYSTEM_BUS_ADDRESS for this process and its children while it lives.
class PrivateBus {
public:
    PrivateBus();
    ~PrivateBus();
    PrivateBus(const PrivateBus&) = delete;
    PrivateBus& operator=(const PrivateBus&) = delete;
    const std::string& address() const { return address_; }
    bool has_owner(const std::string& name) const;

private:
    Process process_;
    std::string address_;
};

// nvshared on `bus` with its socket, state and config (nvshare.conf, created
// empty when absent) in `dir`. Returns once it is ready (it owns kName on
// the bus then) or has exited (check running()).
std::unique_ptr<Daemon> start_nvshared(const TempDir& dir, const PrivateBus& bus,
                                       const std::vector<std::string>& extra = {});

}  // namespace nvshare::test
