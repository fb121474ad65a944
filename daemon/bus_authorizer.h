// Who is calling over D-Bus, and whether they may: the caller's uid from the
// bus driver and polkit's verdict, both asked asynchronously, under the
// per-caller limits of caller_limits.h. Nothing here blocks the daemon's
// loop; every answer comes back through it.
#pragma once

#include <sdbus-c++/sdbus-c++.h>
#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "daemon/authorization.h"
#include "daemon/caller_limits.h"
#include "daemon/polkit.h"

namespace nvshare::daemon {

inline constexpr const char* kAccessDenied = "org.freedesktop.DBus.Error.AccessDenied";
inline constexpr const char* kLimitsExceeded = "org.freedesktop.DBus.Error.LimitsExceeded";

class BusAuthorizer {
public:
    explicit BusAuthorizer(sdbus::IConnection& connection);

    // `uid` of the bus name `sender`, or nullopt (and why, in `error`) when
    // the bus driver cannot say. Runs `done` later, from the loop.
    using UidAnswer = std::function<void(std::optional<uid_t> uid, const sdbus::Error* error)>;
    void caller_uid(const std::string& sender, UidAnswer done);

    // Whether `sender` may do `request` (its caller field is filled in
    // here): root may; anyone else needs polkit's yes for the action the
    // request needs. `done` gets null when allowed, else the error to reply
    // with (AccessDenied, or LimitsExceeded when the caller's limits refuse
    // it without asking). `what` names the request in messages and the log.
    using Outcome = std::function<void(const sdbus::Error* refusal)>;
    void authorize(const std::string& sender, Request request, bool interactive,
                   const std::string& what, Outcome done);

    // A write decided without polkit (a property written by someone other
    // than root): logged and charged like a refusal; returns the error.
    sdbus::Error refuse(uid_t uid, const std::string& message);

private:
    void ask_polkit(const std::string& sender, const Request& request, bool interactive,
                    const std::string& what, const Outcome& done);
    sdbus::Error refusal(uid_t uid, const char* name, const std::string& message);

    std::unique_ptr<sdbus::IProxy> bus_driver_;
    PolkitAuthority polkit_;
    CallerLimits limits_;
};

}  // namespace nvshare::daemon
