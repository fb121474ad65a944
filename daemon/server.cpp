#include "daemon/server.h"

#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/mode.h"
#include "common/units.h"
#include "common/uuid.h"
#include "daemon/gpu_discovery.h"
#include "daemon/host_readings.h"
#include "daemon/log.h"
#include "daemon/nvml.h"
#include "daemon/peer_groups.h"
#include "daemon/printable_text.h"
#include "daemon/priority_rules.h"
#include "daemon/process_cgroup.h"
#include "daemon/process_command.h"
#include "daemon/process_exit.h"
#include "daemon/process_memory.h"

namespace nvshare::daemon {

namespace {

// sd-event's time for t, on the clock the static_assert below checks.
uint64_t monotonic_usec(TimePoint t)
{
    return to_usec(t.time_since_epoch());
}

// steady_clock is CLOCK_MONOTONIC on Linux, the clock sd-event timers use.
static_assert(Clock::is_steady);

}  // namespace

Server::Server(Options options) : options_(std::move(options)), scheduler_(options_.scheduler)
{
    scheduler_.set_default_capacity(options_.default_capacity);
    for (const auto& [uuid, bytes] : options_.capacities)
        scheduler_.set_capacity_override(uuid, bytes);
    for (const auto& [uuid, mode] : options_.gpu_modes)
        scheduler_.set_gpu_mode(uuid, mode, Clock::now());
    for (const auto& [uuid, tq] : options_.gpu_time_quanta)
        scheduler_.set_gpu_time_quantum(uuid, tq, Clock::now());
    events_.set_wait_threshold(options_.log_waits_after);
}

Server::~Server()
{
    memory_watch_.reset();  // its thread and event source go first
    connections_.clear();
    sd_event_source_disable_unref(timer_source_);
    sd_event_source_disable_unref(idle_source_);
    sd_event_unref(event_);
}

bool Server::init()
{
    int r = sd_event_default(&event_);
    if (r < 0) {
        NVS_ERROR("cannot create event loop: %s", strerror(-r));
        return false;
    }
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, nullptr);
    // A NULL handler makes sd-event leave the loop: a clean exit.
    sd_event_add_signal(event_, nullptr, SIGTERM, nullptr, nullptr);
    sd_event_add_signal(event_, nullptr, SIGINT, nullptr, nullptr);
    // SIGHUP (systemctl reload): the configuration is read again.
    sd_event_add_signal(event_, nullptr, SIGHUP, on_reload_signal, this);
    signal(SIGPIPE, SIG_IGN);
    // Every client is a descriptor: use all the kernel allows us (nvshared
    // never calls select(), so a large limit is safe).
    rlimit files{};
    if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
        files.rlim_cur = files.rlim_max;
        setrlimit(RLIMIT_NOFILE, &files);
    }
    if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < options_.max_clients + 64)
        NVS_WARN("the open-files limit (%llu) is below --max-clients (%zu): raise LimitNOFILE=",
                 static_cast<unsigned long long>(files.rlim_cur), options_.max_clients);
    // Pings WATCHDOG=1 from the loop itself when WATCHDOG_USEC is set, so a
    // hung loop really trips systemd's watchdog.
    sd_event_set_watchdog(event_, 1);

    // Known GPUs get stable indices now; others are added as clients name them.
    // Their memory sizes come from NVML where the host has it, never from
    // what clients claim. The rates measured on them before a restart come
    // back with them.
    kept_rates_ = rates_store_.load();
    for (auto gpu : discover_gpus(options_.gpu_info_dir)) {
        gpu.physical_memory = nvml_total_memory(gpu.uuid).value_or(0);
        if (scheduler_.ensure_gpu(gpu))
            NVS_INFO("GPU %s: %s%s", gpu.uuid.c_str(), gpu.name.c_str(),
                     gpu.physical_memory != 0 ? ", memory from NVML" : "");
    }
    for (GpuIndex g = 0; g < scheduler_.gpus().size(); ++g)
        take_kept_rates(g);

    // What NVML and the processes' host memory confirm of clients' memory,
    // read off the loop.
    memory_watch_ = std::make_unique<MemoryWatch>(
        nvml_process_memory, [](int32_t pid) { return process_anon_memory(pid); });
    if (!memory_watch_->start(event_, [this](const MemoryWatch::Readings& readings) {
            on_memory_readings(readings);
        }))
        return false;

    if (!listener_.open(event_, options_.socket_path))
        return false;
    r = sd_event_add_time(event_, &timer_source_, CLOCK_MONOTONIC, UINT64_MAX, 1000, on_timer,
                          this);
    if (r < 0)
        return false;
    sd_event_source_set_enabled(timer_source_, SD_EVENT_OFF);
    if (!status_line_.init(event_))
        return false;
    if (options_.idle_exit) {
        r = sd_event_add_time(event_, &idle_source_, CLOCK_MONOTONIC, UINT64_MAX, 100000,
                              on_idle_timer, this);
        if (r < 0)
            return false;
        // New sources start enabled; off, so that update_idle_timer() arms it.
        sd_event_source_set_enabled(idle_source_, SD_EVENT_OFF);
        update_idle_timer();
    }
    return true;
}

