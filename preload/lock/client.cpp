#include "preload/lock/client.h"

#include <errno.h>
#include <poll.h>
#include <sys/prctl.h>

#include <climits>
#include <cstring>

#include "common/codec.h"
#include "common/mode.h"
#include "preload/clock.h"
#include "preload/env.h"
#include "preload/lock/admission.h"
#include "preload/lock/gate.h"
#include "preload/lock/idle_release.h"
#include "preload/lock/wait_notice.h"
#include "preload/log.h"
#include "preload/mailbox.h"
#include "preload/memory/allocations.h"
#include "preload/memory/contexts.h"
#include "preload/memory/devices.h"
#include "preload/swap/host_memory.h"
#include "preload/swap/residency.h"
#include "preload/swap/swappable.h"
#include "preload/swap/tuning.h"

namespace nvshare::preload::client {

namespace {

constexpr uint32_t kBackoffMaxMs = 10000;
constexpr uint64_t kReportPeriodNs = 20ull * 1000 * 1000;
constexpr uint64_t kWelcomeTimeoutNs = 5ull * 1000 * 1000 * 1000;
constexpr uint64_t kCapturePollNs = 5ull * 1000 * 1000;
// How often a process that uses graph memory has its pools looked at.
constexpr uint64_t kGraphPollNs = 200ull * 1000 * 1000;
constexpr uint64_t kIdleDrainLimitNs = 10ull * 1000 * 1000 * 1000;
// An early release waits at most this long for its eviction to finish.
constexpr uint64_t kEvictLimitNs = 10ull * 1000 * 1000 * 1000;
// How often completion of a bulk prefetch is looked for.
constexpr uint64_t kSwapPollNs = 2ull * 1000 * 1000;

}  // namespace

// ---- the connection ----

bool ClientLoop::connect_and_hello()
{
    if (!conn_.connect())
        return false;
    s_ = Session{};
    wait_.reset();
    s_.connected_at = now_ns();
    s_.generation = devices::generation();
    s_.gpu_count = devices::count();

    proto::Hello hello{};
    hello.gpu_count = s_.gpu_count;
    hello.priority = config().priority;
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
    if (!conn_.hello(hello)) {
        disconnect();
        return false;
    }
    return true;
}

void ClientLoop::disconnect()
{
    conn_.close();
    s_.welcomed = false;
    // The next daemon may be an older one, and knows none of our rates.
    s_.takes_rates = false;
    for (uint64_t& v : s_.rates_reported)
        v = 0;
    s_.lock.lost();
    gate_set_bounded(false);
}

void ClientLoop::open_gate()
{
    swappable::release_moves();  // whatever moved has ended
    if (lock::open_gate())
        return;
    // Data of ours is still swapped out where it should be back: let go and
    // ask again, for a grant whose swap-in brings it (yield_if_asked).
    log_warn("GPU memory of this process is not back on its GPU: asking for the GPU again");
    mailbox::want_yield();
}

void ClientLoop::fail_open(const char* reason)
{
    gate_set_bounded(false);
    residency::fail_open();  // the work that now runs needs its memory
    open_gate();
    mailbox::set_ready();
    if (!failing_) {
        failing_ = true;
        log_warn("%s (%s): GPU work runs unscheduled until nvshared is back", reason,
                 config().socket_path);
    }
}

uint64_t ClientLoop::all_gpus() const
{
    return s_.gpu_count >= 64 ? ~0ull : (1ull << s_.gpu_count) - 1;
}

bool ClientLoop::send_mask(proto::MsgType type)
{
    const proto::GpuMaskPayload p{all_gpus()};
    return conn_.send(type, p);
}

bool ClientLoop::on_frame(void* self, proto::MsgType type, const uint8_t* p, uint32_t length)
{
    return static_cast<ClientLoop*>(self)->handle(type, p, length, now_ns());
}

// ---- what nvshared says ----

void ClientLoop::apply_settings(const proto::Settings& s)
{
    for (uint32_t i = 0; i < s.gpu_count && i < s_.gpu_count; ++i)
        devices::at(i).capacity.store(s.capacities[i], std::memory_order_release);
    s_.quantum_ns = s.time_quantum_us * 1000;
    log_debug("settings: mode %s, time quantum %llu us", proto::mode_name(s.mode),
              static_cast<unsigned long long>(s.time_quantum_us));
}

// false: nonsense, drop the connection.
bool ClientLoop::handle(proto::MsgType type, const uint8_t* p, uint32_t length, uint64_t now)
{
    using proto::MsgType;
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
            mailbox::set_ready();
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
            on_grant(g, now);
            return true;
        }
        case MsgType::Drop: {
            proto::DropPayload d{};
            proto::decode(p, length, &d);
            on_drop(d, now);
            return true;
        }
        case MsgType::RevokeCause: {
            proto::RevokeCausePayload r{};
            proto::decode(p, length, &r);
            s_.revoke_cause = r.cause;
            return true;
        }
        case MsgType::Revoked:
            on_revoked();
            return true;
        case MsgType::Waiting: {
            proto::WaitingPayload w{};
            proto::decode(p, length, &w);
            if (w.gpu >= s_.gpu_count)
                return false;
            wait_.waiting(w, now);
            if (w.reason == static_cast<uint32_t>(proto::WaitReason::Oversubscribed))
                s_.switching.waits_oversubscribed();
            return true;
        }
        case MsgType::Contended: {
            proto::GrantPayload c{};
            proto::decode(p, length, &c);
            s_.lock.contention(c);
            if (s_.lock.holds() && (c.flags & proto::kGrantExclusive) != 0) {
                residency::now_exclusive(c.gpus);
                log_debug("the GPUs we hold are taken in turns now: others wait for them");
            }
            s_.switching.contended();
            return true;
        }
        case MsgType::Shrink: {
            proto::GrantPayload k{};
            proto::decode(p, length, &k);
            shrink(k.gpus, proto::keep_from_wire(k.keep_mib));
            return true;
        }
        case MsgType::RunAhead: {
            proto::RunAheadPayload r{};
            proto::decode(p, length, &r);
            // Only while holding: a hold's bound ends with it.
            const bool bounded = (r.flags & proto::kRunAheadBounded) != 0 && s_.lock.holds();
            gate_set_bounded(bounded);
            log_debug("%s", bounded ? "a higher priority class may need the GPU: keeping "
                                      "queued work short"
                                    : "queued work no longer bounded");
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
        case MsgType::KnownRates:
            return on_known_rates(p, length);
        case MsgType::Error:
            return on_error(p, length);
        default:
            return true;  // Status and future types: nothing to do
    }
}

