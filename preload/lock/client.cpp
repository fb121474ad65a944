#include "preload/lock/client.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstring>
#include <new>

#include "common/codec.h"
#include "common/uuid.h"
#include "preload/memory/alloc.h"
#include "preload/clock.h"
#include "preload/memory/contexts.h"
#include "preload/memory/devices.h"
#include "preload/env.h"
#include "preload/lock/gate.h"
#include "preload/lock/idle_gaps.h"
#include "preload/log.h"
#include "preload/memory/residency.h"
#include "preload/lock/wait_notice.h"

namespace nvshare::preload::client {

namespace {

constexpr uint32_t kBackoffFirstMs = 500;
constexpr uint32_t kBackoffMaxMs = 10000;
constexpr uint64_t kReportPeriodNs = 20ull * 1000 * 1000;
constexpr uint64_t kWelcomeTimeoutNs = 5ull * 1000 * 1000 * 1000;
constexpr uint64_t kCapturePollNs = 5ull * 1000 * 1000;
// How often a process that uses graph memory has its pools looked at.
constexpr uint64_t kGraphPollNs = 200ull * 1000 * 1000;

enum Started { kNotStarted = 0, kStarting = 1, kRunning = 2, kFailed = 3 };

std::atomic<int> g_started{kNotStarted};
std::atomic<int> g_event_fd{-1};
std::atomic<int> g_socket_fd{-1};
std::atomic<bool> g_want{false};
std::atomic<uint32_t> g_ready{0};  // futex word: 1 once settings arrived or we failed open
// While the client thread drains: when the drain should be over at the latest
// (0: not draining). Waiting threads fail open past it (see gate.cpp).
std::atomic<uint64_t> g_drain_deadline{0};
constexpr uint64_t kIdleDrainLimitNs = 10ull * 1000 * 1000 * 1000;
// An early release waits at most this long for its eviction to finish.
constexpr uint64_t kEvictLimitNs = 10ull * 1000 * 1000 * 1000;
// A drain that takes longer than this found GPU work still in flight.
constexpr uint64_t kInFlightNs = 1ull * 1000 * 1000;
// How often a holder that lets go sooner than the idle period looks whether
// its work ran out.
constexpr uint64_t kQuickCheckNs = 2ull * 1000 * 1000;
// How often completion of a bulk prefetch is looked for.
constexpr uint64_t kSwapPollNs = 2ull * 1000 * 1000;
// The program's work waits at most this long for a swap-in to finish.
constexpr uint64_t kSwapInGateLimitNs = 5ull * 1000 * 1000 * 1000;
// A wait that was announced is announced again at most this often.
constexpr uint64_t kWaitNoticeRepeatNs = 30ull * 1000 * 1000 * 1000;
bool g_atfork_registered = false;

void set_ready()
{
    if (g_ready.exchange(1) == 0)
        syscall(SYS_futex, reinterpret_cast<uint32_t*>(&g_ready), FUTEX_WAKE_PRIVATE, INT_MAX,
                nullptr, nullptr, 0);
}

// Everything one connection to nvshared knows.
struct Session {
    int fd = -1;
    bool welcomed = false;
    bool holding = false;
    bool requested = false;
    bool contended = false;
    bool oversubscribed = false;  // the daemon's latest word on our GPUs
    uint64_t keep_bytes = 0;      // managed memory we may leave there when we let go
    bool drop_pending = false;
    uint64_t open_after_swap_in = 0;  // deadline: the gate opens when our data is back
    uint32_t gpu_count = 0;           // GPUs named in our Hello
    uint32_t generation = 0;          // devices::generation() at Hello
    uint64_t connected_at = 0;
    uint64_t drop_deadline = 0;
    uint64_t next_idle_check = 0;
    uint64_t quiet_since = 0;  // when ACTIVE was last cleared: no work submitted since
    uint64_t last_report = 0;
    uint64_t last_graph_check = 0;
    // The current wait for the lock, and what nvshared said about it.
    uint64_t requested_at = 0;
    uint64_t next_notice = 0;   // when to print that we still wait (0: never)
    bool announced = false;     // a waiting line was printed for this wait
    uint32_t revoke_cause = 0;  // from the RevokeCause before a Revoked
    proto::WaitingPayload waits[devices::kMaxGpus] = {};
    uint64_t wait_received[devices::kMaxGpus] = {};  // 0: nothing said about the GPU
};

class Client {
public:
    void run();

private:
    bool connect_and_hello();
    void disconnect();
    void fail_open(const char* reason);
    bool send_bytes(const uint8_t* frame, size_t size);
    template <typename Payload>
    bool send(proto::MsgType type, const Payload& payload);
    bool send_mask(proto::MsgType type);
    bool read_frames();
    bool handle(proto::MsgType type, const uint8_t* payload, uint32_t length);
    void apply_settings(const proto::Settings& s);
    void release(uint64_t deadline);
    bool drain(uint64_t deadline);
    void report_stats();
    void work(uint64_t now);
    int timeout_ms(uint64_t now) const;
    void wait_event(int timeout);
    void announce_wait(uint64_t now);
    void end_wait(uint64_t gpus, uint64_t now);
    const char* user_name(uint32_t uid);