int Server::run()
{
    status_line_.update(scheduler_);
    notifier_.send("READY=1");
    const int r = sd_event_loop(event_);
    notifier_.send("STOPPING=1");
    if (rates_unsaved_)
        save_rates();
    if (r < 0) {
        NVS_ERROR("event loop failed: %s", strerror(-r));
        return 1;
    }
    NVS_INFO("exiting");
    return 0;
}

// ---- event handlers -------------------------------------------------------------

int Server::on_connection(sd_event_source*, int, uint32_t revents, void* conn)
{
    auto* c = static_cast<Connection*>(conn);
    Server* s = c->server;
    if (revents & EPOLLOUT)
        c->flush();
    if (c->paused) {
        if (revents & (EPOLLHUP | EPOLLERR))
            c->mark_dead();
    } else if ((revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->dead) {
        if (c->read())
            s->process_input(*c);
    }
    s->listener_.accept_if_due();
    s->after_change();  // may destroy c
    return 0;
}

int Server::on_connection_timer(sd_event_source*, uint64_t, void* conn)
{
    auto* c = static_cast<Connection*>(conn);
    Server* s = c->server;
    const auto now = Clock::now();
    if (c->exit_fd >= 0) {
        if (now >= c->closed_at + kExitWaitMax)
            s->destroy(*c);  // an exit stuck in the driver does not keep the lock
        else
            c->arm_timer();
        s->after_change();
        return 0;
    }
    if (!c->dead && c->unread() != 0 && now >= c->read_progress + kUnreadLimit) {
        NVS_WARN("client %llu (pid %d) left %zu bytes unread for %lld s; disconnecting",
                 static_cast<unsigned long long>(c->serial), c->peer.pid, c->unread(),
                 static_cast<long long>(kUnreadLimit.count()));
        c->mark_dead();
    } else if (!c->registered && !c->closing && !c->dead && now >= c->hello_deadline) {
        s->fail(*c, proto::ErrorCode::BadOrder,
                "no Hello within " + std::to_string(kHelloDeadline.count()) + " s");
    } else if (c->paused && now >= c->resume_at && !c->dead) {
        c->paused = false;
        c->update_io_events();
        s->process_input(*c);
    }
    if (!c->dead)
        c->arm_timer();
    s->after_change();  // may destroy c
    return 0;
}

int Server::on_process_exit(sd_event_source*, int, uint32_t, void* conn)
{
    auto* c = static_cast<Connection*>(conn);
    Server* s = c->server;
    s->destroy(*c);
    s->after_change();
    return 0;
}

int Server::on_timer(sd_event_source*, uint64_t, void* self)
{
    auto* s = static_cast<Server*>(self);
    const auto now = Clock::now();
    s->scheduler_.tick(now);
    s->log_due_waits(now);
    s->status_.changed();
    s->after_change();
    return 0;
}

int Server::on_idle_timer(sd_event_source*, uint64_t, void* self)
{
    auto* s = static_cast<Server*>(self);
    if (s->connections_.empty()) {
        NVS_INFO("no clients for %lld s: exiting until the socket is used again",
                 static_cast<long long>(s->options_.idle_exit->count() / 1000000));
        sd_event_exit(s->event_, 0);
    }
    return 0;
}

// ---- connections ---------------------------------------------------------------

void Server::on_accepted(int fd, const ucred& peer, uint32_t principal, TimePoint now)
{
    auto c = std::make_unique<Connection>(this, next_serial_++, fd, peer, principal, doomed_);
    if (!c->watch(event_, on_connection, on_connection_timer))
        return;  // closed with it
    c->hello_deadline = now + kHelloDeadline;
    Connection& ref = *c;
    connections_.emplace(c->serial, std::move(c));
    ++connections_per_principal_[ref.principal];
    status_.changed();
    if (!admit(ref))
        return;
    ref.arm_timer();
    NVS_DEBUG("connection %llu from pid %d uid %u", static_cast<unsigned long long>(ref.serial),
              ref.peer.pid, ref.peer.uid);
}

// Root is always served; anyone else within the global limit and their own
// share of it, so that one user's connections cannot lock the others out.
bool Server::admit(Connection& c)
{
    if (c.peer.uid == 0)
        return true;
    if (connections_.size() > options_.max_clients) {
        fail(c, proto::ErrorCode::Refused, "too many clients");
        return false;
    }
    const size_t mine = connections_per_principal_[c.principal];
    if (mine > options_.max_clients_per_user) {
        const std::string who = c.principal == c.peer.uid
                                    ? "user " + std::to_string(c.peer.uid)
                                    : "user " + std::to_string(c.principal) +
                                          " (whose subordinate uid " + std::to_string(c.peer.uid) +
                                          " this is)";
        fail(c, proto::ErrorCode::Refused,
             who + " has " + std::to_string(mine - 1) +
                 " connections already, the most one user may have (--max-clients-per-user)");
        return false;
    }
    return true;
}

void Server::process_input(Connection& c)
{
    // Decode whole frames; the buffer never holds more than one maximal
    // frame plus one read, whatever the client sends.
    size_t off = 0;
    while (!c.closing && !c.dead && !c.paused) {
        proto::FrameHeader h{};
        const auto st = proto::decode_header(c.in.data() + off, c.in.size() - off,
                                             proto::kMaxClientPayload, &h);
        if (st == proto::DecodeStatus::NeedMore)
            break;
        if (st == proto::DecodeStatus::BadMagic) {
            fail(c, proto::ErrorCode::BadMagic, "not an nvshare client (bad magic)");
            break;
        }
        if (st == proto::DecodeStatus::BadVersion) {
            fail(c, proto::ErrorCode::BadVersion,
                 "protocol version " + std::to_string(h.version) +
                     " not supported; this nvshared speaks version " +
                     std::to_string(proto::kVersion));
            break;
        }
        if (st == proto::DecodeStatus::TooLarge) {
            fail(c, proto::ErrorCode::TooLarge,
                 "frame of " + std::to_string(h.length) + " bytes exceeds the limit");
            break;
        }
        if (!proto::frame_complete(h, c.in.size() - off))
            break;
        // Over its user's status rate: this frame and those after it wait.
        if (h.type == static_cast<uint16_t>(proto::MsgType::StatusQuery) &&
            !status_allowed(c, Clock::now()))
            break;
        const uint8_t* payload = c.in.data() + off + sizeof h;
        off += sizeof h + h.length;
        bool go_on = false;
        try {
            go_on = handle_frame(c, h, payload);
        } catch (const std::exception& e) {
            // Whatever one client's data provoked costs that client alone.
            fail(c, proto::ErrorCode::BadValue, std::string("cannot handle this: ") + e.what());
        }
        if (!go_on)
            break;
    }
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<ptrdiff_t>(std::min(off, c.in.size())));
}