void ClientLoop::on_grant(const proto::GrantPayload& g, uint64_t now)
{
    // Before the gate opens, so that the first submission is bounded too.
    gate_set_bounded((g.flags & proto::kGrantBounded) != 0);
    s_.lock.granted(g);
    s_.switching.granted();
    s_.next_idle_check = now + config().idle_release_ms * 1000000ull;
    s_.quiet_since = now;
    s_.granted_at = now;
    s_.likely_told = false;
    s_.hold_told = false;
    mailbox::clear_want();
    wait_.granted(g.gpus, now);
    if (residency::on_grant(g.gpus, s_.lock.oversubscribed(),
                            (g.flags & proto::kGrantExclusive) != 0)) {
        // Our data was evicted: kernels that ran now would fault it in page
        // by page, far slower than the bulk prefetch, and slow the prefetch
        // down. They wait for it instead.
        s_.lock.await_swap_in(now + tuning::kSwapInGateLimitNs);
    } else {
        open_gate();  // work proceeds while new data streams in behind it
    }
    report_stats();  // what the swap-in moved, before the program may end
    log_debug("lock granted%s: ready %llu ms after nvshared's grant",
              s_.lock.contended() ? " (contended)" : "",
              static_cast<unsigned long long>((now_ns() - now) / 1000000));
}

void ClientLoop::on_drop(const proto::DropPayload& d, uint64_t now)
{
    gate_close();  // stop admitting work at once; drained in work()
    if (!s_.lock.holds() && (d.flags & proto::kGrantOversubscribed) != 0) {
        // We let go before it came, keeping what was ours to keep then;
        // nvshared counts on what it allows now.
        shrink(d.gpus, proto::keep_from_wire(d.keep_mib));
    }
    s_.lock.dropped(d, now);
    log_debug("drop requested (grace %llu us): %s", static_cast<unsigned long long>(d.grace_us),
              (d.flags & proto::kDropTurnsBegin) != 0 ? "the GPU is now taken in turns"
                                                      : "the time quantum is over and others wait");
}