    Session s_;
    char passwd_[32 * 1024];
    char user_[64];
    IdleGaps gaps_;  // kept across connections: a property of the program
    size_t in_len_ = 0;
    uint8_t in_[64 * 1024];
    bool failing_ = false;
    uint32_t backoff_ms_ = kBackoffFirstMs;
    uint64_t retry_at_ = 0;
};

bool Client::send_bytes(const uint8_t* frame, size_t size)
{
    size_t sent = 0;
    while (size != 0 && sent < size) {
        const ssize_t w = ::send(s_.fd, frame + sent, size - sent, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        sent += static_cast<size_t>(w);
    }
    return size != 0;
}

template <typename Payload>
bool Client::send(proto::MsgType type, const Payload& payload)
{
    uint8_t frame[proto::frame_size(sizeof(Payload))];
    return send_bytes(frame, proto::encode(type, payload, frame, sizeof frame));
}

bool Client::send_mask(proto::MsgType type)
{
    const proto::GpuMaskPayload p{s_.gpu_count >= 64 ? ~0ull : (1ull << s_.gpu_count) - 1};
    return send(type, p);
}

bool Client::connect_and_hello()
{
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    static_assert(sizeof addr.sun_path == sizeof config().socket_path);
    memcpy(addr.sun_path, config().socket_path, sizeof addr.sun_path);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) {
        log_debug("cannot connect to %s: %s", addr.sun_path, strerror(errno));
        close(fd);
        return false;
    }
    s_ = Session{};
    in_len_ = 0;
    s_.fd = fd;
    g_socket_fd.store(fd);
    s_.connected_at = now_ns();
    s_.generation = devices::generation();
    s_.gpu_count = devices::count();

    proto::Hello hello{};
    hello.gpu_count = s_.gpu_count;
    char comm[17] = {};
    prctl(PR_GET_NAME, comm);
    memcpy(hello.comm, comm, sizeof hello.comm);
    for (uint32_t i = 0; i < s_.gpu_count; ++i) {
        const devices::Gpu& g = devices::at(i);
        proto::HelloGpu& h = hello.gpus[i];
        memcpy(h.uuid, g.uuid, sizeof h.uuid);
        h.physical_memory = g.physical_memory;
        memcpy(h.name, g.name, sizeof h.name);
        devices::at(i).dirty.store(true);       // the new session gets every report
        devices::at(i).others_pinned.store(0);  // until this session's daemon says
    }
    uint8_t frame[proto::frame_size(sizeof(proto::HelloFixed) +
                                    proto::kMaxGpusPerClient * sizeof(proto::HelloGpu))];
    if (!send_bytes(frame, proto::encode(hello, frame, sizeof frame))) {
        disconnect();
        return false;
    }
    log_debug("registered with %s: %u GPU(s)", addr.sun_path, s_.gpu_count);
    return true;
}

void Client::disconnect()
{
    if (s_.fd >= 0) {
        g_socket_fd.store(-1);
        close(s_.fd);
    }
    s_.fd = -1;
    s_.welcomed = s_.holding = s_.requested = s_.drop_pending = false;
}

void Client::fail_open(const char* reason)
{
    gate_open();
    set_ready();
    if (!failing_) {
        failing_ = true;
        log_warn("%s (%s): GPU work runs unscheduled until nvshared is back", reason,
                 config().socket_path);
    }
}

void Client::apply_settings(const proto::Settings& s)
{
    for (uint32_t i = 0; i < s.gpu_count && i < s_.gpu_count; ++i)
        devices::at(i).capacity.store(s.capacities[i], std::memory_order_release);
    log_debug("settings: mode %s, time quantum %llu us", proto::mode_name(s.mode),
              static_cast<unsigned long long>(s.time_quantum_us));
}

bool Client::handle(proto::MsgType type, const uint8_t* p, uint32_t length)
{
    using proto::MsgType;
    const uint64_t now = now_ns();
    uint32_t expected = 0;
    if (proto::fixed_payload_size(type, &expected) && expected != length)
        return false;
    switch (type) {
        case MsgType::Welcome: {
            proto::Welcome w;
            if (!proto::decode(p, length, &w))
                return false;
            apply_settings(w.settings);
            s_.welcomed = true;
            set_ready();
            return true;
        }
        case MsgType::Settings: {
            proto::Settings st;
            if (!proto::decode(p, length, &st))
                return false;
            apply_settings(st);
            return true;
        }
        case MsgType::Grant: {
            proto::GrantPayload g{};
            proto::decode(p, length, &g);
            s_.holding = true;
            s_.requested = false;
            s_.drop_pending = false;
            s_.contended = (g.flags & proto::kGrantContended) != 0;
            s_.oversubscribed = (g.flags & proto::kGrantOversubscribed) != 0;
            // Somebody already waits: nvshared says what fits beside them.
            s_.keep_bytes = s_.contended ? proto::keep_from_wire(g.keep_mib) : 0;
            s_.next_idle_check = now + config().idle_release_ms * 1000000ull;
            s_.quiet_since = now;
            g_want.store(false);
            end_wait(g.gpus, now);
            if (residency::on_grant(g.gpus, s_.oversubscribed)) {
                // Our data was evicted: kernels that ran now would fault it
                // in page by page, far slower than the bulk prefetch, and
                // slow the prefetch down. They wait for it instead.
                s_.open_after_swap_in = now + kSwapInGateLimitNs;
            } else {
                gate_open();  // work proceeds while new data streams in behind it
            }
            log_debug("lock granted%s", s_.contended ? " (contended)" : "");
            return true;
        }
        case MsgType::Drop: {
            proto::DropPayload d{};
            proto::decode(p, length, &d);
            gate_close();  // stop admitting work at once; drained in work()
            s_.open_after_swap_in = 0;
            s_.oversubscribed = (d.flags & proto::kGrantOversubscribed) != 0;
            s_.keep_bytes = proto::keep_from_wire(d.keep_mib);
            if (s_.holding) {
                s_.drop_pending = true;
                s_.drop_deadline = now + d.grace_us * 1000 * 3 / 4;
            }
            log_debug("drop requested (grace %llu us): %s",
                      static_cast<unsigned long long>(d.grace_us),
                      (d.flags & proto::kDropTurnsBegin) != 0
                          ? "the GPU is now taken in turns"
                          : "the time quantum is over and others wait");
            return true;
        }
        case MsgType::RevokeCause: {
            proto::RevokeCausePayload r{};
            proto::decode(p, length, &r);
            s_.revoke_cause = r.cause;
            return true;
        }
        case MsgType::Revoked:
            gate_close();
            s_.holding = s_.requested = s_.drop_pending = false;
            s_.open_after_swap_in = 0;
            s_.next_notice = 0;
            log_warn("nvshared revoked the GPU lock: %s", revoke_cause_text(s_.revoke_cause));
            s_.revoke_cause = 0;
            return true;
        case MsgType::Waiting: {
            proto::WaitingPayload w{};
            proto::decode(p, length, &w);
            if (w.gpu >= s_.gpu_count)
                return false;
            w.holder_comm[proto::kCommBytes - 1] = '\0';  // printed as a C string
            s_.waits[w.gpu] = w;
            s_.wait_received[w.gpu] = now;
            return true;
        }
        case MsgType::Contended: {
            proto::GrantPayload c{};
            proto::decode(p, length, &c);
            s_.contended = true;
            s_.oversubscribed = (c.flags & proto::kGrantOversubscribed) != 0;
            s_.keep_bytes = proto::keep_from_wire(c.keep_mib);
            return true;
        }
        case MsgType::Unpageable: {
            proto::UnpageablePayload u{};
            proto::decode(p, length, &u);
            if (u.gpu >= s_.gpu_count)
                return false;
            devices::at(u.gpu).others_pinned.store(u.others_pinned_bytes);
            return true;
        }
        case MsgType::Error: {
            proto::ErrorReply e{};
            char text[160] = {};
            if (proto::decode(p, length, &e))
                memcpy(text, e.text,
                       e.text_length < sizeof text - 1 ? e.text_length : sizeof text - 1);
            log_warn("nvshared refused this process: %s", text);
            return false;
        }
        default:
            return true;  // Status and future types: nothing to do
    }
}

// false: the connection is gone or spoke nonsense.
bool Client::read_frames()
{
    {
        ssize_t n;
        do
            n = ::read(s_.fd, in_ + in_len_, sizeof in_ - in_len_);
        while (n < 0 && errno == EINTR);
        if (n <= 0)
            return false;
        in_len_ += static_cast<size_t>(n);
        size_t off = 0;
        for (;;) {
            proto::FrameHeader h{};
            const auto st =
                proto::decode_header(in_ + off, in_len_ - off, sizeof in_ - sizeof h, &h);
            if (st == proto::DecodeStatus::NeedMore)
                break;
            if (st != proto::DecodeStatus::Ok)
                return false;
            if (!proto::frame_complete(h, in_len_ - off))
                break;
            if (!handle(static_cast<proto::MsgType>(h.type), in_ + off + sizeof h, h.length))
                return false;
            off += sizeof h + h.length;
        }
        memmove(in_, in_ + off, in_len_ - off);
        in_len_ -= off;
        // One read per wake-up is enough: poll tells us when there is more.
        return true;
    }
}

bool Client::drain(uint64_t deadline)
{
    log_debug("draining: waiting for this process's GPU work");
    g_drain_deadline.store(deadline, std::memory_order_release);
    // Calls admitted before the gate closed may still be putting work on the
    // GPU: synchronising before they are out would miss that work.
    if ((g_gate.load(std::memory_order_acquire) & kGateOpen) == 0 && !gate_wait_in_flight(deadline))
        log_debug("a driver call admitted before the drop is still running");
    const bool done = contexts::drain_all();
    g_drain_deadline.store(0, std::memory_order_release);
    return done;
}

// Gate closed and drained: move our data off an oversubscribed GPU (so the
// next holder finds it free), then say so.
void Client::release(uint64_t deadline)
{
    const uint64_t all = s_.gpu_count >= 64 ? ~0ull : (1ull << s_.gpu_count) - 1;
    residency::before_release(all, s_.oversubscribed, s_.keep_bytes, deadline);
    send_mask(proto::MsgType::Released);
    s_.holding = s_.requested = s_.drop_pending = false;
    report_stats();
}

void Client::report_stats()
{
    for (uint32_t i = 0; i < s_.gpu_count; ++i) {
        residency::Stats& st = residency::stats(i);
        if (!st.dirty)
            continue;
        const proto::StatsPayload p{i,
                                    0,
                                    st.bytes_prefetched,
                                    st.bytes_evicted,
                                    st.swap_ins,
                                    st.swap_in_ns / 1000,
                                    st.swap_outs,
                                    st.swap_out_ns / 1000};
        if (send(proto::MsgType::Stats, p))
            st.dirty = false;
    }
}

void Client::work(uint64_t now)
{
    if (!s_.welcomed)
        return;
    // A drop: drain every context, then say so; wait for captures to end
    // first (synchronising would invalidate them) unless the grace runs out.
    if (s_.drop_pending) {
        if (contexts::active_captures() == 0 || now >= s_.drop_deadline) {
            drain(s_.drop_deadline + kCapturePollNs);
            gate_close();  // a waiter may have failed open during a stuck drain
            release(s_.drop_deadline + kCapturePollNs);
            log_debug("released after a drop request");
        }
    }
    // Early release: when others wait and the GPU has gone idle, hand it on
    // now rather than at the end of the quantum. How long to stay idle first
    // is IdleGaps' call: what a switch would cost (evicting our data and
    // bringing it back), at least the idle period, until this process's
    // pauses have shown which of them outlast that.
    const uint64_t period = config().idle_release_ms * 1000000ull;
    if (s_.holding && !s_.drop_pending && s_.contended && period != 0 &&
        s_.open_after_swap_in == 0 && now >= s_.next_idle_check) {
        const uint64_t hold =
            gaps_.hold_for(residency::switch_cost_ns(s_.oversubscribed, s_.keep_bytes), period);
        // A process that lets go sooner than the period is watched closely,
        // so that the end of its burst is seen when it comes, not up to two
        // periods later.
        s_.next_idle_check =
            now + (hold < period && period > kQuickCheckNs ? kQuickCheckNs : period);
        const uint32_t st = g_gate.load(std::memory_order_acquire);
        if (contexts::active_captures() > 0) {
            // never release (and sync) in the middle of a capture
        } else if (st & kGateActive) {
            g_gate.fetch_and(~kGateActive, std::memory_order_acq_rel);
            gaps_.resumed(gate_active_at());
            s_.quiet_since = now;
        } else if (now - s_.quiet_since < hold) {
            const uint64_t at = s_.quiet_since + hold;
            s_.next_idle_check = at < s_.next_idle_check ? s_.next_idle_check : at;
        } else if (drain(now + kIdleDrainLimitNs)) {
            const uint64_t drained = now_ns();
            // Work submitted earlier that was still running means the GPU has
            // been idle only from now on (a burst queued at once and then
            // waited for is not idleness).
            const bool was_busy = drained - now > kInFlightNs;
            uint32_t expected = kGateOpen;  // still idle: nobody set ACTIVE
            if ((g_gate.load(std::memory_order_acquire) & kGateActive) == 0) {
                gaps_.idle_since(was_busy ? drained : now);
                if (was_busy && hold != 0) {
                    s_.quiet_since = drained;
                    s_.next_idle_check = drained + hold;
                } else if (g_gate.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) {
                    const uint64_t idle = was_busy ? 0 : drained - s_.quiet_since;
                    release(now + kEvictLimitNs);
                    log_debug("released early: idle for %llu ms",
                              static_cast<unsigned long long>(idle / 1000000));
                }
            }  // else work came in while we drained: the next check sees it
        }
    }
    if (residency::poll())
        report_stats();
    if (s_.open_after_swap_in != 0 && (!residency::busy() || now >= s_.open_after_swap_in)) {
        s_.open_after_swap_in = 0;
        s_.quiet_since = now;
        gate_open();
    }
    // Memory first: in auto mode the daemon decides from it whether this
    // request may run alongside others, so it must not learn it too late.
    const bool requesting = g_want.load() && !s_.holding && !s_.requested;
    if (alloc::graph_memory_in_use() && (requesting || now - s_.last_graph_check >= kGraphPollNs)) {
        s_.last_graph_check = now;
        alloc::refresh_graph_memory();
    }
    if (requesting || now - s_.last_report >= kReportPeriodNs) {
        bool sent = false;
        for (uint32_t i = 0; i < s_.gpu_count; ++i) {
            devices::Gpu& g = devices::at(i);
            if (!g.dirty.exchange(false))
                continue;
            const int64_t m = g.managed.load(), pin = g.pinned.load();
            const proto::MemoryPayload r{i, 0, static_cast<uint64_t>(m > 0 ? m : 0),
                                         static_cast<uint64_t>(pin > 0 ? pin : 0)};
            send(proto::MsgType::Memory, r);
            sent = true;
        }
        if (sent)
            s_.last_report = now;
    }
    if (requesting) {
        gaps_.resumed(gate_active_at());  // the end of a pause we let go in
        if (s_.gpu_count == 0) {
            gate_open();  // nothing to schedule
        } else if (send_mask(proto::MsgType::Request)) {
            s_.requested = true;
            s_.requested_at = now;
            s_.announced = false;
            s_.next_notice =
                config().wait_notice_ms != 0 ? now + config().wait_notice_ms * 1000000ull : 0;
            memset(s_.wait_received, 0, sizeof s_.wait_received);
        }
    }
    if (s_.requested && !s_.holding && s_.next_notice != 0 && now >= s_.next_notice)
        announce_wait(now);
}

// One line on stderr about the GPU this process waits for: the first that
// somebody holds, else the first nvshared said anything about.
void Client::announce_wait(uint64_t now)
{
    uint32_t pick = s_.gpu_count;
    for (uint32_t i = 0; i < s_.gpu_count; ++i) {
        if (s_.wait_received[i] == 0)
            continue;
        if (pick == s_.gpu_count)
            pick = i;
        if (s_.waits[i].holder_pid != 0) {
            pick = i;
            break;
        }
    }
    const bool known = pick < s_.gpu_count;
    const devices::Gpu& gpu = devices::at(known ? pick : 0);
    char uuid[kUuidTextSize];
    format_gpu_uuid(gpu.uuid, uuid);
    WaitContext ctx;
    ctx.ordinal = static_cast<int>(gpu.ordinal);
    ctx.gpu_name = gpu.name;
    ctx.gpu_uuid = uuid;
    ctx.waited_ns = now - s_.requested_at;
    if (known) {
        ctx.since_frame_ns = now - s_.wait_received[pick];
        if (s_.waits[pick].holder_pid != 0)
            ctx.holder_user = user_name(s_.waits[pick].holder_uid);
    }
    char line[400];
    format_waiting(line, sizeof line, known ? &s_.waits[pick] : nullptr, ctx);
    log_warn("%s", line);
    s_.announced = true;
    s_.next_notice = now + kWaitNoticeRepeatNs;
}

// The lock came: say so if the wait was announced.
void Client::end_wait(uint64_t gpus, uint64_t now)
{
    s_.next_notice = 0;
    if (!s_.announced)
        return;
    s_.announced = false;
    const uint32_t first = gpus != 0 ? static_cast<uint32_t>(__builtin_ctzll(gpus)) : 0;
    char line[96];
    format_got(line, sizeof line,
               static_cast<int>(devices::at(first < s_.gpu_count ? first : 0).ordinal),
               now - s_.requested_at);
    log_warn("%s", line);
}

// From the passwd file only: NSS modules may block or take locks.
const char* Client::user_name(uint32_t uid)
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

int Client::timeout_ms(uint64_t now) const
{
    uint64_t next = UINT64_MAX;
    auto consider = [&](uint64_t t) { next = t < next ? t : next; };
    if (!s_.welcomed)
        consider(s_.connected_at + kWelcomeTimeoutNs);
    if (s_.drop_pending)
        consider(now + kCapturePollNs);
    if (s_.holding && s_.contended && config().idle_release_ms != 0)
        consider(s_.next_idle_check);
    if (residency::busy())
        consider(now + kSwapPollNs);
    if (s_.open_after_swap_in != 0)
        consider(s_.open_after_swap_in);
    if (s_.requested && !s_.holding && s_.next_notice != 0)
        consider(s_.next_notice);
    for (uint32_t i = 0; i < s_.gpu_count; ++i)
        if (devices::at(i).dirty.load())
            consider(s_.last_report + kReportPeriodNs);
    if (alloc::graph_memory_in_use() && s_.gpu_count != 0)
        consider(s_.last_graph_check + kGraphPollNs);
    if (next == UINT64_MAX)
        return -1;
    if (next <= now)
        return 0;
    const uint64_t ms = (next - now + 999999) / 1000000;
    return ms > 60000 ? 60000 : static_cast<int>(ms);
}

void Client::wait_event(int timeout)
{
    pollfd p{g_event_fd.load(), POLLIN, 0};
    if (poll(&p, 1, timeout) > 0) {
        uint64_t v;
        ssize_t unused = read(p.fd, &v, sizeof v);
        (void)unused;
    }
}

void Client::run()
{
    for (;;) {
        if (s_.fd < 0) {
            const uint64_t now = now_ns();
            if (failing_ && now < retry_at_) {
                wait_event(static_cast<int>((retry_at_ - now + 999999) / 1000000));
                continue;
            }
            if (!connect_and_hello()) {
                fail_open("cannot reach nvshared");
                retry_at_ = now_ns() + backoff_ms_ * 1000000ull;
                backoff_ms_ = backoff_ms_ * 2 > kBackoffMaxMs ? kBackoffMaxMs : backoff_ms_ * 2;
                continue;
            }
            backoff_ms_ = kBackoffFirstMs;
            if (failing_) {
                failing_ = false;
                log_debug("connected to nvshared again: GPU work is scheduled");
                // Back to gating; ask at once if work is under way.
                if (gate_close() & kGateActive)
                    g_want.store(true);
            }
        }
        // A context on a new GPU: register again with every GPU.
        if (devices::generation() != s_.generation) {
            if (s_.holding)
                drain(now_ns() + kIdleDrainLimitNs);
            gate_close();
            disconnect();
            continue;
        }
        uint64_t now = now_ns();
        if (!s_.welcomed && now >= s_.connected_at + kWelcomeTimeoutNs) {
            disconnect();
            fail_open("nvshared does not answer");
            retry_at_ = now + backoff_ms_ * 1000000ull;
            continue;
        }
        work(now);
        pollfd p[2] = {{s_.fd, POLLIN, 0}, {g_event_fd.load(), POLLIN, 0}};
        const int r = poll(p, 2, timeout_ms(now_ns()));
        if (r < 0 && errno != EINTR)
            continue;
        if (p[1].revents & POLLIN) {
            uint64_t v;
            ssize_t unused = read(p[1].fd, &v, sizeof v);
            (void)unused;
        }
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            if (!read_frames()) {
                disconnect();
                fail_open("lost the connection to nvshared");
                retry_at_ = now_ns() + backoff_ms_ * 1000000ull;
            }
        }
    }
}

// The Client holds a 64 KiB buffer: mapped when the thread first starts, not
// static storage, because every process on the host maps the library's
// zero-filled data at exec time and most never use CUDA. Kept across fork
// (the child's thread reuses the inherited mapping).
void* g_client_storage = nullptr;

void* thread_main(void*)
{
    if (g_client_storage == nullptr) {
        void* m = mmap(nullptr, sizeof(Client), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        if (m == MAP_FAILED) {
            // Fail open: run unscheduled rather than block the program.
            gate_open();
            set_ready();
            log_warn("out of memory for the nvshared connection: GPU work runs unscheduled");
            return nullptr;
        }
        g_client_storage = m;
    }
    Client* client = new (g_client_storage) Client();
    client->run();
    return nullptr;
}

void child_after_fork()
{
    // Only the forking thread exists in the child: no client thread, and the
    // parent's connection must not stay open here. The child registers anew
    // on its own first use.
    const int sock = g_socket_fd.exchange(-1);
    if (sock >= 0)
        close(sock);
    const int efd = g_event_fd.exchange(-1);
    if (efd >= 0)
        close(efd);
    g_started.store(kNotStarted);
    g_want.store(false);
    g_ready.store(0);
    gate_reset();
    contexts::reset_after_fork();
    devices::reset_after_fork();
    alloc::reset_after_fork();
    residency::reset_after_fork();
}

}  // namespace

bool ensure_started()
{
    int state = g_started.load(std::memory_order_acquire);
    if (state == kRunning)
        return true;
    if (state == kFailed)
        return false;
    int expected = kNotStarted;
    if (g_started.compare_exchange_strong(expected, kStarting, std::memory_order_acq_rel)) {
        if (!g_atfork_registered) {
            pthread_atfork(nullptr, nullptr, child_after_fork);
            g_atfork_registered = true;
        }
        const int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        g_event_fd.store(efd);
        // The thread must never take the application's signals.
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_t thread;
        const int r = efd < 0 ? EMFILE : pthread_create(&thread, &attr, thread_main, nullptr);
        pthread_attr_destroy(&attr);
        pthread_sigmask(SIG_SETMASK, &old, nullptr);
        if (r != 0) {
            log_warn("cannot start the nvshared client (%s): GPU work runs unscheduled",
                     strerror(r));
            g_started.store(kFailed, std::memory_order_release);
            set_ready();
            return false;
        }
        g_started.store(kRunning, std::memory_order_release);
        return true;
    }
    while ((state = g_started.load(std::memory_order_acquire)) == kStarting)
        sched_yield();
    return state == kRunning;
}

bool drain_overdue()
{
    const uint64_t deadline = g_drain_deadline.load(std::memory_order_acquire);
    return deadline != 0 && now_ns() > deadline;
}

void want_lock()
{
    if (!g_want.exchange(true))
        poke();
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

}  // namespace nvshare::preload::client
