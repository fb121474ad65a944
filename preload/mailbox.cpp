#include "preload/mailbox.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <climits>

#include "preload/clock.h"

namespace nvshare::preload::mailbox {

namespace {

std::atomic<int> g_event_fd{-1};
std::atomic<bool> g_want{false};
std::atomic<bool> g_yield{false};
std::atomic<bool> g_room{false};
std::atomic<uint32_t> g_ready{0};  // futex word: 1 once settings arrived or we failed open
// 0: not draining (CLOCK_MONOTONIC never reads 0 once the system runs).
std::atomic<uint64_t> g_drain_deadline{0};

}  // namespace

void set_event_fd(int fd)
{
    g_event_fd.store(fd);
}

int event_fd()
{
    return g_event_fd.load();
}

void poke()
{
    const int fd = g_event_fd.load(std::memory_order_acquire);
    if (fd >= 0) {
        const uint64_t one = 1;
        ssize_t unused = write(fd, &one, sizeof one);
        (void)unused;
    }
}

void consume_wakeup()
{
    uint64_t v;
    ssize_t unused = read(g_event_fd.load(), &v, sizeof v);
    (void)unused;
}

void want_lock()
{
    if (!g_want.exchange(true))
        poke();
}

void set_want()
{
    g_want.store(true);
}

void clear_want()
{
    g_want.store(false);
}

bool wanted()
{
    return g_want.load();
}

void want_yield()
{
    if (!g_yield.exchange(true))
        poke();
}

bool take_yield()
{
    return g_yield.exchange(false);
}

void want_room()
{
    if (!g_room.exchange(true))
        poke();
}

bool take_room()
{
    return g_room.exchange(false);
}

void set_ready()
{
    if (g_ready.exchange(1) == 0)
        syscall(SYS_futex, reinterpret_cast<uint32_t*>(&g_ready), FUTEX_WAKE_PRIVATE, INT_MAX,
                nullptr, nullptr, 0);
}

void wait_ready(int timeout_ms)
{
    timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
    const uint64_t deadline = now_ns() + static_cast<uint64_t>(timeout_ms) * 1000000ull;
    while (g_ready.load(std::memory_order_acquire) == 0) {
        const uint64_t now = now_ns();
        if (now >= deadline)
            return;
        const uint64_t left = deadline - now;
        ts.tv_sec = static_cast<time_t>(left / 1000000000ull);
        ts.tv_nsec = static_cast<long>(left % 1000000000ull);
        syscall(SYS_futex, reinterpret_cast<uint32_t*>(&g_ready), FUTEX_WAIT_PRIVATE, 0, &ts,
                nullptr, 0);
    }
}

void drain_until(uint64_t deadline_ns)
{
    g_drain_deadline.store(deadline_ns, std::memory_order_release);
}

void drain_done()
{
    g_drain_deadline.store(0, std::memory_order_release);
}

bool drain_overdue()
{
    const uint64_t deadline = g_drain_deadline.load(std::memory_order_acquire);
    return deadline != 0 && now_ns() > deadline;
}

void reset_after_fork()
{
    const int efd = g_event_fd.exchange(-1);
    if (efd >= 0)
        close(efd);
    g_want.store(false);
    g_yield.store(false);
    g_room.store(false);
    g_ready.store(0);
}

}  // namespace nvshare::preload::mailbox