void ClientLoop::shrink(uint64_t gpus, uint64_t keep_bytes)
{
    if (s_.lock.holds())
        return;  // a Shrink overtaken by a Grant: the grant's terms apply
    const uint64_t all = all_gpus();
    log_debug("nvshared asks for room: leaving at most %llu MiB on the GPUs we do not hold",
              static_cast<unsigned long long>(keep_bytes >> 20));
    // Work of ours may still run after a revocation or a release that could
    // not drain it: memory moves only once it has ended.
    if (!quiesce(now_ns() + kIdleDrainLimitNs)) {
        if (contexts::active_captures() > 0)
            log_debug("a stream capture runs: the room asked for waits for its end");
        else
            log_warn("our GPU work does not end: nothing moves to give the room nvshared asks");
        return;
    }
    residency::before_release(gpus & all, true, keep_bytes, now_ns() + kEvictLimitNs);
    report_stats();
    s_.switching.shrunk(keep_bytes);
}

bool ClientLoop::on_known_rates(const uint8_t* p, uint32_t length)
{
    proto::RatesPayload r{};
    if (!proto::decode(p, length, &r) || r.gpu >= s_.gpu_count)
        return false;
    s_.takes_rates = true;
    const auto d = [](uint64_t v) { return static_cast<double>(v); };
    residency::set_known_rates(
        r.gpu, {d(r.engine_out), d(r.engine_in), d(r.evict), d(r.prefetch), d(r.host_pin)});
    if (r.engine_out != 0 || r.engine_in != 0 || r.evict != 0 || r.prefetch != 0 || r.host_pin != 0)
        log_debug(
            "rates earlier processes measured on GPU %u: %.1f GB/s out and %.1f in for "
            "swappable memory, %.1f and %.1f for managed memory, host memory made at %.1f "
            "GB/s (0: not measured)",
            r.gpu, d(r.engine_out) / 1e9, d(r.engine_in) / 1e9, d(r.evict) / 1e9,
            d(r.prefetch) / 1e9, d(r.host_pin) / 1e9);
    return true;
}

void ClientLoop::report_rates()
{
    if (!s_.takes_rates)
        return;
    // A figure nvshared would not take as a measurement is not sent.
    const auto wire = [](double v) {
        const auto r = static_cast<uint64_t>(v);
        return r >= proto::kMinRate && r <= proto::kMaxRate ? r : 0;
    };
    for (uint32_t i = 0; i < s_.gpu_count; ++i) {
        const uint64_t version = residency::rates_version(i);
        if (version == s_.rates_reported[i])
            continue;
        const residency::Rates r = residency::measured_rates(i);
        const proto::RatesPayload p{i,
                                    0,
                                    wire(r.engine_out),
                                    wire(r.engine_in),
                                    wire(r.evict),
                                    wire(r.prefetch),
                                    wire(r.host_pin)};
        if (conn_.send(proto::MsgType::Rates, p))
            s_.rates_reported[i] = version;
    }
}

void ClientLoop::on_revoked()
{
    gate_close();
    gate_set_bounded(false);
    for (uint32_t i = 0; i < s_.gpu_count; ++i)
        swappable::let_go(i);  // nothing moves: our work may still run
    s_.lock.revoked();
    wait_.cancel();
    log_warn("nvshared revoked the GPU lock: %s", revoke_cause_text(s_.revoke_cause));
    s_.revoke_cause = 0;
}

bool ClientLoop::on_error(const uint8_t* p, uint32_t length)
{
    proto::ErrorReply e{};
    char text[160] = {};
    if (proto::decode(p, length, &e))
        memcpy(text, e.text, e.text_length < sizeof text - 1 ? e.text_length : sizeof text - 1);
    log_warn("nvshared refused this process: %s", text);
    return false;
}

// ---- giving the lock back ----

bool ClientLoop::drain(uint64_t deadline)
{
    log_debug("draining: waiting for this process's GPU work");
    const size_t deferred = swappable::deferred_frees();  // freed before this wait
    mailbox::drain_until(deadline);
    // Calls admitted before the gate closed may still be putting work on the
    // GPU: synchronising before they are out would miss that work.
    if (!gate_is_open() && gate_in_flight()) {
        log_debug("draining: a driver call admitted before the drop is still inside the driver");
        if (!gate_wait_in_flight(deadline))
            log_debug("a driver call admitted before the drop is still running");
    }
    const bool done = contexts::drain_all();
    mailbox::drain_done();
    if (done)
        swappable::finish_frees(deferred);
    return done;
}

