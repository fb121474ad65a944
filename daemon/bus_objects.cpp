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

constexpr const char* kInvalidArgs = "org.freedesktop.DBus.Error.InvalidArgs";
constexpr const char* kFailed = "org.freedesktop.DBus.Error.Failed";
constexpr const char* kNoSuchClient = "org.nvshare.Scheduler1.Error.NoSuchClient";
constexpr const char* kNotHolding = "org.nvshare.Scheduler1.Error.NotHolding";

// A setting the settings home refused, as the D-Bus error the caller gets.
sdbus::Error error_of(const Refusal& refusal)
{
    return sdbus::Error(refusal.why == Refusal::Why::Invalid ? kInvalidArgs : kFailed,
                        refusal.message);
}

void refuse(const std::optional<Refusal>& refusal)
{
    if (refusal)
        throw error_of(*refusal);
}

// What SettingsControl's setters throw from their authorization step when
// the value is valid and new: the caller must be asked about first.
struct NeedsAuthorization {};

// A setting changed through a method: checked at once (an invalid value, or
// the current one, is answered without asking anybody), then authorized
// asynchronously, then checked and applied again (the state may have
// changed while polkit answered). `set` is one of SettingsControl's setters
// bound to its value.
using Setter = std::function<std::optional<Refusal>(const SettingsControl::Authorize&)>;

void change_setting(sdbus::IObject& object, BusAuthorizer& authorizer, sdbus::Result<>&& result,
                    bool interactive, const char* what, Setter set)
{
    try {
        if (auto refused = set([] { throw NeedsAuthorization{}; }))
            result.returnError(error_of(*refused));
        else
            result.returnResults();
        return;
    } catch (const NeedsAuthorization&) {
    }
    auto reply = std::make_shared<sdbus::Result<>>(std::move(result));
    authorizer.authorize(object.getCurrentlyProcessedMessage()->getSender(),
                         {Operation::ChangeSettings}, interactive, what,
                         [reply, set](const sdbus::Error* refusal) {
                             if (refusal != nullptr) {
                                 reply->returnError(*refusal);
                             } else if (auto refused = set([] {})) {
                                 reply->returnError(error_of(*refused));
                             } else {
                                 reply->returnResults();
                             }
                         });
}

// Writing a property is for root: a property setter must answer before it
// returns, so it cannot wait for polkit. The writer's uid comes from the bus
// driver (a trusted source) in one synchronous call.
void root_only(sdbus::IObject& object, BusAuthorizer& authorizer, const char* property,
               const char* method)
{
    const auto message = object.getCurrentlyProcessedMessage();
    uid_t uid = kUnknownUid;
    try {
        uid = message->getCredsUid();
    } catch (const sdbus::Error& e) {
        NVS_WARN("cannot tell who wrote %s: %s", property, e.getMessage().c_str());
    }
    if (uid == 0)
        return;
    throw authorizer.refuse(uid, std::string("writing ") + property + " is for root; others call " +
                                     method + ", which asks polkit (as nvsharectl does)");
}

// Runs `answer` once the caller's status budget (shared with the lock
// socket's status queries) allows; else replies LimitsExceeded.
template <typename Value, typename Answer>
void within_status_rate(sdbus::IObject& object, BusAuthorizer& authorizer, Server& server,
                        sdbus::Result<Value>&& result, Answer answer)
{
    auto reply = std::make_shared<sdbus::Result<Value>>(std::move(result));
    authorizer.caller_uid(
        object.getCurrentlyProcessedMessage()->getSender(),
        [reply, &server, answer](std::optional<uid_t> uid, const sdbus::Error* error) {
            if (!uid) {
                reply->returnError(
                    error != nullptr ? *error : sdbus::Error(kFailed, "cannot tell who is asking"));
                return;
            }
            const auto now = Clock::now();
            const Duration wait = server.status_wait(*uid, now);
            if (wait != Duration::zero()) {
                const auto ms = std::chrono::ceil<std::chrono::milliseconds>(wait).count();
                reply->returnError(
                    sdbus::Error(kLimitsExceeded, "status queries of uid " + std::to_string(*uid) +
                                                      " exceed their rate; try again in " +
                                                      std::to_string(ms) + " ms"));
                return;
            }
            reply->returnResults(answer(now));
        });
}

}  // namespace

std::string gpu_object_path(GpuIndex gpu)
{
    return std::string(kManagerPath) + "/gpu/" + std::to_string(gpu);
}

// ---- manager --------------------------------------------------------------------

ManagerObject::ManagerObject(sdbus::IConnection& connection, Server& server,
                             SettingsControl& control, BusAuthorizer& authorizer)
    : AdaptorInterfaces(connection, kManagerPath),
      server_(server),
      control_(control),
      authorizer_(authorizer)
{
    registerAdaptor();
}

ManagerObject::~ManagerObject()
{
    unregisterAdaptor();
}

std::vector<ManagerObject::ClientRow> ManagerObject::client_rows() const
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

void ManagerObject::ListClients(sdbus::Result<std::vector<ClientRow>>&& result)
{
    within_status_rate(getObject(), authorizer_, server_, std::move(result),
                       [this](TimePoint) { return client_rows(); });
}