size_t Server::unread_of(uint32_t principal) const
{
    size_t unread = 0;
    for (const auto& [serial, c] : connections_)
        if (c->principal == principal)
            unread += c->unread();
    return unread;
}

bool Server::status_allowed(Connection& c, TimePoint now)
{
    // Root's unread output is not held against it: not counted.
    const size_t unread = c.peer.uid == 0 ? 0 : unread_of(c.principal);
    const Duration wait = status_.socket_wait(c.peer.uid, unread, now);
    if (wait == Duration::zero())
        return true;
    c.paused = true;
    c.resume_at = now + wait;
    c.update_io_events();
    c.arm_timer();
    return false;
}

void Server::send_status(Connection& c, TimePoint now)
{
    const std::string& text = status_document(now);
    const auto length = static_cast<uint32_t>(text.size());
    if (uint8_t* room = c.frame_room(proto::frame_size(length))) {
        proto::encode(proto::MsgType::Status, text.data(), length, room, proto::frame_size(length));
        c.flush();
    }
}

// Checks the frame's type and length, decodes it, and hands the typed
// message to its handler. False: stop reading this connection.
bool Server::handle_frame(Connection& c, const proto::FrameHeader& h, const uint8_t* payload)
{
    using proto::MsgType;
    if (!proto::is_known_type(h.type)) {
        fail(c, proto::ErrorCode::BadType, "unknown message type " + std::to_string(h.type));
        return false;
    }
    const auto type = static_cast<MsgType>(h.type);
    if (type == MsgType::Hello) {
        proto::Hello hello;
        if (c.registered)
            fail(c, proto::ErrorCode::BadOrder, "second Hello on one connection");
        else if (!proto::decode(payload, h.length, &hello))
            fail(c, proto::ErrorCode::BadLength, "malformed Hello");
        else
            on_hello(c, hello);
        return !c.closing;
    }
    uint32_t expected = 0;
    if (!proto::is_client_type(h.type) || !proto::fixed_payload_size(type, &expected)) {
        fail(c, proto::ErrorCode::BadType,
             "message type " + std::to_string(h.type) + " is not sent by clients");
        return false;
    }
    if (h.length != expected) {
        fail(c, proto::ErrorCode::BadLength,
             "message type " + std::to_string(h.type) + " must carry " + std::to_string(expected) +
                 " bytes, not " + std::to_string(h.length));
        return false;
    }
    const auto now = Clock::now();
    if (type == MsgType::StatusQuery) {
        send_status(c, now);
        return true;
    }
    status_.changed();  // everything else a registered client sends changes state
    if (!c.registered) {
        fail(c, proto::ErrorCode::BadOrder, "Hello must come first");
        return false;
    }
    const ClientRecord& client = *scheduler_.client(c.serial);
    switch (type) {
        case MsgType::Memory: {
            proto::MemoryPayload m{};
            return proto::decode(payload, h.length, &m) && on_memory(c, client, m, now);
        }
        case MsgType::Stats: {
            proto::StatsPayload st{};
            return proto::decode(payload, h.length, &st) && on_stats(c, client, st, now);
        }
        case MsgType::Rates: {
            proto::RatesPayload r{};
            return proto::decode(payload, h.length, &r) && on_rates(c, client, r);
        }
        case MsgType::Request:
        case MsgType::Released: {
            proto::GpuMaskPayload m{};
            if (!proto::decode(payload, h.length, &m))
                return false;
            const auto set = client.to_global(m.gpus);
            if (!set) {
                fail(c, proto::ErrorCode::BadValue,
                     "GPU mask names a GPU the client did not register");
                return false;
            }
            if (type == MsgType::Request)
                on_request(c, client, *set, now);
            else
                on_released(client, *set, now);
            return true;
        }
        default:
            return true;  // not reached: every client type is handled above
    }
}

