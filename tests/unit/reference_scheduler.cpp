#include "tests/unit/reference_scheduler.h"

#include <algorithm>

namespace nvshare::reference {

namespace {

template <typename F>
void for_each_gpu(GpuSet set, F&& f)
{
    while (set != 0) {
        const auto g = static_cast<GpuIndex>(__builtin_ctzll(set));
        set &= set - 1;
        f(g);
    }
}

void erase_value(std::vector<ClientId>& v, ClientId id)
{
    v.erase(std::remove(v.begin(), v.end(), id), v.end());
}

}  // namespace

// ---- Client -----------------------------------------------------------------

GpuSet Client::registered() const
{
    GpuSet s = 0;
    for (GpuIndex g : gpus)
        s |= gpu_bit(g);
    return s;
}

std::optional<GpuSet> Client::to_global(uint64_t local_mask) const
{
    GpuSet s = 0;
    for (size_t i = 0; i < 64; ++i) {
        if ((local_mask >> i & 1) == 0)
            continue;
        if (i >= gpus.size())
            return std::nullopt;
        s |= gpu_bit(gpus[i]);
    }
    return s;
}

uint64_t Client::to_local(GpuSet set) const
{
    uint64_t m = 0;
    for (size_t i = 0; i < gpus.size(); ++i)
        if (set & gpu_bit(gpus[i]))
            m |= uint64_t{1} << i;
    return m;
}

// ---- Scheduler: GPUs and settings ---------------------------------------------

Scheduler::Scheduler(SchedulerSettings settings) : settings_(settings) {}

std::optional<GpuIndex> Scheduler::ensure_gpu(const GpuDescription& description)
{
    for (GpuIndex g = 0; g < gpus_.size(); ++g) {
        if (gpus_[g].description.uuid == description.uuid) {
            // Fill in what an earlier client may not have known.
            auto& d = gpus_[g].description;
            if (d.name.empty())
                d.name = description.name;
            if (d.physical_memory == 0 && description.physical_memory != 0) {
                d.physical_memory = description.physical_memory;
                if (gpus_[g].capacity == 0)
                    gpus_[g].capacity = description.physical_memory;
            }
            return g;
        }
    }
    if (gpus_.size() >= kMaxGpus)
        return std::nullopt;
    Gpu gpu;
    gpu.description = description;
    if (auto it = capacity_overrides_.find(description.uuid); it != capacity_overrides_.end())
        gpu.capacity = it->second;
    else if (default_capacity_)
        gpu.capacity = *default_capacity_;
    else
        gpu.capacity = description.physical_memory;
    gpus_.push_back(std::move(gpu));
    return static_cast<GpuIndex>(gpus_.size() - 1);
}

void Scheduler::set_capacity_override(const std::string& uuid, uint64_t bytes)
{
    capacity_overrides_[uuid] = bytes;
}

void Scheduler::set_default_capacity(std::optional<uint64_t> bytes)
{
    default_capacity_ = bytes;
}

void Scheduler::set_capacity(GpuIndex gpu, uint64_t bytes, TimePoint now)
{
    if (gpu >= gpus_.size())
        return;
    gpus_[gpu].capacity = bytes;
    capacity_overrides_[gpus_[gpu].description.uuid] = bytes;
    schedule(now);
}

void Scheduler::set_mode(Mode mode, TimePoint now)
{
    settings_.mode = mode;
    schedule(now);
}

void Scheduler::set_time_quantum(Duration tq, TimePoint now)
{
    // Deadlines derive from granted_at + TQ, so the running quantum follows.
    settings_.time_quantum = tq;
    tick(now);
}

void Scheduler::set_grace(Duration grace)
{
    settings_.grace = grace;
}

// ---- views --------------------------------------------------------------------

const Client* Scheduler::client(ClientId id) const
{
    auto it = clients_.find(id);
    return it == clients_.end() ? nullptr : &it->second;
}

Client* Scheduler::find(ClientId id)
{
    auto it = clients_.find(id);
    return it == clients_.end() ? nullptr : &it->second;
}

uint64_t Scheduler::requested_memory(GpuIndex gpu) const
{
    uint64_t sum = 0;
    for (const auto& [id, c] : clients_)
        if (auto it = c.memory.find(gpu); it != c.memory.end())
            sum += it->second.total();
    return sum;
}

bool Scheduler::serializing(GpuIndex gpu) const
{
    switch (settings_.mode) {
        case Mode::On:
            return true;
        case Mode::Off:
            return false;
        case Mode::Auto:
            return gpu < gpus_.size() && requested_memory(gpu) > gpus_[gpu].capacity;
    }
    return true;
}

GpuSet Scheduler::exclusive_set() const
{
    GpuSet s = 0;
    for (GpuIndex g = 0; g < gpus_.size(); ++g)
        if (serializing(g))
            s |= gpu_bit(g);
    return s;
}

std::vector<Client*> Scheduler::waiters_in_order()
{
    std::vector<Client*> w;
    for (auto& [id, c] : clients_)
        if (c.phase == Phase::Waiting)
            w.push_back(&c);
    std::sort(w.begin(), w.end(),
              [](const Client* a, const Client* b) { return a->sequence < b->sequence; });
    return w;
}

GpuSet Scheduler::wanted_by_waiters() const
{
    GpuSet s = 0;
    for (const auto& [id, c] : clients_)
        if (c.phase == Phase::Waiting)
            s |= c.wanted;
    return s;
}

std::vector<ClientId> Scheduler::queue(GpuIndex gpu) const
{
    std::vector<const Client*> w;
    for (const auto& [id, c] : clients_)
        if (c.phase == Phase::Waiting && (c.wanted & gpu_bit(gpu)))
            w.push_back(&c);
    std::sort(w.begin(), w.end(),
              [](const Client* a, const Client* b) { return a->sequence < b->sequence; });
    std::vector<ClientId> ids;
    for (const Client* c : w)
        ids.push_back(c->id);
    return ids;
}

std::vector<Action> Scheduler::take_actions()
{
    std::vector<Action> out;
    out.swap(actions_);
    return out;
}

// ---- client events ---------------------------------------------------------------

bool Scheduler::connect(ClientId id, ClientInfo info, std::vector<GpuIndex> gpus)
{
    if (clients_.count(id) != 0)
        return false;
    for (GpuIndex g : gpus)
        if (g >= gpus_.size())
            return false;
    Client c;
    c.id = id;
    c.info = std::move(info);
    c.gpus = std::move(gpus);
    clients_.emplace(id, std::move(c));
    return true;
}

void Scheduler::request(ClientId id, GpuSet gpus, TimePoint now)
{
    Client* c = find(id);
    gpus &= c != nullptr ? c->registered() : 0;
    if (gpus == 0)
        return tick(now);  // every event looks at the time
    if (c->phase == Phase::Holding) {
        if ((gpus & ~c->held) == 0) {
            // Already held: answer again so a confused client resynchronises.
            actions_.push_back({ActionKind::Grant,
                                id,
                                c->held,
                                (c->held & exclusive_set()) == c->held,
                                c->contended_sent,
                                {}});
            return tick(now);
        }
        end_hold(*c, c->held, now);
    }
    if (c->phase == Phase::Idle) {
        c->sequence = next_sequence_++;
        c->waiting_since = now;
    }
    c->phase = Phase::Waiting;
    c->wanted = gpus;
    schedule(now);
}

void Scheduler::release(ClientId id, GpuSet gpus, TimePoint now)
{
    Client* c = find(id);
    if (c == nullptr)
        return;
    if (c->phase == Phase::Waiting && (c->wanted & gpus) != 0) {
        c->waited_total += now - c->waiting_since;
        c->phase = Phase::Idle;
        c->wanted = 0;
    } else if (c->phase == Phase::Holding && (c->held & gpus) != 0) {
        end_hold(*c, c->held & gpus, now);
    }
    schedule(now);
}

void Scheduler::report_memory(ClientId id, GpuIndex gpu, MemoryUse use, TimePoint now)
{
    Client* c = find(id);
    if (c == nullptr || (c->registered() & gpu_bit(gpu)) == 0)
        return;
    c->memory[gpu] = use;
    schedule(now);
}

void Scheduler::disconnect(ClientId id, TimePoint now)
{
    Client* c = find(id);
    if (c == nullptr)
        return;
    if (c->phase == Phase::Holding)
        end_hold(*c, c->held, now);
    clients_.erase(id);
    schedule(now);
}

bool Scheduler::revoke(ClientId id, TimePoint now)
{
    Client* c = find(id);
    if (c == nullptr || c->phase != Phase::Holding) {
        tick(now);
        return false;
    }
    revoke_hold(*c, now);
    schedule(now);
    return true;
}

// ---- internals ----------------------------------------------------------------------

void Scheduler::grant(Client& c, TimePoint now)
{
    c.phase = Phase::Holding;
    c.held = c.wanted;
    c.wanted = 0;
    c.granted_at = now;
    c.waited_total += now - c.waiting_since;
    c.grants++;
    c.drop_sent = false;
    c.contended_sent = false;
    for_each_gpu(c.held, [&](GpuIndex g) {
        gpus_[g].holders.push_back(c.id);
        gpus_[g].grants++;
    });
    const GpuSet excl = exclusive_set();
    actions_.push_back({ActionKind::Grant, c.id, c.held, (c.held & excl) == c.held, false, {}});
}

void Scheduler::end_hold(Client& c, GpuSet gpus, TimePoint now)
{
    for_each_gpu(gpus & c.held, [&](GpuIndex g) { erase_value(gpus_[g].holders, c.id); });
    c.held &= ~gpus;
    if (c.held == 0) {
        c.held_total += now - c.granted_at;
        c.phase = Phase::Idle;
        c.drop_sent = false;
        c.contended_sent = false;
    }
}

void Scheduler::send_drop(Client& c, TimePoint now)
{
    if (c.drop_sent)
        return;
    c.drop_sent = true;
    c.drop_deadline = now + settings_.grace;
    c.drops++;
    actions_.push_back({ActionKind::Drop, c.id, c.held, false, false, settings_.grace});
}

void Scheduler::revoke_hold(Client& c, TimePoint now)
{
    const GpuSet held = c.held;
    c.revocations++;
    end_hold(c, held, now);
    actions_.push_back({ActionKind::Revoke, c.id, held, false, false, {}});
}

void Scheduler::schedule(TimePoint now)
{
    const GpuSet excl = exclusive_set();

    // A GPU that became exclusive while several clients run on it keeps the
    // one granted first; the others are asked to let go.
    for (GpuIndex g = 0; g < gpus_.size(); ++g) {
        auto& holders = gpus_[g].holders;
        if ((excl & gpu_bit(g)) == 0 || holders.size() <= 1)
            continue;
        auto first = std::min_element(holders.begin(), holders.end(), [&](ClientId a, ClientId b) {
            return clients_.at(a).granted_at < clients_.at(b).granted_at;
        });
        const ClientId keep = *first;
        for (ClientId h : std::vector<ClientId>(holders))
            if (h != keep)
                send_drop(clients_.at(h), now);
    }

    // First come, first served. A waiter that cannot be granted reserves its
    // exclusive GPUs, so later arrivals never overtake it there.
    GpuSet reserved = 0;
    for (Client* w : waiters_in_order()) {
        bool can = true;
        for_each_gpu(w->wanted & excl, [&](GpuIndex g) {
            if (!gpus_[g].holders.empty() || (reserved & gpu_bit(g)))
                can = false;
        });
        if (can)
            grant(*w, now);
        else
            reserved |= w->wanted & excl;
    }

    // Tell holders of contended exclusive GPUs, once per grant, so that an
    // idle holder can hand over at once instead of at the end of its quantum.
    const GpuSet contended = wanted_by_waiters() & excl;
    for (auto& [id, c] : clients_) {
        if (c.phase == Phase::Holding && !c.contended_sent && (c.held & contended) != 0) {
            c.contended_sent = true;
            actions_.push_back({ActionKind::Contended, id, c.held & contended, false, true, {}});
        }
    }
    tick(now);
}

void Scheduler::tick(TimePoint now)
{
    const GpuSet contended = wanted_by_waiters() & exclusive_set();
    bool changed = false;
    for (auto& [id, c] : clients_) {
        if (c.phase != Phase::Holding)
            continue;
        if (c.drop_sent) {
            if (now >= c.drop_deadline) {
                revoke_hold(c, now);
                changed = true;
            }
        } else if ((c.held & contended) != 0 && now >= c.granted_at + settings_.time_quantum) {
            send_drop(c, now);
        }
    }
    if (changed)
        schedule(now);
}

std::optional<TimePoint> Scheduler::next_deadline() const
{
    const GpuSet contended = wanted_by_waiters() & exclusive_set();
    std::optional<TimePoint> next;
    auto consider = [&](TimePoint t) {
        if (!next || t < *next)
            next = t;
    };
    for (const auto& [id, c] : clients_) {
        if (c.phase != Phase::Holding)
            continue;
        if (c.drop_sent)
            consider(c.drop_deadline);
        else if ((c.held & contended) != 0)
            consider(c.granted_at + settings_.time_quantum);
    }
    return next;
}

}  // namespace nvshare::reference
