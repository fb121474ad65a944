// Asks polkit (org.freedesktop.PolicyKit1) whether a caller on the system bus
// may do an action, over nvshared's own bus connection, asynchronously: the
// answer comes back through the daemon's loop, which serves the lock
// meanwhile (as systemd's timedated does). Root never gets here.
#pragma once

#include <sdbus-c++/sdbus-c++.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "daemon/authorization.h"

namespace nvshare::daemon {

// How long polkitd has to answer a check that may not ask the user, and one
// that may (an authentication agent asks for a password).
inline constexpr std::chrono::seconds kPolkitTimeout{5};
inline constexpr std::chrono::seconds kPolkitInteractiveTimeout{120};

class PolkitAuthority {
public:
    explicit PolkitAuthority(sdbus::IConnection& connection);
    // `detail`: the bus error's name and text when the verdict is Failed.
    using Answer = std::function<void(Verdict verdict, const std::string& detail)>;
    // `sender`: the caller's unique bus name. `interactive`: polkit may ask
    // the user through an authentication agent. `answer` runs exactly once:
    // from the loop when polkit answers or the call times out, or at once
    // (Failed) when the call cannot even be sent.
    void check(const std::string& sender, std::string_view action, bool interactive, Answer answer);

private:
    std::unique_ptr<sdbus::IProxy> proxy_;
};

}  // namespace nvshare::daemon
