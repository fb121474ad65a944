#include "daemon/authorization.h"

namespace nvshare::daemon {

std::optional<std::string_view> required_action(const Request& request)
{
    if (request.caller == 0)
        return std::nullopt;
    if (request.operation == Operation::ChangeSettings)
        return kActionSetSettings;
    const bool own = request.caller != kUnknownUid && request.caller == request.owner;
    return own ? kActionRevokeOwn : kActionRevoke;
}

std::string denial_message(std::string_view what, std::string_view action, Verdict verdict,
                           std::string_view detail)
{
    std::string m(what);
    m += " needs root or polkit's authorization for ";
    m += action;
    switch (verdict) {
        case Verdict::Allowed:
            break;
        case Verdict::Denied:
            m += ", which polkit denied";
            break;
        case Verdict::Challenge:
            m += ", which polkit grants only after authentication, and nvshared does not ask "
                 "interactively";
            break;
        case Verdict::Unavailable:
            m += ", and polkit is not running";
            break;
        case Verdict::Failed:
            m += ", and asking polkit failed";
            if (!detail.empty()) {
                m += " (";
                m += detail;
                m += ")";
            }
            break;
    }
    return m;
}

}  // namespace nvshare::daemon
