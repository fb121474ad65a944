#include "daemon/action_frames.h"

#include <algorithm>
#include <cstring>

namespace nvshare::daemon {

uint32_t local_index(const ClientRecord& client, GpuSet gpu)
{
    uint32_t index = 0;
    while (index < client.gpus.size() && gpu_bit(client.gpus[index]) != gpu)
        ++index;
    return index;
}

proto::WaitingPayload waiting_payload(const ClientRecord& client, const Action& a,
                                      const ClientRecord* holder, TimePoint now)
{
    const auto us = [](Duration d) { return to_usec(std::max(d, Duration::zero())); };
    proto::WaitingPayload p{};
    p.gpu = local_index(client, a.gpus);
    p.reason = static_cast<uint32_t>(a.wait.reason);
    p.place = a.wait.place;
    if (holder != nullptr) {
        p.holder_pid = holder->info.pid;
        p.holder_uid = holder->info.uid;
        p.held_us = us(now - a.wait.held_since);
        p.quantum_us = us(a.wait.quantum);
        // Printable already; cut at a character boundary to fit.
        const std::string& comm = holder->info.comm;
        size_t n = std::min(comm.size(), sizeof p.holder_comm);
        while (n > 0 && n < comm.size() && (static_cast<uint8_t>(comm[n]) & 0xC0) == 0x80)
            --n;
        memcpy(p.holder_comm, comm.data(), n);
    }
    return p;
}

}  // namespace nvshare::daemon
