// The current wait for the lock as the user sees it: what nvshared said
// about each GPU (Waiting), a line on stderr when the wait outlasts
// NVSHARE_WAIT_NOTICE_MS (and again every 30 s), and one when the lock
// comes after an announced wait. Client thread only.
#pragma once

#include <cstdint>
#include <optional>

#include "common/protocol.h"
#include "preload/memory/devices.h"

namespace nvshare::preload {

class WaitAnnouncer {
public:
    // A request was sent at `now` for `gpu_count` GPUs.
    void begin(uint64_t now, uint32_t gpu_count);
    // nvshared's word on one GPU (already checked: gpu < gpu_count).
    void waiting(const proto::WaitingPayload& w, uint64_t now);
    // When to print that we still wait; none if never.
    std::optional<uint64_t> next_notice() const { return next_notice_; }
    // Prints the line (at or after next_notice()).
    void announce(uint64_t now);
    // The lock came for `gpus`: say so if the wait was announced.
    void granted(uint64_t gpus, uint64_t now);
    // The wait ended otherwise (revoked): nothing more to say.
    void cancel() { next_notice_.reset(); }
    // A new connection: no wait, none announced.
    void reset()
    {
        next_notice_.reset();
        announced_ = false;
    }

private:
    const char* user_name(uint32_t uid);

    uint32_t gpu_count_ = 0;
    uint64_t requested_at_ = 0;
    std::optional<uint64_t> next_notice_;
    bool announced_ = false;  // a waiting line was printed for this wait
    proto::WaitingPayload waits_[devices::kMaxGpus] = {};
    std::optional<uint64_t> received_[devices::kMaxGpus];  // when nvshared said something
    char passwd_[32 * 1024];
    char user_[64];
};

}  // namespace nvshare::preload
