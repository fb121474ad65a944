// The lines libnvshare.so prints about waiting for the GPU lock and losing
// it: pure text building (no I/O, no allocation), so that tests check the
// wording and the client thread only formats and writes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/protocol.h"

namespace nvshare::preload {

// Where to read user names: /etc/passwd, not NSS, whose modules may block or
// take locks the program holds.
inline constexpr const char* kPasswdPath = "/etc/passwd";

// What the line names besides the daemon's Waiting frame.
struct WaitContext {
    int ordinal = 0;               // the GPU's CUDA ordinal
    const char* gpu_name = "";     // e.g. "NVIDIA H100 80GB HBM3"
    const char* gpu_uuid = "";     // "GPU-..."
    const char* holder_user = "";  // name of holder_uid; "" when not known
    uint64_t waited_ns = 0;        // since this process asked for the GPU
    uint64_t since_frame_ns = 0;   // since the Waiting frame arrived
};

// "waiting for GPU 0 (NAME, UUID) for 2.0 s: held by pid 456 (python3,
// user alice) for 12.0 s of its 30 s quantum; 2nd in line; why: mode on,
// processes take turns". w == nullptr: the daemon did not say why (an older
// nvshared). Returns the length written (always NUL-terminated).
size_t format_waiting(char* out, size_t size, const proto::WaitingPayload* w,
                      const WaitContext& ctx);

// "got GPU 0 after 9.1 s".
size_t format_got(char* out, size_t size, int ordinal, uint64_t waited_ns);

// Why nvshared took the lock away, for proto::RevokeCauseCode (0: not said).
const char* revoke_cause_text(uint32_t cause);

// The name of `uid` in passwd-format text; false if it is not there.
bool user_name_in(const char* passwd, size_t length, uint32_t uid, char* out, size_t size);

}  // namespace nvshare::preload
