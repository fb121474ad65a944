#include "daemon/polkit.h"

#include <map>

namespace nvshare::daemon {

namespace {

constexpr const char* kPolkitName = "org.freedesktop.PolicyKit1";
constexpr const char* kAuthorityPath = "/org/freedesktop/PolicyKit1/Authority";
constexpr const char* kAuthorityInterface = "org.freedesktop.PolicyKit1.Authority";
constexpr uint32_t kAllowUserInteraction = 1;

using AuthorizationResult = sdbus::Struct<bool, bool, std::map<std::string, std::string>>;

Verdict verdict_of(const sdbus::Error* error, const AuthorizationResult& result,
                   std::string& detail)
{
    if (error != nullptr) {
        if (error->getName() == "org.freedesktop.DBus.Error.ServiceUnknown" ||
            error->getName() == "org.freedesktop.DBus.Error.NameHasNoOwner")
            return Verdict::Unavailable;
        detail = error->getName() + ": " + error->getMessage();
        return Verdict::Failed;
    }
    if (result.get<0>())
        return Verdict::Allowed;
    return result.get<1>() ? Verdict::Challenge : Verdict::Denied;
}

}  // namespace

PolkitAuthority::PolkitAuthority(sdbus::IConnection& connection)
    // A proxy on the daemon's connection: no thread; replies are handled
    // when the loop processes the connection.
    : proxy_(sdbus::createProxy(connection, kPolkitName, kAuthorityPath))
{
}

void PolkitAuthority::check(const std::string& sender, std::string_view action, bool interactive,
                            Answer answer)
{
    // polkit identifies the process behind the bus name itself (through the
    // bus driver), so nothing the caller claims is trusted.
    using Subject = sdbus::Struct<std::string, std::map<std::string, sdbus::Variant>>;
    const Subject subject{"system-bus-name", {{"name", sdbus::Variant(sender)}}};
    const std::map<std::string, std::string> details;
    const uint32_t flags = interactive ? kAllowUserInteraction : 0;
    try {
        proxy_->callMethodAsync("CheckAuthorization")
            .onInterface(kAuthorityInterface)
            .withTimeout(interactive ? kPolkitInteractiveTimeout : kPolkitTimeout)
            .withArguments(subject, std::string(action), details, flags, std::string())
            .uponReplyInvoke([answer](const sdbus::Error* error, AuthorizationResult result) {
                std::string detail;
                const Verdict v = verdict_of(error, result, detail);
                answer(v, detail);
            });
    } catch (const sdbus::Error& e) {
        // Not even sent (the connection broke): the same answer, from here.
        answer(Verdict::Failed, e.getName() + ": " + e.getMessage());
    }
}

}  // namespace nvshare::daemon
