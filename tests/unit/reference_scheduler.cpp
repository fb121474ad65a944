#include "tests/unit/reference_scheduler.h"

#include <algorithm>
#include <bit>
#include <string>
#include <utility>

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

// ---- Auto mode ------------------------------------------------------------------

Turns turns_for(Mode mode, uint64_t requested, uint64_t capacity)
{
    switch (mode) {
        case Mode::Off:
            return Turns::Free;
        case Mode::On:
            return Turns::Strict;
        case Mode::Auto:
            return requested > capacity ? Turns::Groups : Turns::Soft;
    }
    return Turns::Strict;
}

namespace {

const char* name_of(Turns t)
{
    switch (t) {
        case Turns::Free:
            return "free";
        case Turns::Soft:
            return "soft";
        case Turns::Groups:
            return "groups";
        case Turns::Strict:
            return "strict";
    }
    return "?";
}

std::string said(const char* what, ClientId id, GpuSet gpus)
{
    return std::string(what) + " to client " + std::to_string(id) + " for GPUs " +
           std::to_string(gpus);
}

std::string ms_of(TimePoint t)
{
    return std::to_string(
               std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch())
                   .count()) +
           " ms";
}

}  // namespace

AutoModel::AutoModel(Mode mode, Duration quantum, Duration grace)
    : mode_(mode), quantum_(quantum), grace_(grace)
{
}

void AutoModel::time(TimePoint now)
{
    now_ = std::max(now_, now);
}

GpuIndex AutoModel::add_gpu(uint64_t capacity)
{
    gpus_.push_back({capacity, {}, {}});
    return static_cast<GpuIndex>(gpus_.size() - 1);
}

void AutoModel::set_capacity(GpuIndex gpu, uint64_t bytes)
{
    gpus_.at(gpu).capacity = bytes;
}

void AutoModel::set_mode(Mode mode)
{
    mode_ = mode;
}

void AutoModel::set_quantum(Duration quantum)
{
    quantum_ = quantum;
}

void AutoModel::connect(ClientId id, uint32_t uid, Priority cls, const std::vector<GpuIndex>& gpus)
{
    Member m;
    m.id = id;
    m.uid = uid;
    m.cls = cls;
    for (GpuIndex g : gpus)
        m.registered |= gpu_bit(g);
    members_.emplace(id, std::move(m));
}

void AutoModel::request(ClientId id, GpuSet gpus)
{
    auto it = members_.find(id);
    if (it == members_.end())
        return;
    Member& m = it->second;
    gpus &= m.registered;
    if (gpus == 0)
        return;  // asks for nothing it may have
    if (m.phase == Phase::Holding) {
        if ((gpus & ~m.held) == 0) {
            answer_again_ = id;
            return;
        }
        // Never holds some GPUs while it waits for others.
        end_hold(m, m.held);
    }
    if (m.phase == Phase::Idle) {
        m.phase = Phase::Waiting;
        m.waiting_since = now_;
        m.sequence = next_sequence_++;
    }
    m.wanted = gpus;  // a waiter that asks again keeps its place
}

void AutoModel::release(ClientId id, GpuSet gpus)
{
    auto it = members_.find(id);
    if (it == members_.end())
        return;
    Member& m = it->second;
    if (m.phase == Phase::Waiting && (m.wanted & gpus) != 0) {
        m.phase = Phase::Idle;
        m.wanted = 0;
    } else if (m.phase == Phase::Holding && (m.held & gpus) != 0) {
        end_hold(m, gpus);
    }
}

void AutoModel::report_memory(ClientId id, GpuIndex gpu, MemoryUse use)
{
    auto it = members_.find(id);
    if (it != members_.end() && (it->second.registered & gpu_bit(gpu)) != 0)
        it->second.memory[gpu] = use;
}

void AutoModel::disconnect(ClientId id)
{
    members_.erase(id);
}

