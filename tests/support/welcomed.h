// A lock-protocol client in the test's own process (common/lock_client.h)
// that has registered: the one way the suites open one, where they need
// frames or timing that the nvshare-testclient program does not give.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/lock_client.h"

namespace nvshare::test {

// Connected to `socket`, said Hello (as `comm`, with `gpus`, asking for
// `priority`) and got its Welcome; nullopt when it was refused (or got no
// answer within kTimeout).
std::optional<LockClient> welcomed(const std::string& socket, const std::string& comm,
                                   const std::vector<GpuSpec>& gpus,
                                   proto::Priority priority = proto::Priority::Unset);

}  // namespace nvshare::test
