#include "daemon/polkit.h"

#include <map>

namespace nvshare::daemon {

namespace {

constexpr const char* kPolkitName = "org.freedesktop.PolicyKit1";
constexpr const char* kAuthorityPath = "/org/freedesktop/PolicyKit1/Authority";
constexpr const char* kAuthorityInterface = "org.freedesktop.PolicyKit1.Authority";

}  // namespace

PolkitAuthority::PolkitAuthority(sdbus::IConnection& connection)
    // A proxy on the daemon's connection: no thread, calls go out on it.
    : proxy_(sdbus::createProxy(connection, kPolkitName, kAuthorityPath))
{
}

Verdict PolkitAuthority::check(const std::string& sender, std::string_view action,
                               std::string& detail)
{
    // polkit identifies the process behind the bus name itself (through the
    // bus driver), so nothing the caller claims is trusted.
    using Subject = sdbus::Struct<std::string, std::map<std::string, sdbus::Variant>>;
    const Subject subject{"system-bus-name", {{"name", sdbus::Variant(sender)}}};
    const std::map<std::string, std::string> details;
    const uint32_t flags = 0;  // no AllowUserInteraction: nobody could answer a prompt
    sdbus::Struct<bool, bool, std::map<std::string, std::string>> result;
    try {
        proxy_->callMethod("CheckAuthorization")
            .onInterface(kAuthorityInterface)
            .withTimeout(kPolkitTimeout)
            .withArguments(subject, std::string(action), details, flags, std::string())
            .storeResultsTo(result);
    } catch (const sdbus::Error& e) {
        if (e.getName() == "org.freedesktop.DBus.Error.ServiceUnknown" ||
            e.getName() == "org.freedesktop.DBus.Error.NameHasNoOwner")
            return Verdict::Unavailable;
        detail = e.getName() + ": " + e.getMessage();
        return Verdict::Failed;
    }
    if (result.get<0>())
        return Verdict::Allowed;
    return result.get<1>() ? Verdict::Challenge : Verdict::Denied;
}

}  // namespace nvshare::daemon