void AutoModel::revoke(ClientId id)
{
    auto it = members_.find(id);
    if (it != members_.end() && it->second.phase == Phase::Holding)
        admin_revokes_ = id;
}

void AutoModel::end_hold(Member& m, GpuSet gpus)
{
    m.held &= ~gpus;
    if (m.held == 0) {
        m.phase = Phase::Idle;
        m.revoke_at.reset();
    }
}

// ---- views -------------------------------------------------------------------------

uint64_t AutoModel::managed(const Member& m, GpuIndex gpu) const
{
    const auto it = m.memory.find(gpu);
    return it == m.memory.end() ? 0 : it->second.managed;
}

uint64_t AutoModel::counted(const Member& m, GpuIndex gpu) const
{
    const auto it = m.memory.find(gpu);
    if (it == m.memory.end())
        return 0;
    return it->second.managed + (m.uid == 0 ? it->second.pinned : 0);
}

uint64_t AutoModel::pinned_here(GpuIndex gpu) const
{
    uint64_t sum = 0;
    for (const auto& [id, m] : members_)
        sum += counted(m, gpu) - managed(m, gpu);
    return sum;
}

uint64_t AutoModel::requested(GpuIndex gpu) const
{
    uint64_t sum = 0;
    for (const auto& [id, m] : members_)
        sum += counted(m, gpu);
    return sum;
}

Turns AutoModel::turns(GpuIndex gpu) const
{
    return turns_for(mode_, requested(gpu), gpus_.at(gpu).capacity);
}

std::set<ClientId> AutoModel::holders(GpuIndex gpu) const
{
    std::set<ClientId> out;
    for (const auto& [id, m] : members_)
        if (m.held & gpu_bit(gpu))
            out.insert(id);
    return out;
}

size_t AutoModel::waiting() const
{
    size_t n = 0;
    for (const auto& [id, m] : members_)
        n += m.phase == Phase::Waiting;
    return n;
}

int AutoModel::rank(const Member& m) const
{
    const int cls = m.cls == Priority::Interactive ? 0 : m.cls == Priority::Batch ? 2 : 1;
    const auto raised = (now_ - m.waiting_since) / quantum_;
    return raised >= cls ? 0 : cls - static_cast<int>(raised);
}

std::optional<ClientId> AutoModel::first_in_line(GpuIndex gpu) const
{
    const Member* best = nullptr;
    for (const auto& [id, m] : members_) {
        if (m.phase != Phase::Waiting || (m.wanted & gpu_bit(gpu)) == 0)
            continue;
        if (best != nullptr && best->uid != m.uid)
            return std::nullopt;  // the order between users is by held time
        if (best == nullptr ||
            std::pair(rank(m), m.sequence) < std::pair(rank(*best), best->sequence))
            best = &m;
    }
    return best != nullptr ? std::optional(best->id) : std::nullopt;
}

bool AutoModel::one_user_on(GpuSet gpus, uint32_t uid) const
{
    for (const auto& [id, m] : members_)
        if (((m.wanted | m.held) & gpus) != 0 && m.uid != uid)
            return false;
    return true;
}

bool AutoModel::one_class_waits(GpuIndex gpu) const
{
    std::set<Priority> classes;
    for (const auto& [id, m] : members_)
        if (m.phase == Phase::Waiting && (m.wanted & gpu_bit(gpu)) != 0)
            classes.insert(m.cls);
    return classes.size() <= 1;
}

void AutoModel::fail(std::string what)
{
    failures_.push_back(std::move(what) + " at " + ms_of(now_));
}

// ---- what the scheduler may do --------------------------------------------------------

