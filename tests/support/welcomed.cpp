#include "tests/support/welcomed.h"

#include "tests/support/wait.h"

namespace nvshare::test {

std::optional<LockClient> welcomed(const std::string& socket, const std::string& comm,
                                   const std::vector<GpuSpec>& gpus, proto::Priority priority)
{
    LockClient c;
    std::string error;
    if (!c.connect(socket, &error) || !c.hello(comm, gpus, priority) ||
        !c.expect(proto::MsgType::Welcome, kTimeout))
        return std::nullopt;
    return c;
}

}  // namespace nvshare::test