void ManagerObject::GetStatus(sdbus::Result<std::string>&& result)
{
    within_status_rate(getObject(), authorizer_, server_, std::move(result),
                       [this](TimePoint now) { return server_.status_document(now); });
}

void ManagerObject::RevokeClient(sdbus::Result<>&& result, uint64_t id)
{
    const auto* client = server_.scheduler().client(id);
    if (client == nullptr) {
        result.returnError(sdbus::Error(kNoSuchClient, "no client with id " + std::to_string(id)));
        return;
    }
    auto reply = std::make_shared<sdbus::Result<>>(std::move(result));
    // The owner is the uid the lock socket saw (SO_PEERCRED), not a claim.
    authorizer_.authorize(
        getObject().getCurrentlyProcessedMessage()->getSender(),
        {Operation::Revoke, kUnknownUid, client->info.uid}, false, "revoking a client's lock",
        [this, reply, id](const sdbus::Error* refusal) {
            if (refusal != nullptr) {
                reply->returnError(*refusal);
                return;
            }
            // Looked up again: it may have gone while polkit answered.
            if (server_.scheduler().client(id) == nullptr) {
                reply->returnError(
                    sdbus::Error(kNoSuchClient, "no client with id " + std::to_string(id)));
                return;
            }
            NVS_NOTICE("revoking the lock of client %llu on request",
                       static_cast<unsigned long long>(id));
            if (!server_.revoke(id)) {
                reply->returnError(
                    sdbus::Error(kNotHolding, "client " + std::to_string(id) + " holds no lock"));
                return;
            }
            reply->returnResults();
        });
}

void ManagerObject::ResetSettings(sdbus::Result<>&& result)
{
    change_setting(getObject(), authorizer_, std::move(result), false, "resetting nvshare settings",
                   [this](const SettingsControl::Authorize& a) { return control_.reset(a); });
}

void ManagerObject::SetTimeQuantum(sdbus::Result<>&& result, uint64_t usec, bool interactive)
{
    change_setting(getObject(), authorizer_, std::move(result), interactive,
                   "changing nvshare settings", [this, usec](const SettingsControl::Authorize& a) {
                       return control_.set_time_quantum(usec, a);
                   });
}

void ManagerObject::SetAntiThrashing(sdbus::Result<>&& result, std::string mode, bool interactive)
{
    change_setting(
        getObject(), authorizer_, std::move(result), interactive, "changing nvshare settings",
        [this, mode](const SettingsControl::Authorize& a) { return control_.set_mode(mode, a); });
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
        root_only(getObject(), authorizer_, "TimeQuantumUSec", "SetTimeQuantum");
    }));
}

std::string ManagerObject::AntiThrashing()
{
    return proto::mode_name(server_.scheduler().settings().mode);
}

void ManagerObject::AntiThrashing(const std::string& value)
{
    refuse(control_.set_mode(value, [this] {
        root_only(getObject(), authorizer_, "AntiThrashing", "SetAntiThrashing");
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
                     BusAuthorizer& authorizer, GpuIndex index)
    : AdaptorInterfaces(connection, gpu_object_path(index)),
      server_(server),
      control_(control),
      authorizer_(authorizer),
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
    refuse(control_.set_capacity(
        index_, value, [this] { root_only(getObject(), authorizer_, "Capacity", "SetCapacity"); }));
}

uint64_t GpuObject::TimeQuantumUSec()
{
    return to_usec(server_.scheduler().time_quantum_of(index_));
}

void GpuObject::TimeQuantumUSec(const uint64_t& value)
{
    refuse(control_.set_gpu_time_quantum(index_, value, [this] {
        root_only(getObject(), authorizer_, "TimeQuantumUSec", "SetTimeQuantum");
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
        root_only(getObject(), authorizer_, "AntiThrashing", "SetAntiThrashing");
    }));
}

bool GpuObject::OwnAntiThrashing()
{
    return server_.scheduler().gpu_modes().contains(gpu().description.uuid);
}

void GpuObject::ResetSettings(sdbus::Result<>&& result)
{
    change_setting(
        getObject(), authorizer_, std::move(result), false, "resetting nvshare settings",
        [this](const SettingsControl::Authorize& a) { return control_.reset_gpu(index_, a); });
}

void GpuObject::SetCapacity(sdbus::Result<>&& result, uint64_t bytes, bool interactive)
{
    change_setting(getObject(), authorizer_, std::move(result), interactive,
                   "changing nvshare settings", [this, bytes](const SettingsControl::Authorize& a) {
                       return control_.set_capacity(index_, bytes, a);
                   });
}

void GpuObject::SetTimeQuantum(sdbus::Result<>&& result, uint64_t usec, bool interactive)
{
    change_setting(getObject(), authorizer_, std::move(result), interactive,
                   "changing nvshare settings", [this, usec](const SettingsControl::Authorize& a) {
                       return control_.set_gpu_time_quantum(index_, usec, a);
                   });
}

void GpuObject::SetAntiThrashing(sdbus::Result<>&& result, std::string mode, bool interactive)
{
    change_setting(getObject(), authorizer_, std::move(result), interactive,
                   "changing nvshare settings", [this, mode](const SettingsControl::Authorize& a) {
                       return control_.set_gpu_mode(index_, mode, a);
                   });
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
