#include "daemon/bus_objects.h"

#include "build-config.h"
#include "common/log.h"
#include "common/mode.h"
#include "daemon/settings.h"
#include "daemon/status.h"

namespace nvshare::daemon {

namespace {

constexpr const char* kAccessDenied = "org.freedesktop.DBus.Error.AccessDenied";
constexpr const char* kInvalidArgs = "org.freedesktop.DBus.Error.InvalidArgs";
constexpr const char* kNoSuchClient = "org.nvshare.Scheduler1.Error.NoSuchClient";
constexpr const char* kNotHolding = "org.nvshare.Scheduler1.Error.NotHolding";

uint64_t usec(Duration d)
{
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
}

// Writes are for root alone. The uid comes from the bus driver (a trusted
// source), fetched with one synchronous call: only writes pay for it.
void require_root(sdbus::IObject& object, const char* action)
{
    const auto message = object.getCurrentlyProcessedMessage();
    uid_t uid = static_cast<uid_t>(-1);
    try {
        uid = message->getCredsUid();
    } catch (const sdbus::Error& e) {
        NVS_WARN("cannot tell who sent %s: %s", message->getMemberName().c_str(),
                 e.getMessage().c_str());
    }
    if (uid != 0) {
        NVS_NOTICE("refused uid %d: %s requires root", static_cast<int>(uid), action);
        throw sdbus::Error(kAccessDenied, std::string(action) + " requires root");
    }
}

}  // namespace

std::string gpu_object_path(GpuIndex gpu)
{
    return std::string(kManagerPath) + "/gpu/" + std::to_string(gpu);
}

// ---- manager --------------------------------------------------------------------

ManagerObject::ManagerObject(sdbus::IConnection& connection, Server& server,
                             SettingsControl& control)
    : AdaptorInterfaces(connection, kManagerPath), server_(server), control_(control)
{
    registerAdaptor();
}

ManagerObject::~ManagerObject()
{
    unregisterAdaptor();
}

std::vector<ManagerObject::Client> ManagerObject::ListClients()
{
    const auto now = Clock::now();
    std::vector<Client> out;
    for (const auto& [id, c] : server_.scheduler().clients()) {
        uint64_t memory = 0;
        for (const auto& [g, use] : c.memory)
            memory += use.total();
        out.emplace_back(id, c.info.pid, c.info.uid, c.info.comm, phase_name(c.phase), c.gpus,
                         memory, usec(held_so_far(c, now)), usec(waited_so_far(c, now)));
    }
    return out;
}

void ManagerObject::RevokeClient(const uint64_t& id)
{
    require_root(getObject(), "revoking a client's lock");
    if (server_.scheduler().client(id) == nullptr)
        throw sdbus::Error(kNoSuchClient, "no client with id " + std::to_string(id));
    NVS_NOTICE("revoking the lock of client %llu on request", static_cast<unsigned long long>(id));
    if (!server_.revoke(id))
        throw sdbus::Error(kNotHolding, "client " + std::to_string(id) + " holds no lock");
}

void ManagerObject::ResetSettings()
{
    require_root(getObject(), "resetting nvshare settings");
    control_.reset();
}

std::string ManagerObject::Version()
{
    return NVSHARE_VERSION;
}

uint64_t ManagerObject::TimeQuantumUSec()
{
    return usec(server_.scheduler().settings().time_quantum);
}

void ManagerObject::TimeQuantumUSec(const uint64_t& value)
{
    require_root(getObject(), "changing nvshare settings");
    const uint64_t max_usec = usec(kMaxTimeQuantum);
    const Duration tq = std::chrono::microseconds(std::min(value, max_usec + 1));
    if (!valid_time_quantum(tq))
        throw sdbus::Error(kInvalidArgs, "time quantum " + std::to_string(value) +
                                             " us is out of range (valid: 1000 to " +
                                             std::to_string(max_usec) + " us, i.e. " +
                                             kTimeQuantumRange + ")");
    control_.set_time_quantum(tq);
}

std::string ManagerObject::AntiThrashing()
{
    return proto::mode_name(server_.scheduler().settings().mode);
}

void ManagerObject::AntiThrashing(const std::string& value)
{
    require_root(getObject(), "changing nvshare settings");
    const auto mode = parse_mode(value);
    if (!mode)
        throw sdbus::Error(kInvalidArgs,
                           "unknown anti-thrashing mode '" + value + "' (valid: on, off, auto)");
    control_.set_mode(*mode);
}

uint64_t ManagerObject::GraceUSec()
{
    return usec(server_.scheduler().settings().grace);
}

uint32_t ManagerObject::ClientCount()
{
    return static_cast<uint32_t>(server_.scheduler().clients().size());
}

// ---- GPUs -----------------------------------------------------------------------

GpuObject::GpuObject(sdbus::IConnection& connection, Server& server, SettingsControl& control,
                     GpuIndex index)
    : AdaptorInterfaces(connection, gpu_object_path(index)),
      server_(server),
      control_(control),
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
    require_root(getObject(), "changing nvshare settings");
    if (value == 0)
        throw sdbus::Error(kInvalidArgs, "capacity must be greater than 0 bytes");
    control_.set_capacity(index_, value);
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

std::vector<GpuObject::Client> GpuObject::Clients()
{
    const auto now = Clock::now();
    std::vector<Client> out;
    for (const auto& [id, c] : server_.scheduler().clients()) {
        if (std::find(c.gpus.begin(), c.gpus.end(), index_) == c.gpus.end())
            continue;
        const auto use = c.memory.find(index_);
        const uint64_t memory = use == c.memory.end() ? 0 : use->second.total();
        out.emplace_back(id, c.info.pid, c.info.uid, c.info.comm, phase_name(c.phase), memory,
                         usec(held_so_far(c, now)), usec(waited_so_far(c, now)));
    }
    return out;
}

}  // namespace nvshare::daemon