bool ClientLoop::hold_moves(uint32_t let_through)
{
    // From here no thread fails open (swappable::open_if_mapped refuses), and
    // one that did since the drain ended is counted: nothing moves then.
    swappable::hold_moves();
    if (gate_fail_opens() == let_through)
        return true;
    swappable::release_moves();
    return false;
}

bool ClientLoop::quiesce(uint64_t deadline)
{
    for (;;) {
        gate_close();
        const uint32_t let_through = gate_fail_opens();
        const bool drained = drain(deadline);
        if (gate_fail_opens() == let_through && (!drained || hold_moves(let_through)))
            return drained;
        // Work went through the stuck drain and may run still: once more,
        // with the gate closed again, until the deadline.
        if (now_ns() >= deadline)
            return false;
    }
}

// Gate closed and drained (`quiet`, see quiesce): move our data off an
// oversubscribed GPU (so the next holder finds it free), then say so.
void ClientLoop::release(uint64_t deadline, bool quiet)
{
    const uint64_t all = all_gpus();
    const bool oversubscribed = s_.lock.oversubscribed();
    const uint64_t keep = s_.lock.keep_bytes();
    const bool may_evict = oversubscribed || config().evict == Policy::On;
    bool move_after = false;
    if (!may_evict || quiet) {
        // The swap engine's memory leaves after the lock: the next holder's
        // copies in then overlap ours out.
        move_after = residency::swaps_out_after_release(all, oversubscribed);
        if (!move_after)
            residency::before_release(all, oversubscribed, keep, deadline);
    } else {
        for (uint32_t i = 0; i < s_.gpu_count; ++i)
            swappable::let_go(i);
    }
    send_mask(proto::MsgType::Released);
    s_.lock.released();
    gate_set_bounded(false);
    if (move_after) {
        log_debug("let go before swapping out: the next holder's swap-in overlaps it");
        residency::before_release(all, oversubscribed, keep, deadline);
    }
    report_stats();
}

void ClientLoop::report_stats()
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
        if (conn_.send(proto::MsgType::Stats, p))
            st.dirty = false;
    }
}

// A drop: drain every context, then say so; wait for captures to end first
// (synchronising would invalidate them) unless the grace runs out.
void ClientLoop::finish_drop(uint64_t now)
{
    if (s_.lock.state() != HoldState::Draining)
        return;
    const uint64_t deadline = *s_.lock.deadline();
    if (contexts::active_captures() == 0 || now >= deadline) {
        const bool quiet = quiesce(deadline + kCapturePollNs);
        gate_close();  // a waiter may have failed open during a stuck drain
        release(deadline + kCapturePollNs, quiet);
        log_debug("released after a drop request");
    }
}