bool Server::on_memory(Connection& c, const ClientRecord& client, const proto::MemoryPayload& m,
                       TimePoint now)
{
    if (m.gpu >= client.gpus.size()) {
        fail(c, proto::ErrorCode::BadValue, "memory report for unknown GPU index");
        return false;
    }
    const GpuIndex gpu = client.gpus[m.gpu];
    if (!scheduler_.report_memory(c.serial, gpu, {m.managed_bytes, m.pinned_bytes}, now)) {
        fail(c, proto::ErrorCode::BadValue, "memory report out of bounds");
        return false;
    }
    if (m.room_wanted_mib != 0)
        scheduler_.want_room(c.serial, gpu, uint64_t{m.room_wanted_mib} << 20, now);
    // Memory of a user other than root counts for others as far as the
    // host confirms it: watch the GPU and the process.
    if (needs_confirming(client.info, {m.managed_bytes, m.pinned_bytes}) && memory_watch_ &&
        watched_.add(scheduler_.gpus()[gpu].description.uuid, client.info.pid))
        memory_watch_->watch(watched_.gpus, watched_.pids);
    return true;
}

void Server::on_memory_readings(const MemoryWatch::Readings& readings)
{
    const TimePoint now = Clock::now();
    ReadingChanges changes = reading_changes(scheduler_.clients(), scheduler_.gpus(), readings);
    for (const auto& [g, counts] : changes.counts_processes)
        scheduler_.set_host_counts_processes(g, counts);
    for (const auto& h : changes.host)
        scheduler_.confirm_host_memory(h.client, h.bytes, now);
    for (const auto& c : changes.gpus)
        scheduler_.confirm_memory(c.client, c.gpu, c.bytes, now);
    if (changes.watch != watched_) {
        watched_ = std::move(changes.watch);
        memory_watch_->watch(watched_.gpus, watched_.pids);
    }
    if (changes.confirmations_changed())
        after_change();
}

