#include "daemon/bus_service.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <map>

#include "daemon/log.h"

namespace nvshare::daemon {

namespace {

constexpr const char* kManagerInterface = "org.nvshare.Scheduler1.Manager";
constexpr const char* kGpuInterface = "org.nvshare.Scheduler1.Gpu";
// Bus messages handled per round of the daemon's loop.
constexpr int kMessagesPerRound = 32;

}  // namespace

std::unique_ptr<BusService> BusService::start(Server& server, SettingsControl& control)
{
    std::unique_ptr<BusService> service;
    try {
        service.reset(new BusService(server, control, sdbus::createSystemBusConnection()));
        // Name last, so callers who see it find the objects in place.
        service->connection_->requestName(kBusName);
    } catch (const sdbus::Error& e) {
        NVS_WARN("no D-Bus interface (%s: %s); serving the lock without it", e.getName().c_str(),
                 e.getMessage().c_str());
        return nullptr;
    }
    if (!service->attach(server.event())) {
        NVS_WARN("cannot watch the system bus connection; serving the lock without D-Bus");
        return nullptr;
    }
    NVS_INFO("on the system bus as %s", kBusName);
    return service;
}

BusService::BusService(Server& server, SettingsControl& control,
                       std::unique_ptr<sdbus::IConnection> connection)
    : server_(server),
      control_(control),
      connection_(std::move(connection)),
      authorizer_(std::make_unique<BusAuthorizer>(*connection_))
{
    manager_ = std::make_unique<ManagerObject>(*connection_, server_, control_, *authorizer_);
    manager_sent_ = manager_values();
}

BusService::~BusService()
{
    server_.set_state_observer(nullptr);
    server_.set_event_observer(nullptr);
    sd_event_source_disable_unref(io_source_);
    sd_event_source_disable_unref(timer_source_);
    gpus_.clear();
    manager_.reset();
}

bool BusService::attach(sd_event* event)
{
    const auto poll = connection_->getEventLoopPollData();
    if (sd_event_add_io(event, &io_source_, poll.fd, static_cast<uint32_t>(poll.events), on_io,
                        this) < 0)
        return false;
    // Before every poll of the loop: handle what came in, send what is queued.
    if (sd_event_source_set_prepare(io_source_, on_prepare) < 0)
        return false;
    if (sd_event_add_time(event, &timer_source_, CLOCK_MONOTONIC, UINT64_MAX, 0, on_timer, this) <
        0)
        return false;
    sd_event_source_set_enabled(timer_source_, SD_EVENT_OFF);
    server_.set_state_observer([this] { on_state_changed(); });
    server_.set_event_observer([this](const Event& e) { on_event(e); });
    on_state_changed();  // GPUs known before the bus came up
    return true;
}

int BusService::on_io(sd_event_source*, int, uint32_t, void* self)
{
    static_cast<BusService*>(self)->process();
    return 0;
}

int BusService::on_timer(sd_event_source*, uint64_t, void* self)
{
    static_cast<BusService*>(self)->process();
    return 0;
}

int BusService::on_prepare(sd_event_source*, void* self)
{
    static_cast<BusService*>(self)->process();
    return 0;
}

void BusService::process()
{
    if (broken_)
        return;
    try {
        // At most kMessagesPerRound messages, so that a flood of bus calls
        // leaves the lock's sockets their turn in the loop; what is left in
        // sd-bus's queue (a synchronous call inside a handler can pull
        // messages into it that the socket no longer shows) is taken up at
        // once in the next round (the timer below).
        int handled = 0;
        while (handled < kMessagesPerRound && connection_->processPendingRequest())
            ++handled;
        const bool more = handled == kMessagesPerRound;
        // What sd-bus waits for changes (POLLOUT while it has output queued,
        // a timeout while a reply is pending): follow it every time.
        const auto poll = connection_->getEventLoopPollData();
        sd_event_source_set_io_events(io_source_, static_cast<uint32_t>(poll.events));
        if (more) {
            sd_event_source_set_time(timer_source_, 0);
            sd_event_source_set_enabled(timer_source_, SD_EVENT_ONESHOT);
        } else if (poll.timeout_usec == UINT64_MAX) {
            sd_event_source_set_enabled(timer_source_, SD_EVENT_OFF);
        } else {
            sd_event_source_set_time(timer_source_, poll.timeout_usec);
            sd_event_source_set_enabled(timer_source_, SD_EVENT_ONESHOT);
        }
    } catch (const sdbus::Error& e) {
        shut_down(e.getMessage().c_str());
    } catch (const std::exception& e) {
        shut_down(e.what());
    }
}

void BusService::shut_down(const char* why)
{
    NVS_WARN("lost the system bus (%s); serving the lock without D-Bus", why);
    broken_ = true;
    // The sources stay allocated (this may run inside one of their callbacks)
    // until the destructor; they just never fire again.
    sd_event_source_set_enabled(io_source_, SD_EVENT_OFF);
    sd_event_source_set_enabled(timer_source_, SD_EVENT_OFF);
    server_.set_state_observer(nullptr);
    server_.set_event_observer(nullptr);
}

void BusService::on_event(const Event& e)
{
    if (broken_)
        return;
    const std::map<std::string, std::string> details(e.details.begin(), e.details.end());
    const EventSubject none{};
    const EventSubject& who = e.subject != nullptr ? *e.subject : none;
    emit("Event", [&] {
        manager_->emitEvent(event_name(e.kind), who.client, who.info.pid, who.info.uid,
                            who.info.comm, who.gpu_uuids, details, e.what);
    });
}

BusService::ManagerValues BusService::manager_values() const
{
    const Scheduler& s = server_.scheduler();
    return {to_usec(s.settings().time_quantum), s.settings().mode, s.clients().size()};
}

BusService::GpuValues BusService::gpu_values(GpuIndex gpu) const
{
    const Scheduler& s = server_.scheduler();
    const std::string& uuid = s.gpus()[gpu].description.uuid;
    return {s.gpus()[gpu].description.physical_memory,
            s.gpus()[gpu].capacity,
            to_usec(s.time_quantum_of(gpu)),
            s.gpu_time_quanta().contains(uuid),
            s.mode_of(gpu),
            s.gpu_modes().contains(uuid),
            s.requested_memory(gpu),
            s.serializing(gpu),
            s.gpus()[gpu].holders,
            s.queue(gpu)};
}

// A signal that cannot be sent (sd-bus refuses a value, say) is lost, and
// logged; the bus stays. A connection that broke shows up in process().
template <typename Emit>
void BusService::emit(const char* what, Emit&& emit_signal)
{
    try {
        emit_signal();
    } catch (const sdbus::Error& e) {
        NVS_WARN("cannot emit %s on the bus (%s); carrying on", what, e.getMessage().c_str());
    }
}

void BusService::on_state_changed()
{
    if (broken_)
        return;
    const ManagerValues now = manager_values();
    std::vector<std::string> changed;
    if (now.time_quantum_us != manager_sent_.time_quantum_us)
        changed.emplace_back("TimeQuantumUSec");
    if (now.mode != manager_sent_.mode)
        changed.emplace_back("AntiThrashing");
    if (now.clients != manager_sent_.clients)
        changed.emplace_back("ClientCount");
    if (!changed.empty())
        emit("PropertiesChanged",
             [&] { manager_->emitPropertiesChangedSignal(kManagerInterface, changed); });
    manager_sent_ = now;

    const auto& gpus = server_.scheduler().gpus();
    for (GpuIndex g = 0; g < gpus.size(); ++g) {
        if (g == gpus_.size()) {
            // A GPU the daemon has just met: it gets its object now.
            try {
                gpus_.push_back(
                    std::make_unique<GpuObject>(*connection_, server_, control_, *authorizer_, g));
            } catch (const sdbus::Error& e) {
                NVS_WARN("cannot put GPU %u on the bus (%s)", g, e.getMessage().c_str());
                return;  // tried again at the next change
            }
            emit("InterfacesAdded", [&] { gpus_.back()->emitInterfacesAddedSignal(); });
            gpus_sent_.push_back(gpu_values(g));
            continue;
        }
        const GpuValues values = gpu_values(g);
        const GpuValues& sent = gpus_sent_[g];
        changed.clear();
        if (values.physical != sent.physical)
            changed.emplace_back("PhysicalMemory");
        if (values.capacity != sent.capacity)
            changed.emplace_back("Capacity");
        if (values.time_quantum_us != sent.time_quantum_us)
            changed.emplace_back("TimeQuantumUSec");
        if (values.own_time_quantum != sent.own_time_quantum)
            changed.emplace_back("OwnTimeQuantum");
        if (values.mode != sent.mode)
            changed.emplace_back("AntiThrashing");
        if (values.own_mode != sent.own_mode)
            changed.emplace_back("OwnAntiThrashing");
        if (values.requested != sent.requested)
            changed.emplace_back("RequestedMemory");
        if (values.serializing != sent.serializing)
            changed.emplace_back("Serializing");
        if (values.holders != sent.holders)
            changed.emplace_back("Holders");
        if (values.queue != sent.queue)
            changed.emplace_back("Queue");
        if (!changed.empty())
            emit("PropertiesChanged",
                 [&] { gpus_[g]->emitPropertiesChangedSignal(kGpuInterface, changed); });
        gpus_sent_[g] = values;
    }
}

}  // namespace nvshare::daemon