// Early release: when others wait and the GPU has gone idle, hand it on now
// rather than at the end of the quantum. How long to stay idle first is
// IdleGaps' call: our share of what a switch would cost (evicting our data
// and bringing it back), at least the idle period, until this process's
// pauses have shown which of them outlast that. When to look, when the pause
// began and when to let go: idle_release.
void ClientLoop::release_if_idle(uint64_t now)
{
    const uint64_t period = config().idle_release_ms * 1000000ull;
    if (s_.lock.state() != HoldState::Holding || !s_.lock.contended() || period == 0 ||
        now < s_.next_idle_check)
        return;
    const uint64_t share =
        residency::switch_share_ns(s_.lock.oversubscribed(), s_.lock.keep_bytes());
    idle_release::Look l;
    l.now = now;
    l.period = period;
    l.hold = s_.switching.idle_hold(facts(now), gaps_.hold_for(share, period), period);
    l.quiet_since = s_.quiet_since;
    l.capturing = contexts::active_captures() > 0;
    l.active = !l.capturing && gate_active();
    const idle_release::Decision d = idle_release::look(l);
    s_.next_idle_check = d.next_look;
    if (d.step == idle_release::Step::Resumed) {
        gate_clear_active();
        gaps_.resumed(gate_active_at());
        s_.quiet_since = now;
        s_.hold_told = false;
        return;
    }
    if (d.step == idle_release::Step::Wait) {
        if (!l.capturing && !s_.hold_told) {  // once a pause
            s_.hold_told = true;
            log_debug(
                "idle: keeping the GPU up to %llu ms while others wait (our share of a "
                "switch %llu ms)",
                static_cast<unsigned long long>(l.hold / 1000000),
                static_cast<unsigned long long>(share / 1000000));
        }
        return;
    }
    const uint32_t let_through = gate_fail_opens();
    if (!drain(now + kIdleDrainLimitNs))
        return;
    const uint64_t drained = now_ns();
    if (gate_active())
        return;  // work came in while we drained: the next check sees it
    const idle_release::AfterDrain a = idle_release::after_drain(l, drained);
    gaps_.idle_since(a.idle_from);
    if (!a.release) {
        s_.quiet_since = a.quiet_since;
        s_.next_idle_check = a.next_look;
        return;
    }
    if (a.forget_wish)
        mailbox::clear_want();
    if (!gate_close_if_idle())
        return;
    // Closed idle, with nothing in flight or waiting: quiet unless work went
    // through during the drain.
    release(now + kEvictLimitNs, hold_moves(let_through));
    const uint64_t ski = IdleGaps::ski_rental(share, period);
    log_debug(
        "released early: idle for %llu ms (kept it idle up to %llu ms; our share of "
        "a switch %llu ms; %s; longest recent short pause %llu ms)",
        static_cast<unsigned long long>(a.idle_ns / 1000000),
        static_cast<unsigned long long>(l.hold / 1000000),
        static_cast<unsigned long long>(share / 1000000),
        gaps_.long_seen(ski) ? "longer pauses seen" : "no longer pause seen",
        static_cast<unsigned long long>(gaps_.longest_recent_short(ski) / 1000000));
}

// An allocation found the GPU full while we share it and closed the gate:
// let go (nothing of ours moves: the GPU was not oversubscribed when it was
// granted) and ask again, for a grant that has room for it.
void ClientLoop::yield_if_asked(uint64_t now)
{
    if (!mailbox::take_yield() || s_.lock.state() != HoldState::Holding)
        return;
    const bool quiet = quiesce(now + kIdleDrainLimitNs);
    gate_close();
    release(now + kEvictLimitNs, quiet);
    mailbox::set_want();  // the program's work waits at the gate
    log_debug("released: the GPU is full while shared");
}

// An allocation found the GPU full while we hold it alone, of memory others
// can give back, and closed the gate: tell nvshared our size now (it asks
// the others to shrink), take the room as it shows, then let the work go on.
void ClientLoop::make_room_if_asked(uint64_t now)
{
    if (mailbox::take_room())
        s_.switching.room_wanted();
    if (!s_.switching.room_due(facts(now)))
        return;
    // What the driver says the GPU lacks for it: nvshared asks those that
    // keep memory there for that much, whatever the reported sums say.
    uint32_t wanted[devices::kMaxGpus] = {};
    for (uint32_t i = 0; i < s_.gpu_count; ++i) {
        const uint64_t mib = (residency::room_short(i) + (uint64_t{1} << 20) - 1) >> 20;
        wanted[i] = static_cast<uint32_t>(mib < UINT32_MAX ? mib : UINT32_MAX);
        if (wanted[i] != 0)
            log_debug("GPU %u lacks %u MiB for our new memory: asking nvshared for room", i,
                      wanted[i]);
    }
    report_memory(now, true, wanted);
    // Memory in host memory may move too: nothing of ours may run on it.
    const bool quiet = quiesce(now_ns() + kIdleDrainLimitNs);
    s_.switching.room_tried(quiet, now_ns());
    if (!quiet)
        return;  // a capture, or stuck work: tried again later
    residency::await_room(all_gpus());
    report_stats();
    open_gate();
}

// Our data is back (or took too long): the program's work may go on.
void ClientLoop::finish_swap_in(uint64_t now)
{
    if (s_.lock.swap_in_over(residency::busy(), now)) {
        s_.quiet_since = now;
        open_gate();
    }
}

// ---- asking for the lock ----