bool Server::on_stats(Connection& c, const ClientRecord& client, const proto::StatsPayload& st,
                      TimePoint now)
{
    if (st.gpu >= client.gpus.size()) {
        fail(c, proto::ErrorCode::BadValue, "statistics for unknown GPU index");
        return false;
    }
    using std::chrono::microseconds;
    const auto us = [](uint64_t v) {
        return microseconds(static_cast<int64_t>(std::min(v, kMaxReportedMicroseconds + 1)));
    };
    if (!scheduler_.report_swaps(c.serial, client.gpus[st.gpu],
                                 {st.bytes_prefetched, st.bytes_evicted, st.swap_ins,
                                  us(st.swap_in_us), st.swap_outs, us(st.swap_out_us)},
                                 now)) {
        fail(c, proto::ErrorCode::BadValue, "swap statistics out of bounds");
        return false;
    }
    return true;
}

bool Server::on_rates(Connection& c, const ClientRecord& client, const proto::RatesPayload& p)
{
    if (p.gpu >= client.gpus.size()) {
        fail(c, proto::ErrorCode::BadValue, "rates for unknown GPU index");
        return false;
    }
    const MeasuredRates rates = rates_from_wire(p);
    if (!plausible(rates)) {
        fail(c, proto::ErrorCode::BadValue,
             "a rate outside " + std::to_string(proto::kMinRate) + " to " +
                 std::to_string(proto::kMaxRate) + " bytes a second");
        return false;
    }
    const GpuIndex gpu = client.gpus[p.gpu];
    const Gpu& g = scheduler_.gpus()[gpu];
    const MeasuredRates before = g.rates;
    const bool learned = scheduler_.report_rates(gpu, rates);
    if (!kept_across_restarts(g))
        return true;
    rates_unsaved_ = rates_unsaved_ || g.rates != before;
    if (learned)
        save_rates();  // a figure known for the first time: kept at once
    return true;
}

bool Server::kept_across_restarts(const Gpu& g)
{
    // Not a GPU any user can make up: rates.json would grow with them.
    return g.listed_by_host || g.memory_confirmed;
}

void Server::take_kept_rates(GpuIndex gpu)
{
    const Gpu& g = scheduler_.gpus()[gpu];
    if (g.rates.any())
        return;
    if (const auto it = kept_rates_.find(g.description.uuid); it != kept_rates_.end())
        scheduler_.report_rates(gpu, it->second);
}

void Server::save_rates()
{
    std::map<std::string, MeasuredRates> all = kept_rates_;
    for (const Gpu& g : scheduler_.gpus())
        if (g.rates.any() && kept_across_restarts(g))
            all[g.description.uuid] = g.rates;
    if (rates_store_.save(all)) {
        kept_rates_ = std::move(all);
        rates_unsaved_ = false;
    }
}