void AutoModel::observe(Did what, ClientId id, GpuSet gpus)
{
    auto it = members_.find(id);
    if (it == members_.end())
        return fail(said("an action", id, gpus) + ", which is not registered");
    Member& m = it->second;
    switch (what) {
        case Did::Grant: {
            if (answer_again_ == id && m.phase == Phase::Holding && gpus == m.held) {
                answer_again_.reset();
                return;
            }
            if (m.phase != Phase::Waiting || gpus != m.wanted)
                return fail(said("a Grant", id, gpus) + ", which asked for " +
                            std::to_string(m.wanted) + " (or holds)");
            for_each_gpu(gpus, [&](GpuIndex g) {
                const Turns t = turns(g);
                if (t == Turns::Free || t == Turns::Soft)
                    return;
                const auto first = first_in_line(g);
                if (first && *first != id)
                    fail(said("a Grant", id, gpus) + " ahead of client " + std::to_string(*first) +
                         ", first in line on " + name_of(t) + " GPU " + std::to_string(g));
                std::set<ClientId> others = holders(g);
                if (others.empty())
                    return;
                if (t == Turns::Strict)
                    return fail(said("a Grant", id, gpus) + " beside the holder of strict GPU " +
                                std::to_string(g));
                // Joins a group: one that is not leaving and has its room.
                uint64_t need = pinned_here(g) + managed(m, g);
                for (ClientId h : others) {
                    if (members_.at(h).revoke_at)
                        fail(said("a Grant", id, gpus) + " beside client " + std::to_string(h) +
                             ", asked to let go of GPU " + std::to_string(g));
                    need += managed(members_.at(h), g);
                }
                if (need > gpus_[g].capacity)
                    fail(said("a Grant", id, gpus) + ": the group on GPU " + std::to_string(g) +
                         " would need " + std::to_string(need) + " bytes");
                if (gpus_[g].last_shrink && now_ < *gpus_[g].last_shrink + kShrinkWindow)
                    fail(said("a Grant", id, gpus) + " joins a group within the Shrink window");
            });
            m.phase = Phase::Holding;
            m.held = m.wanted;
            m.wanted = 0;
            m.revoke_at.reset();
            for_each_gpu(gpus, [&](GpuIndex g) { gpus_[g].last_grant = now_; });
            return;
        }
        case Did::Drop: {
            if (m.phase != Phase::Holding || gpus != m.held || m.revoke_at)
                return fail(said("a Drop", id, gpus) + ", which holds " + std::to_string(m.held) +
                            (m.revoke_at ? " and was asked" : ""));
            bool wanted = false;
            for (const auto& [oid, o] : members_)
                wanted |= oid != id && ((o.wanted | o.held) & m.held) != 0;
            if (!wanted)
                fail(said("a Drop", id, gpus) + ", which nobody else wants or holds");
            m.revoke_at = now_ + grace_;
            return;
        }
        case Did::Revoke: {
            if (m.phase != Phase::Holding || gpus != m.held)
                return fail(said("a Revoke", id, gpus) + ", which holds " + std::to_string(m.held));
            if (admin_revokes_ == id)
                admin_revokes_.reset();
            else if (!m.revoke_at || now_ < *m.revoke_at)
                fail(said("a Revoke", id, gpus) + " before its grace period ran out");
            end_hold(m, m.held);
            return;
        }
        case Did::Shrink: {
            if (std::popcount(gpus) != 1)
                return fail(said("a Shrink", id, gpus) + ": one GPU at a time");
            const auto g = static_cast<GpuIndex>(std::countr_zero(gpus));
            if ((m.held & gpus) != 0)
                fail(said("a Shrink", id, gpus) + ", which holds it");
            if (requested(g) <= gpus_[g].capacity)
                fail(said("a Shrink", id, gpus) + ", whose memory fits");
            gpus_[g].last_shrink = now_;
            return;
        }
    }
}

// ---- what must hold after every event ---------------------------------------------------