// Memory first: in auto mode the daemon decides from it whether a request
// may run alongside others, so it must not learn it too late.
void ClientLoop::report_memory(uint64_t now, bool requesting, const uint32_t* room_wanted_mib)
{
    if (alloc::graph_memory_in_use() && (requesting || now - s_.last_graph_check >= kGraphPollNs)) {
        s_.last_graph_check = now;
        alloc::refresh_graph_memory();
    }
    if (!requesting && now - s_.switching.memory_changed_at() < kReportPeriodNs)
        return;
    bool sent = false;
    for (uint32_t i = 0; i < s_.gpu_count; ++i) {
        devices::Gpu& g = devices::at(i);
        const uint32_t wanted = room_wanted_mib != nullptr ? room_wanted_mib[i] : 0;
        if (!g.dirty.exchange(false) && wanted == 0)
            continue;
        const int64_t m = g.managed.load(), pin = g.pinned.load();
        const proto::MemoryPayload r{i, wanted, static_cast<uint64_t>(m > 0 ? m : 0),
                                     static_cast<uint64_t>(pin > 0 ? pin : 0)};
        conn_.send(proto::MsgType::Memory, r);
        sent = true;
    }
    if (sent)
        s_.switching.memory_changed(now);
}

void ClientLoop::request_lock(uint64_t now)
{
    if (gaps_.idle()) {  // the end of a pause we let go in
        const uint64_t at = gate_active_at(), from = gaps_.idle_from();
        log_debug("work resumed after a pause of %llu ms: asking for the GPU",
                  static_cast<unsigned long long>(at > from ? (at - from) / 1000000 : 0));
        gaps_.resumed(at);
    }
    if (s_.gpu_count == 0) {
        open_gate();  // nothing to schedule
    } else if (send_mask(proto::MsgType::Request)) {
        s_.lock.request_sent();
        wait_.begin(now, s_.gpu_count);
    }
}

swap::Facts ClientLoop::facts(uint64_t now) const
{
    swap::Facts f;
    f.now = now;
    switch (s_.lock.state()) {
        case HoldState::Idle:
        case HoldState::Requested:
            f.hold = swap::Hold::None;
            break;
        case HoldState::SwappingIn:
        case HoldState::Draining:
            f.hold = swap::Hold::Moving;
            break;
        case HoldState::Holding:
            f.hold = swap::Hold::Running;
            break;
    }
    f.contended = s_.lock.contended();
    f.oversubscribed = s_.lock.oversubscribed();
    f.stranded = f.hold == swap::Hold::Running ? residency::stranded() : 0;
    f.captures = contexts::active_captures() > 0;
    return f;  // host_low only where prestaging asks for it
}

// Holding contended: whether our next swap-out is likely soon, as the switch
// policy reads it (Facts::switch_likely). A pause outlasted our share of a
// switch with the host memory made: the current one (idle since quiet_since)
// or one remembered. The quantum is the settings' own (nvshared may stretch
// it; a waiter of a higher class cuts it short, and the swap-out then makes
// what was not made ahead).
const char* ClientLoop::switch_likely(swap::Facts& f) const
{
    uint64_t pinning = 0;
    const uint64_t share =
        residency::switch_share_ns(s_.lock.oversubscribed(), s_.lock.keep_bytes(), &pinning);
    const uint64_t made = share - pinning;  // our share with the memory made
    // quiet_since may be later than this turn's now (a drain that ended in it).
    const bool paused_long = gaps_.long_seen(made) || (!gate_active() && f.now >= s_.quiet_since &&
                                                       f.now - s_.quiet_since >= made);
    f.switch_likely_at = UINT64_MAX;
    if (s_.quantum_ns != 0) {
        const uint64_t lead =
            tuning::kQuantumLeadMakes * residency::switch_making_ns(s_.lock.keep_bytes()) +
            tuning::kQuantumLeadNs;
        const uint64_t end = s_.granted_at + s_.quantum_ns;
        f.switch_likely_at = end > lead ? end - lead : 0;
    }
    f.switch_likely = paused_long || f.now >= f.switch_likely_at;
    return paused_long ? "a pause of ours outlasted it" : "our time quantum ends soon";
}