void Server::send_known_rates(Connection& c)
{
    const ClientRecord* client = scheduler_.client(c.serial);
    if (client == nullptr)
        return;
    for (uint32_t i = 0; i < client->gpus.size(); ++i)
        c.send(proto::MsgType::KnownRates,
               rates_to_wire(scheduler_.gpus()[client->gpus[i]].rates, i));
}

void Server::on_request(Connection& c, const ClientRecord& client, GpuSet gpus, TimePoint now)
{
    scheduler_.request(c.serial, gpus, now);
    if (client.phase == Phase::Waiting && events_.waiting(c.serial, client.waiting_since)) {
        const EventSubject who = event_subject(scheduler_, client, client.wanted);
        events_.emit(EventKind::Waiting, LogLevel::Debug, &who, {{"waited_us", "0"}},
                     "waits for %s, held by %s",
                     who.gpu_uuids.empty() ? "?" : who.gpu_uuids[0].c_str(),
                     holders_text(scheduler_, client).c_str());
        log_due_waits(now);  // --log-waits-after 0: now, not at the next timer
    }
}

void Server::on_released(const ClientRecord& client, GpuSet gpus, TimePoint now)
{
    scheduler_.release(client.id, gpus, now);
    if (client.phase != Phase::Waiting)
        events_.not_waiting(client.id);
    const EventSubject who = event_subject(scheduler_, client, gpus);
    events_.emit(EventKind::Released, LogLevel::Debug, &who, {}, "released %s",
                 who.gpu_uuids.empty() ? "?" : who.gpu_uuids[0].c_str());
}

void Server::on_hello(Connection& c, const proto::Hello& hello)
{
    std::vector<GpuIndex> gpus;
    for (uint32_t i = 0; i < hello.gpu_count; ++i) {
        const proto::HelloGpu& g = hello.gpus[i];
        char text[kUuidTextSize];
        format_gpu_uuid(g.uuid, text);
        std::string refusal;
        const auto index =
            scheduler_.claim_gpu({text, printable_utf8(g.name, sizeof g.name), g.physical_memory},
                                 c.peer.uid, c.principal, Clock::now(), &refusal);
        if (!index) {
            fail(c, proto::ErrorCode::Refused, refusal);
            return;
        }
        for (GpuIndex existing : gpus) {
            if (existing == *index) {
                fail(c, proto::ErrorCode::BadValue, "the same GPU is named twice");
                return;
            }
        }
        gpus.push_back(*index);
        take_kept_rates(*index);
    }
    const std::string cgroup = process_cgroup_path(c.peer.pid);
    ClientInfo info{c.peer.pid, c.peer.uid, printable_utf8(hello.comm, sizeof hello.comm),
                    printable_utf8(cgroup_name(cgroup))};
    info.principal = c.principal;
    info.command = printable_utf8(process_command_line(c.peer.pid));
    const std::vector<uint32_t> groups = peer_groups(c.fd, c.peer.gid);
    // Unit rules see only the part of the path a user cannot have made.
    const std::string trusted = options_.priority_rules.empty() ? "" : root_owned_cgroup(cgroup);
    info.priority =
        settle_priority(options_.priority_rules, {c.peer.uid, groups, trusted}, hello.priority);
    if (!scheduler_.connect(c.serial, info, gpus, Clock::now())) {
        fail(c, proto::ErrorCode::Refused, "cannot register");
        return;
    }
    c.registered = true;
    status_.changed();
    c.arm_timer();
    const EventSubject who = event_subject(scheduler_, *scheduler_.client(c.serial), 0);
    const char* priority = proto::priority_name(info.priority);
    events_.emit(EventKind::Registered, LogLevel::Info, &who, {{"priority", priority}},
                 "registered as client %llu, %zu GPU(s), priority %s",
                 static_cast<unsigned long long>(c.serial), gpus.size(), priority);
    send_settings(c, true);
    send_known_rates(c);
}

