#include "daemon/bus_objects.h"

#include <cstdint>

#include "build-config.h"
#include "common/mode.h"
#include "daemon/authorization.h"
#include "daemon/client_facts.h"
#include "daemon/log.h"
#include "daemon/settings.h"
#include "daemon/status.h"

namespace nvshare::daemon {

namespace {

constexpr const char* kAccessDenied = "org.freedesktop.DBus.Error.AccessDenied";
constexpr const char* kInvalidArgs = "org.freedesktop.DBus.Error.InvalidArgs";
constexpr const char* kFailed = "org.freedesktop.DBus.Error.Failed";
constexpr const char* kNoSuchClient = "org.nvshare.Scheduler1.Error.NoSuchClient";
constexpr const char* kNotHolding = "org.nvshare.Scheduler1.Error.NotHolding";

// A setting the settings home refused, as the D-Bus error the caller gets.
void refuse(const std::optional<Refusal>& refusal)
{
    if (refusal)
        throw sdbus::Error(refusal->why == Refusal::Why::Invalid ? kInvalidArgs : kFailed,
                           refusal->message);
}

// Root may write at once; anyone else needs polkit's yes for the action the
// request needs (daemon/authorization.h). The caller's uid comes from the bus
// driver (a trusted source), fetched with one synchronous call: only writes
// pay for it.
void authorize(sdbus::IObject& object, PolkitAuthority& polkit, Request request, const char* what)
{
    const auto message = object.getCurrentlyProcessedMessage();
    const std::string sender = message->getSender();
    try {
        request.caller = message->getCredsUid();
    } catch (const sdbus::Error& e) {
        NVS_WARN("cannot tell who sent %s: %s", message->getMemberName().c_str(),
                 e.getMessage().c_str());
    }
    const auto action = required_action(request);
    if (!action)
        return;
    const int uid = static_cast<int>(request.caller);
    std::string detail;
    const Verdict verdict = polkit.check(sender, *action, detail);
    if (verdict == Verdict::Allowed) {
        NVS_NOTICE("uid %d allowed by polkit (%.*s): %s", uid, static_cast<int>(action->size()),
                   action->data(), what);
        return;
    }
    const std::string refusal = denial_message(what, *action, verdict, detail);
    NVS_NOTICE("refused uid %d: %s", uid, refusal.c_str());
    throw sdbus::Error(kAccessDenied, refusal);
}

}  // namespace

std::string gpu_object_path(GpuIndex gpu)
{
    return std::string(kManagerPath) + "/gpu/" + std::to_string(gpu);
}

// ---- manager --------------------------------------------------------------------

ManagerObject::ManagerObject(sdbus::IConnection& connection, Server& server,
                             SettingsControl& control, PolkitAuthority& polkit)
    : AdaptorInterfaces(connection, kManagerPath),
      server_(server),
      control_(control),
      polkit_(polkit)
{
    registerAdaptor();
}

ManagerObject::~ManagerObject()
{
    unregisterAdaptor();
}

std::vector<ManagerObject::ClientRow> ManagerObject::ListClients()
{
    const auto now = Clock::now();
    std::vector<ClientRow> out;
    for (const auto& [id, c] : server_.scheduler().clients()) {
        const ClientFacts f = client_facts(server_.scheduler(), c, now);
        out.emplace_back(id, c.info.pid, c.info.uid, c.info.comm, f.state, c.gpus, f.memory,
                         to_usec(f.held), to_usec(f.waited));
    }
    return out;
}

std::string ManagerObject::GetStatus()
{
    // No size bound here: a D-Bus message may carry far more than a frame.
    return status_text(server_.scheduler(), server_.connection_count(), Clock::now(), SIZE_MAX);
}

void ManagerObject::RevokeClient(const uint64_t& id)
{
    const auto* client = server_.scheduler().client(id);
    if (client == nullptr)
        throw sdbus::Error(kNoSuchClient, "no client with id " + std::to_string(id));
    // The owner is the uid the lock socket saw (SO_PEERCRED), not a claim.
    authorize(getObject(), polkit_, {Operation::Revoke, kUnknownUid, client->info.uid},
              "revoking a client's lock");
    NVS_NOTICE("revoking the lock of client %llu on request", static_cast<unsigned long long>(id));
    if (!server_.revoke(id))
        throw sdbus::Error(kNotHolding, "client " + std::to_string(id) + " holds no lock");
}

void ManagerObject::ResetSettings()
{
    refuse(control_.reset([this] {
        authorize(getObject(), polkit_, {Operation::ChangeSettings}, "resetting nvshare settings");
    }));
}

std::string ManagerObject::Version()
{
    return NVSHARE_VERSION;
}

uint64_t ManagerObject::TimeQuantumUSec()
{
    return to_usec(server_.scheduler().settings().time_quantum);
}

void ManagerObject::TimeQuantumUSec(const uint64_t& value)
{
    refuse(control_.set_time_quantum(value, [this] {
        authorize(getObject(), polkit_, {Operation::ChangeSettings}, "changing nvshare settings");
    }));
}

std::string ManagerObject::AntiThrashing()
{
    return proto::mode_name(server_.scheduler().settings().mode);
}

void ManagerObject::AntiThrashing(const std::string& value)
{
    refuse(control_.set_mode(value, [this] {
        authorize(getObject(), polkit_, {Operation::ChangeSettings}, "changing nvshare settings");
    }));
}

uint64_t ManagerObject::GraceUSec()
{
    return to_usec(server_.scheduler().settings().grace);
}

uint32_t ManagerObject::ClientCount()
{
    return static_cast<uint32_t>(server_.scheduler().clients().size());
}

// ---- GPUs -----------------------------------------------------------------------

GpuObject::GpuObject(sdbus::IConnection& connection, Server& server, SettingsControl& control,
                     PolkitAuthority& polkit, GpuIndex index)
    : AdaptorInterfaces(connection, gpu_object_path(index)),
      server_(server),
      control_(control),
      polkit_(polkit),
      index_(index)
{
    registerAdaptor();
}

GpuObject::~GpuObject()
{
    unregisterAdaptor();
}

const Gpu& GpuObject::gpu() const
{
    return server_.scheduler().gpus().at(index_);
}

uint32_t GpuObject::Index()
{
    return index_;
}
std::string GpuObject::UUID()
{
    return gpu().description.uuid;
}
std::string GpuObject::Name()
{
    return gpu().description.name;
}
uint64_t GpuObject::PhysicalMemory()
{
    return gpu().description.physical_memory;
}
uint64_t GpuObject::Capacity()
{
    return gpu().capacity;
}

void GpuObject::Capacity(const uint64_t& value)
{
    refuse(control_.set_capacity(index_, value, [this] {
        authorize(getObject(), polkit_, {Operation::ChangeSettings}, "changing nvshare settings");
    }));
}

uint64_t GpuObject::TimeQuantumUSec()
{
    return to_usec(server_.scheduler().time_quantum_of(index_));
}

void GpuObject::TimeQuantumUSec(const uint64_t& value)
{
    refuse(control_.set_gpu_time_quantum(index_, value, [this] {
        authorize(getObject(), polkit_, {Operation::ChangeSettings}, "changing nvshare settings");
    }));
}

bool GpuObject::OwnTimeQuantum()
{
    return server_.scheduler().gpu_time_quanta().contains(gpu().description.uuid);
}

std::string GpuObject::AntiThrashing()
{
    return proto::mode_name(server_.scheduler().mode_of(index_));
}

void GpuObject::AntiThrashing(const std::string& value)
{
    refuse(control_.set_gpu_mode(index_, value, [this] {
        authorize(getObject(), polkit_, {Operation::ChangeSettings}, "changing nvshare settings");
    }));
}

bool GpuObject::OwnAntiThrashing()
{
    return server_.scheduler().gpu_modes().contains(gpu().description.uuid);
}

void GpuObject::ResetSettings()
{
    refuse(control_.reset_gpu(index_, [this] {
        authorize(getObject(), polkit_, {Operation::ChangeSettings}, "resetting nvshare settings");
    }));
}

uint64_t GpuObject::RequestedMemory()
{
    return server_.scheduler().requested_memory(index_);
}
bool GpuObject::Serializing()
{
    return server_.scheduler().serializing(index_);
}
std::vector<uint64_t> GpuObject::Holders()
{
    return gpu().holders;
}
std::vector<uint64_t> GpuObject::Queue()
{
    return server_.scheduler().queue(index_);
}

std::vector<GpuObject::ClientRow> GpuObject::Clients()
{
    const auto now = Clock::now();
    std::vector<ClientRow> out;
    for (const auto& [id, c] : server_.scheduler().clients()) {
        if (std::find(c.gpus.begin(), c.gpus.end(), index_) == c.gpus.end())
            continue;
        const ClientFacts f = client_facts(server_.scheduler(), c, now);
        out.emplace_back(id, c.info.pid, c.info.uid, c.info.comm, f.state, memory_on(c, index_),
                         to_usec(f.held), to_usec(f.waited));
    }
    return out;
}

}  // namespace nvshare::daemon