std::vector<std::string> AutoModel::check()
{
    if (answer_again_)
        fail("no Grant answered again client " + std::to_string(*answer_again_) +
             ", which asked for what it holds");
    if (admin_revokes_)
        fail("no Revoke of client " + std::to_string(*admin_revokes_) + " the admin revoked");
    answer_again_.reset();
    admin_revokes_.reset();

    for (GpuIndex g = 0; g < gpus_.size(); ++g) {
        // Holders that are not leaving: one where the GPU is taken strictly;
        // in group turns, several only where their memory fits together.
        size_t staying = 0;
        uint64_t need = pinned_here(g);
        for (ClientId h : holders(g)) {
            const Member& m = members_.at(h);
            if (m.revoke_at)
                continue;
            staying++;
            need += managed(m, g);
        }
        const Turns t = turns(g);
        if (t == Turns::Strict && staying > 1)
            fail(std::to_string(staying) + " holders of strict GPU " + std::to_string(g));
        if (t == Turns::Groups && staying > 1 && need > gpus_[g].capacity)
            fail("the group holding GPU " + std::to_string(g) + " needs " + std::to_string(need) +
                 " bytes of " + std::to_string(gpus_[g].capacity));
    }

    for (const auto& [id, m] : members_) {
        const std::string who = "client " + std::to_string(id);
        if (m.phase == Phase::Holding && m.revoke_at && now_ >= *m.revoke_at)
            fail(who + " still holds after its grace period");
        if (m.phase != Phase::Waiting)
            continue;

        // Nothing it waits for: its GPUs are free or free and its turn.
        bool its_turn = true;
        GpuSet soft = 0, taken = 0;
        for_each_gpu(m.wanted, [&](GpuIndex g) {
            const Turns t = turns(g);
            if (t == Turns::Free)
                return;
            (t == Turns::Soft ? soft : taken) |= gpu_bit(g);
            its_turn &= holders(g).empty() && first_in_line(g) == id;
        });
        if (its_turn)
            fail(who + " waits for GPUs " + std::to_string(m.wanted) +
                 " that are free and its turn");

        // Softly, alone as a user there: it joins within a quantum (at once
        // if interactive), later only while a holder there may be starting.
        if (soft != 0 && taken == 0 && one_user_on(m.wanted, m.uid)) {
            TimePoint bound = m.waiting_since;
            if (m.cls != Priority::Interactive) {
                bound += quantum_;
                for_each_gpu(soft, [&](GpuIndex g) {
                    if (gpus_[g].last_grant && !holders(g).empty())
                        bound = std::max(bound, *gpus_[g].last_grant + kStartWindow);
                });
            }
            if (now_ >= bound)
                fail(who + " still waits softly for GPUs " + std::to_string(m.wanted) + " since " +
                     ms_of(m.waiting_since) + ", past " + ms_of(bound));
        }

        // In group turns, first in line, its memory fits beside the holders
        // and none is leaving: it joins once they have started and have
        // their room. Not where the line is of several classes: waiting
        // raises a class there, so the first in line changes with time
        // alone, and the scheduler looks again only at events.
        if (std::popcount(m.wanted) == 1) {
            const auto g = static_cast<GpuIndex>(std::countr_zero(m.wanted));
            const std::set<ClientId> hs = holders(g);
            if (turns(g) != Turns::Groups || hs.empty() || first_in_line(g) != id ||
                !one_class_waits(g))
                continue;
            uint64_t need = pinned_here(g) + managed(m, g);
            bool leaving = false;
            for (ClientId h : hs) {
                need += managed(members_.at(h), g);
                leaving |= members_.at(h).revoke_at.has_value();
            }
            if (leaving || need > gpus_[g].capacity)
                continue;
            TimePoint bound = *gpus_[g].last_grant + kStartWindow;
            if (gpus_[g].last_shrink)
                bound = std::max(bound, *gpus_[g].last_shrink + kShrinkWindow);
            if (now_ >= bound)
                fail(who + " first in line fits beside the group on GPU " + std::to_string(g) +
                     " but still waits, past " + ms_of(bound));
        }
    }
    std::vector<std::string> out;
    out.swap(failures_);
    return out;
}

}  // namespace nvshare::reference
