// Asks polkit (org.freedesktop.PolicyKit1) whether a caller on the system bus
// may do an action, over nvshared's own bus connection, without interaction.
//
// The call blocks, bounded by kPolkitTimeout, where systemd's timedated
// answers asynchronously: sdbus-c++ 1.2.0's property setters must finish
// before they return (there is no Result<> form for them), and three of the
// four writes are property writes. One blocking path for all writes is the
// simpler choice. polkitd answers a non-interactive check in milliseconds;
// the timeout bounds how long a hung polkitd can stall the daemon's loop
// (lock traffic included) per refused write. Root never gets here.
#pragma once

#include <sdbus-c++/sdbus-c++.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "daemon/authorization.h"

namespace nvshare::daemon {

inline constexpr std::chrono::seconds kPolkitTimeout{5};

class PolkitAuthority {
public:
    explicit PolkitAuthority(sdbus::IConnection& connection);
    // `sender`: the caller's unique bus name. `detail` gets the bus error's
    // name and text when the verdict is Failed.
    Verdict check(const std::string& sender, std::string_view action, std::string& detail);

private:
    std::unique_ptr<sdbus::IProxy> proxy_;
};

}  // namespace nvshare::daemon