void Server::fail(Connection& c, proto::ErrorCode code, const std::string& message)
{
    NVS_WARN("client %llu (pid %d): %s; disconnecting", static_cast<unsigned long long>(c.serial),
             c.peer.pid, message.c_str());
    c.send(proto::ErrorReply{code, message.data(), static_cast<uint32_t>(message.size())});
    c.closing = true;
    c.in.clear();
    if (c.registered) {
        // Whatever it held is given back now, not when the socket closes.
        events_.not_waiting(c.serial);
        scheduler_.disconnect(c.serial, Clock::now());
        c.registered = false;
        status_.changed();
    }
    if (c.out.size() == c.out_sent)
        c.mark_dead();
}

void Server::send_settings(Connection& c, bool welcome)
{
    const ClientRecord* client = scheduler_.client(c.serial);
    if (client == nullptr)
        return;
    const auto& s = scheduler_.settings();
    proto::Welcome w{};
    w.client_id = c.serial;
    w.settings.mode = s.mode;
    w.settings.time_quantum_us = to_usec(s.time_quantum);
    w.settings.gpu_count = static_cast<uint32_t>(client->gpus.size());
    for (uint32_t i = 0; i < w.settings.gpu_count; ++i)
        w.settings.capacities[i] = scheduler_.gpus()[client->gpus[i]].capacity;
    if (welcome)
        c.send(w);
    else
        c.send(w.settings);
}

void Server::broadcast_settings()
{
    for (auto& [serial, c] : connections_)
        if (c->registered)
            send_settings(*c, false);
}

// Waits that passed the threshold: who waits, for what, behind whom.
void Server::log_due_waits(TimePoint now)
{
    for (ClientId id : events_.due_waits(now)) {
        const ClientRecord* client = scheduler_.client(id);
        if (client == nullptr || client->phase != Phase::Waiting)
            continue;
        const EventSubject who = event_subject(scheduler_, *client, client->wanted);
        events_.emit(EventKind::Waiting, LogLevel::Info, &who,
                     {{"waited_us", std::to_string(to_usec(now - client->waiting_since))}},
                     "has waited %.1f s for %s, held by %s",
                     std::chrono::duration<double>(now - client->waiting_since).count(),
                     who.gpu_uuids.empty() ? "?" : who.gpu_uuids[0].c_str(),
                     holders_text(scheduler_, *client).c_str());
    }
}

void Server::after_change()
{
    // Closing connections may free locks, which yields more actions, and
    // sending those may find more dead connections: loop until neither is
    // left. Every round closes at least one connection, so this ends; a cap
    // would leave Grants unsent with no event to come back for them.
    for (;;) {
        dispatch_actions(scheduler_, events_, connections_);
        if (doomed_.empty())
            break;
        reap();
    }
    rearm_timer();
    update_idle_timer();
    status_line_.update(scheduler_);
    if (observer_)
        observer_();
}

void Server::reap()
{
    std::vector<uint64_t> doomed;
    doomed.swap(doomed_);
    for (uint64_t serial : doomed)
        if (auto it = connections_.find(serial); it != connections_.end())
            destroy(*it->second);
}

bool Server::await_exit(Connection& c)
{
    const ClientRecord* client = c.registered ? scheduler_.client(c.serial) : nullptr;
    if (client == nullptr || client->phase != Phase::Holding)
        return false;
    const int fd = exiting_process_fd(c.peer.pid);
    if (fd < 0)
        return false;
    if (sd_event_add_io(event_, &c.exit_watch, fd, EPOLLIN, on_process_exit, &c) < 0) {
        close(fd);
        return false;
    }
    c.exit_fd = fd;
    c.closed_at = Clock::now();
    // Nothing more is read or sent; the GPUs stay held as they are.
    c.close_socket();
    c.arm_timer();
    NVS_DEBUG(
        "client %llu (pid %d) closed its connection while its process exits: its GPUs stay "
        "held until it has ended (at most %lld s)",
        static_cast<unsigned long long>(c.serial), static_cast<int>(c.peer.pid),
        static_cast<long long>(kExitWaitMax.count()));
    return true;
}