// One step of host memory made ahead, as the switch policy says.
void ClientLoop::prestage(uint64_t now)
{
    swap::Facts f = facts(now);
    if (!s_.switching.prestage_pending(f))
        return;
    f.host_low = host_memory::host_low();
    const char* why = nullptr;
    if (f.hold == swap::Hold::Running && f.contended && f.oversubscribed)
        why = switch_likely(f);
    const swap::PrestageStep step = s_.switching.prestage(f);
    const uint64_t all = all_gpus();
    switch (step.kind) {
        case swap::Prestage::None:
            return;
        case swap::Prestage::ForSwitch:
            if (!s_.likely_told && why != nullptr) {
                s_.likely_told = true;
                log_debug("a switch is likely (%s): making its host memory ahead", why);
            }
            s_.switching.prestaged(residency::prestage_for_switch(all, s_.lock.keep_bytes()));
            return;
        case swap::Prestage::ToKeep:
            s_.switching.prestaged(residency::prestage(all, step.bytes));
            return;
        case swap::Prestage::Ahead:
            s_.switching.prestaged(residency::prestage_ahead(all, step.bytes));
            return;
    }
}

// Memory that found no room on the device moves there when the policy says
// to look and the driver has room: the program's work is held back and
// drained meanwhile.
void ClientLoop::promote(uint64_t now)
{
    if (!s_.switching.promote_due(facts(now)) || !residency::room_for_stranded())
        return;
    if (quiesce(now_ns() + kIdleDrainLimitNs))
        residency::promote();
    open_gate();
}

void ClientLoop::work(uint64_t now)
{
    if (!s_.welcomed)
        return;
    s_.switching.observe(facts(now));
    finish_drop(now);
    yield_if_asked(now);
    make_room_if_asked(now);
    release_if_idle(now);
    prestage(now);
    promote(now);
    if (residency::poll())
        report_stats();
    report_rates();
    finish_swap_in(now);
    const bool requesting = mailbox::wanted() && s_.lock.state() == HoldState::Idle;
    report_memory(now, requesting);
    if (requesting)
        request_lock(now);
    const auto notice = wait_.next_notice();
    if (s_.lock.state() == HoldState::Requested && notice && now >= *notice)
        wait_.announce(now);
}

// ---- the loop ----

int ClientLoop::timeout_ms(uint64_t now) const
{
    uint64_t next = UINT64_MAX;
    auto consider = [&](uint64_t t) { next = t < next ? t : next; };
    if (!s_.welcomed)
        consider(s_.connected_at + kWelcomeTimeoutNs);
    if (s_.lock.state() == HoldState::Draining)
        consider(now + kCapturePollNs);
    if (s_.lock.holds() && s_.lock.contended() && config().idle_release_ms != 0)
        consider(s_.next_idle_check);
    if (residency::busy())
        consider(now + kSwapPollNs);
    consider(s_.switching.next_wake(facts(now)));
    if (s_.lock.state() == HoldState::SwappingIn)
        consider(*s_.lock.deadline());
    const auto notice = wait_.next_notice();
    if (s_.lock.state() == HoldState::Requested && notice)
        consider(*notice);
    for (uint32_t i = 0; i < s_.gpu_count; ++i)
        if (devices::at(i).dirty.load())
            consider(s_.switching.memory_changed_at() + kReportPeriodNs);
    if (alloc::graph_memory_in_use() && s_.gpu_count != 0)
        consider(s_.last_graph_check + kGraphPollNs);
    if (next == UINT64_MAX)
        return -1;
    if (next <= now)
        return 0;
    const uint64_t ms = (next - now + 999999) / 1000000;
    return ms > 60000 ? 60000 : static_cast<int>(ms);
}

void ClientLoop::wait_event(int timeout)
{
    pollfd p{mailbox::event_fd(), POLLIN, 0};
    if (poll(&p, 1, timeout) > 0)
        mailbox::consume_wakeup();
}

void ClientLoop::run()
{
    for (;;) {
        // What the last round moved (work() and the messages' handlers) has
        // ended: threads at the gate may fail open again.
        swappable::release_moves();
        if (!conn_.is_open()) {
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
                    mailbox::set_want();
            }
        }
        // A context on a new GPU: register again with every GPU.
        if (devices::generation() != s_.generation) {
            if (s_.lock.holds())
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
        pollfd p[2] = {{conn_.fd(), POLLIN, 0}, {mailbox::event_fd(), POLLIN, 0}};
        const int r = poll(p, 2, timeout_ms(now_ns()));
        if (r < 0 && errno != EINTR)
            continue;
        if (p[1].revents & POLLIN)
            mailbox::consume_wakeup();
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            if (!conn_.read_frames(on_frame, this)) {
                disconnect();
                fail_open("lost the connection to nvshared");
                retry_at_ = now_ns() + backoff_ms_ * 1000000ull;
            }
        }
    }
}

}  // namespace nvshare::preload::client
