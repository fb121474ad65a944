#include "cli/bus_client.h"

#include <cstdio>

#include "cli/exit_codes.h"
#include "common/lock_client.h"

namespace nvshare::cli {

ManagerProxy::ManagerProxy(sdbus::IConnection& connection)
    : ProxyInterfaces(connection, kBusName, kManagerPath)
{
    registerProxy();
}

ManagerProxy::~ManagerProxy()
{
    unregisterProxy();
}

BusClient::BusClient() : connection_(sdbus::createSystemBusConnection()), manager_(*connection_) {}

ManagedObjects ManagerProxy::GetManagedObjects()
{
    ManagedObjects objects;
    getProxy()
        .callMethod("GetManagedObjects")
        .onInterface("org.freedesktop.DBus.ObjectManager")
        .storeResultsTo(objects);
    return objects;
}

ManagedObjects BusClient::managed_objects()
{
    return manager_.GetManagedObjects();
}

std::optional<sdbus::ObjectPath> BusClient::find_gpu(const std::string& gpu)
{
    for (const auto& [path, interfaces] : managed_objects()) {
        const auto it = interfaces.find(kGpuInterface);
        if (it == interfaces.end())
            continue;
        const auto& props = it->second;
        if (std::to_string(props.at("Index").get<uint32_t>()) == gpu ||
            props.at("UUID").get<std::string>() == gpu)
            return path;
    }
    fprintf(stderr,
            "nvsharectl: no GPU '%s' known to nvshared (it knows the GPUs the driver lists "
            "and those its clients use; see nvsharectl status)\n",
            gpu.c_str());
    return std::nullopt;
}

std::unique_ptr<sdbus::IProxy> BusClient::gpu_object(const sdbus::ObjectPath& path)
{
    return sdbus::createProxy(*connection_, kBusName, path);
}

bool bus_unreachable(const sdbus::Error& e)
{
    const std::string& name = e.getName();
    auto is = [&name](const char* prefix) { return name.rfind(prefix, 0) == 0; };
    return name == "org.freedesktop.DBus.Error.ServiceUnknown" ||
           name == "org.freedesktop.DBus.Error.NameHasNoOwner" ||
           name == "org.freedesktop.DBus.Error.NoReply" ||
           name == "org.freedesktop.DBus.Error.Disconnected" ||
           name == "org.freedesktop.DBus.Error.NoServer" ||
           name == "org.freedesktop.DBus.Error.FileNotFound" ||
           name == "org.freedesktop.DBus.Error.TimedOut" ||
           name == "org.freedesktop.DBus.Error.Timeout" || is("org.freedesktop.DBus.Error.Spawn") ||
           is("org.freedesktop.systemd1.") || is("sdbus.Error");
}

int report_bus_error(const sdbus::Error& e, const std::string& action,
                     const std::string& socket_path)
{
    const std::string& name = e.getName();
    const std::string& message = e.getMessage();
    auto is = [&name](const char* prefix) { return name.rfind(prefix, 0) == 0; };
    if (name == "org.freedesktop.DBus.Error.AccessDenied" ||
        name == "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired") {
        fprintf(stderr,
                "nvsharectl: %s: %s\nThis needs root or a polkit rule: try sudo "
                "(org.nvshare.Scheduler1(5), AUTHORIZATION).\n",
                action.c_str(), message.c_str());
        return kAccessDenied;
    }
    if (name == "org.freedesktop.DBus.Error.LimitsExceeded") {
        // nvshared's per-user limits (its message says which, and when to
        // try again).
        fprintf(stderr, "nvsharectl: %s: %s\n", action.c_str(), message.c_str());
        return kAccessDenied;
    }
    if (name == "org.freedesktop.DBus.Error.InvalidArgs") {
        fprintf(stderr, "nvsharectl: %s: %s\n", action.c_str(), message.c_str());
        return kUsage;
    }
    if (name == "org.nvshare.Scheduler1.Error.NoSuchClient" ||
        name == "org.freedesktop.DBus.Error.UnknownObject") {
        fprintf(stderr, "nvsharectl: %s: %s\n", action.c_str(), message.c_str());
        return kNotFound;
    }
    std::string ignored;
    if (bus_unreachable(e) && !socket_path.empty() &&
        !LockClient::query_status(socket_path, &ignored).empty()) {
        fprintf(stderr,
                "nvsharectl: %s: nvshared runs (it answers on %s) but not on the system bus "
                "(%s)\nThis goes over D-Bus only: start a system bus (dbus-daemon --system; "
                ".ci/quickstart service does) and then nvshared again, which joins it when it "
                "starts; or give nvshared its settings when it starts (its options, or "
                "nvshare.conf: nvshared(8)).\n",
                action.c_str(), socket_path.c_str(), message.c_str());
        return kNotRunning;
    }
    if (bus_unreachable(e) && !is("sdbus.Error")) {
        fprintf(stderr,
                "nvsharectl: %s: nvshared is not running (%s)\n"
                "Start it with: systemctl start nvshare\n",
                action.c_str(), message.c_str());
        return kNotRunning;
    }
    if (is("sdbus.Error")) {
        // sdbus-c++'s own errors: here, no system bus to connect to.
        fprintf(stderr,
                "nvsharectl: %s: cannot reach the system bus (%s)\n"
                "Is D-Bus running? nvshared is reached through it; start it with: systemctl "
                "start nvshare\n",
                action.c_str(), message.c_str());
        return kNotRunning;
    }
    fprintf(stderr, "nvsharectl: %s: %s (%s)\n", action.c_str(), message.c_str(), name.c_str());
    return kFailed;
}

}  // namespace nvshare::cli