void Server::destroy(Connection& c)
{
    if (c.exit_fd < 0 && await_exit(c))
        return;  // destroyed again once the process has ended
    if (c.registered) {
        if (const ClientRecord* client = scheduler_.client(c.serial)) {
            const EventSubject who = event_subject(scheduler_, *client, 0);
            char ended[64] = "";  // where we waited for its process to end
            if (c.exit_fd >= 0)
                snprintf(
                    ended, sizeof ended, "; its process ended %lld ms later",
                    static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                               Clock::now() - c.closed_at)
                                               .count()));
            events_.emit(EventKind::Gone, LogLevel::Info, &who, {}, "disconnected (client %llu)%s",
                         static_cast<unsigned long long>(c.serial), ended);
        }
        events_.not_waiting(c.serial);
        scheduler_.disconnect(c.serial, Clock::now());
    }
    status_.changed();
    if (auto it = connections_per_principal_.find(c.principal);
        it != connections_per_principal_.end() && --it->second == 0)
        connections_per_principal_.erase(it);
    connections_.erase(c.serial);  // closes it
    listener_.descriptor_freed();
    // A burst of clients leaves freed heap resident (written over where
    // MALLOC_PERTURB_ is set): give it back once the last one has gone.
    if (connections_.empty())
        malloc_trim(0);
}

void Server::rearm_timer()
{
    auto next = scheduler_.next_deadline();
    if (const auto wait = events_.next_wait_deadline())
        next = next ? std::min(*next, *wait) : *wait;
    if (!next) {
        sd_event_source_set_enabled(timer_source_, SD_EVENT_OFF);
        return;
    }
    sd_event_source_set_time(timer_source_, monotonic_usec(*next));
    sd_event_source_set_enabled(timer_source_, SD_EVENT_ONESHOT);
}

void Server::update_idle_timer()
{
    if (idle_source_ == nullptr)
        return;
    if (!connections_.empty()) {
        sd_event_source_set_enabled(idle_source_, SD_EVENT_OFF);
        return;
    }
    int enabled = 0;
    sd_event_source_get_enabled(idle_source_, &enabled);
    if (enabled != 0)
        return;  // already counting since the last client left
    const auto deadline = Clock::now() + *options_.idle_exit;
    sd_event_source_set_time(idle_source_, monotonic_usec(deadline));
    sd_event_source_set_enabled(idle_source_, SD_EVENT_ONESHOT);
}

// ---- control plane --------------------------------------------------------------------

int Server::on_reload_signal(sd_event_source*, const struct signalfd_siginfo*, void* self)
{
    auto* server = static_cast<Server*>(self);
    // systemd's reload protocol for Type=notify: RELOADING=1 with the time,
    // then READY=1 once done.
    char reloading[64];
    snprintf(
        reloading, sizeof reloading, "RELOADING=1\nMONOTONIC_USEC=%llu",
        static_cast<unsigned long long>(std::chrono::duration_cast<std::chrono::microseconds>(
                                            std::chrono::steady_clock::now().time_since_epoch())
                                            .count()));
    server->notifier_.send(reloading);
    if (server->reload_)
        server->reload_();
    else
        NVS_INFO("SIGHUP: nothing to reload");
    server->notifier_.send("READY=1");
    return 0;
}

void Server::set_admin_rules(std::vector<PriorityRule> rules, Duration grace,
                             Duration log_waits_after)
{
    options_.priority_rules = std::move(rules);
    options_.log_waits_after = log_waits_after;
    events_.set_wait_threshold(log_waits_after);
    if (scheduler_.settings().grace != grace) {
        scheduler_.set_grace(grace);
        after_change();
    }
}

void Server::after_settings_change(const SettingChange& change)
{
    EventDetails details{{"setting", change.setting}};
    if (!change.gpu_uuid.empty())
        details.emplace_back("gpu_uuid", change.gpu_uuid);
    details.emplace_back("value", change.value);
    events_.emit(EventKind::SettingChanged, LogLevel::Notice, nullptr, details, "%s",
                 change.text.c_str());
    status_.changed();
    if (change.tell_clients)
        broadcast_settings();
    after_change();
}

bool Server::revoke(ClientId id)
{
    const bool done = scheduler_.revoke(id, Clock::now());
    status_.changed();
    after_change();
    return done;
}

}  // namespace nvshare::daemon
