#include "preload/lock/wait_announcer.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "common/uuid.h"
#include "preload/env.h"
#include "preload/lock/wait_notice.h"
#include "preload/log.h"

namespace nvshare::preload {

namespace {

// A wait that was announced is announced again at most this often.
constexpr uint64_t kWaitNoticeRepeatNs = 30ull * 1000 * 1000 * 1000;

}  // namespace

void WaitAnnouncer::begin(uint64_t now, uint32_t gpu_count)
{
    gpu_count_ = gpu_count;
    requested_at_ = now;
    announced_ = false;
    if (config().wait_notice_ms != 0)
        next_notice_ = now + config().wait_notice_ms * 1000000ull;
    else
        next_notice_.reset();
    for (auto& r : received_)
        r.reset();
}

void WaitAnnouncer::waiting(const proto::WaitingPayload& w, uint64_t now)
{
    waits_[w.gpu] = w;
    waits_[w.gpu].holder_comm[proto::kCommBytes - 1] = '\0';  // printed as a C string
    received_[w.gpu] = now;
}

// One line on stderr about the GPU this process waits for: the first that
// somebody holds, else the first nvshared said anything about.
void WaitAnnouncer::announce(uint64_t now)
{
    uint32_t pick = gpu_count_;
    for (uint32_t i = 0; i < gpu_count_; ++i) {
        if (!received_[i])
            continue;
        if (pick == gpu_count_)
            pick = i;
        if (waits_[i].holder_pid != 0) {
            pick = i;
            break;
        }
    }
    const bool known = pick < gpu_count_;
    const devices::Gpu& gpu = devices::at(known ? pick : 0);
    char uuid[kUuidTextSize];
    format_gpu_uuid(gpu.uuid, uuid);
    WaitContext ctx;
    ctx.ordinal = static_cast<int>(gpu.ordinal);
    ctx.gpu_name = gpu.name;
    ctx.gpu_uuid = uuid;
    ctx.waited_ns = now - requested_at_;
    if (known) {
        ctx.since_frame_ns = now - *received_[pick];
        if (waits_[pick].holder_pid != 0)
            ctx.holder_user = user_name(waits_[pick].holder_uid);
    }
    char line[400];
    format_waiting(line, sizeof line, known ? &waits_[pick] : nullptr, ctx);
    log_warn("%s", line);
    announced_ = true;
    next_notice_ = now + kWaitNoticeRepeatNs;
}

void WaitAnnouncer::granted(uint64_t gpus, uint64_t now)
{
    next_notice_.reset();
    if (!announced_)
        return;
    announced_ = false;
    const uint32_t first = gpus != 0 ? static_cast<uint32_t>(__builtin_ctzll(gpus)) : 0;
    char line[96];
    format_got(line, sizeof line,
               static_cast<int>(devices::at(first < gpu_count_ ? first : 0).ordinal),
               now - requested_at_);
    log_warn("%s", line);
}

// From the passwd file only: NSS modules may block or take locks.
const char* WaitAnnouncer::user_name(uint32_t uid)
{
    user_[0] = '\0';
    const int fd = open(kPasswdPath, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return user_;
    size_t n = 0;
    for (;;) {
        const ssize_t r = read(fd, passwd_ + n, sizeof passwd_ - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += static_cast<size_t>(r);
        if (n == sizeof passwd_)
            break;
    }
    close(fd);
    if (!user_name_in(passwd_, n, uid, user_, sizeof user_))
        user_[0] = '\0';
    return user_;
}

}  // namespace nvshare::preload
