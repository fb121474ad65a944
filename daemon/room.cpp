#include "daemon/room.h"

#include <algorithm>
#include <utility>

#include "common/protocol.h"

namespace nvshare::daemon {

namespace {

// The managed (movable) memory a client reported on `gpu`: its own view.
uint64_t managed_on(const ClientRecord& c, GpuIndex gpu)
{
    const auto m = c.memory.find(gpu);
    return m != c.memory.end() ? m->second.managed : 0;
}

// The part of it others see and make room for.
uint64_t shared_managed_on(const ClientRecord& c, GpuIndex gpu)
{
    const auto m = c.memory.find(gpu);
    return m != c.memory.end() ? m->second.confirmed_managed : 0;
}

// The part of its pinned memory the host did not confirm: it counts for the
// client's own fit alone.
uint64_t unconfirmed_on(const ClientRecord& c, GpuIndex gpu)
{
    const auto m = c.memory.find(gpu);
    return m != c.memory.end() ? m->second.pinned - m->second.confirmed_pinned : 0;
}

bool holds(const ClientRecord& c, GpuIndex gpu)
{
    return (c.held & gpu_bit(gpu)) != 0;
}

}  // namespace

uint64_t Room::kept_part(const ClientRecord& c, GpuIndex gpu)
{
    const auto k = c.kept.find(gpu);
    return k != c.kept.end() ? std::min(k->second, shared_managed_on(c, gpu)) : 0;
}

std::pair<uint64_t, ClientId> Room::told_pinned_key(const ClientRecord& c, GpuIndex gpu)
{
    const auto m = c.memory.find(gpu);
    const auto sent = c.unpageable_sent.find(gpu);
    return {(m != c.memory.end() ? m->second.confirmed_pinned : 0) +
                (sent != c.unpageable_sent.end() ? sent->second : 0),
            c.id};
}

Room::Room(const std::vector<Gpu>& gpus, std::map<ClientId, ClientRecord>& clients, Lineup lineup)
    : gpus_(gpus), clients_(clients), lineup_(std::move(lineup))
{
}

void Room::add_gpu()
{
    rooms_.emplace_back();
}

// ---- what clients use -----------------------------------------------------------

uint64_t Room::requested(GpuIndex gpu) const
{
    return gpu < rooms_.size() ? rooms_[gpu].requested : 0;
}

bool Room::oversubscribed(GpuIndex gpu) const
{
    return gpu < rooms_.size() && rooms_[gpu].requested > gpus_[gpu].capacity;
}

bool Room::oversubscribed_any(GpuSet gpus) const
{
    bool any = false;
    for_each_gpu(gpus, [&](GpuIndex g) { any |= oversubscribed(g); });
    return any;
}

uint64_t Room::size_of(GpuIndex gpu) const
{
    const Gpu& g = gpus_[gpu];
    return std::max(g.description.physical_memory, g.capacity);
}

uint64_t Room::host_share(const ClientRecord& c, GpuIndex gpu) const
{
    uint64_t left = c.host_resident.value_or(0);
    for (const auto& [g, m] : c.memory) {
        const auto host = c.host_confirms.find(g);
        if (g >= gpu || host == c.host_confirms.end())
            continue;
        const uint64_t claim = std::min(m.managed, size_of(g));
        const uint64_t on_gpu = host->second - std::min(host->second, m.confirmed_pinned);
        left -= std::min(left, claim - std::min(claim, on_gpu));
    }
    return left;
}

void Room::set(ClientRecord& c, GpuIndex gpu, MemoryUse use, TimePoint now,
               std::vector<Action>& out, ClaimTurn turn)
{
    const std::optional<TimePoint> grace_before = grace_end(c, gpu);
    // No process pins more than the GPU has; swappable memory may exceed
    // it (held in host memory), and above the GPU's size it changes nothing
    // for others.
    if (const uint64_t size = gpus_[gpu].description.physical_memory; size != 0)
        use.pinned = std::min(use.pinned, size);
    const uint64_t claim = std::min(use.managed, size_of(gpu));
    const auto host = c.host_confirms.find(gpu);
    if (c.info.uid == 0) {
        use.confirmed_pinned = use.pinned;
        use.confirmed_managed = claim;
    } else if (host == c.host_confirms.end() && !gpus_[gpu].host_counts_processes) {
        // The host cannot say (no NVML, or none read yet): pinned memory
        // waits for it, swappable memory counts as claimed.
        use.confirmed_pinned = 0;
        use.confirmed_managed = claim;
    } else {
        // Where the host counts the GPU's processes but has not read this
        // one yet, it confirms nothing of it so far: a new connection's
        // claim counts under the grace and its rules like any other.
        const uint64_t counted = host == c.host_confirms.end() ? 0 : host->second;
        use.confirmed_pinned = std::min(use.pinned, counted);
        // NVML's count beyond the pinned part, and the host memory that
        // holds swapped-out copies, confirm the swappable claim.
        const uint64_t on_gpu = counted - use.confirmed_pinned;
        ClaimGrace& grace = c.graces[gpu];
        const bool owed = grace.owed() != 0;
        use.confirmed_managed = grace.counted(claim, on_gpu + host_share(c, gpu), now, turn,
                                              may_start_grace(c, gpu, owed, now));
        if (const bool owes = grace.owed() != 0; owes != owed) {
            UserGraces& user = user_graces_[{c.info.principal, gpu}];
            user.unpaid = owes ? user.unpaid + 1 : user.unpaid - 1;
            if (user.unpaid == 0 && user.barred_until <= now)
                user_graces_.erase({c.info.principal, gpu});
        }
    }
    GpuRoom& r = rooms_[gpu];
    const bool counts = !holds(c, gpu);  // in what others keep
    if (counts)
        r.kept -= kept_part(c, gpu);
    const auto told_before = told_pinned_key(c, gpu);
    MemoryUse& slot = c.memory[gpu];
    // Bounded reports from at most a million clients: no sum can wrap.
    r.requested = r.requested - slot.shared() + use.shared();
    const bool pinned_changed = slot.confirmed_pinned != use.confirmed_pinned;
    r.pinned = r.pinned - slot.confirmed_pinned + use.confirmed_pinned;
    slot = use;
    if (counts)
        r.kept += kept_part(c, gpu);
    dirty_ |= gpu_bit(gpu);
    if (pinned_changed) {
        r.told_pinned.erase(told_before);
        r.told_pinned.insert(told_pinned_key(c, gpu));
        tell_unpageable(gpu, out);
    }
    if (const std::optional<TimePoint> after = grace_end(c, gpu); after != grace_before) {
        if (grace_before)
            grace_ends_.erase({*grace_before, c.id, gpu});
        if (after)
            grace_ends_.insert({*after, c.id, gpu});
    }
}

std::optional<TimePoint> Room::grace_end(const ClientRecord& c, GpuIndex gpu)
{
    const auto grace = c.graces.find(gpu);
    return grace != c.graces.end() ? grace->second.ends() : std::nullopt;
}

std::optional<TimePoint> Room::next_grace_end() const
{
    if (grace_ends_.empty())
        return std::nullopt;
    return std::get<0>(*grace_ends_.begin());
}

std::optional<std::pair<ClientId, GpuIndex>> Room::grace_ended(TimePoint now)
{
    if (grace_ends_.empty() || std::get<0>(*grace_ends_.begin()) > now)
        return std::nullopt;
    const auto [at, id, gpu] = *grace_ends_.begin();
    grace_ends_.erase(grace_ends_.begin());
    return std::pair{id, gpu};
}

void Room::confirm(ClientRecord& c, GpuIndex gpu, std::optional<uint64_t> bytes)
{
    if (bytes)
        c.host_confirms[gpu] = *bytes;
    else
        c.host_confirms.erase(gpu);
}

void Room::joined(const ClientRecord& c, GpuIndex gpu, std::vector<Action>& out)
{
    rooms_[gpu].told_pinned.insert(told_pinned_key(c, gpu));
    tell_unpageable(gpu, out);
}

bool Room::may_start_grace(const ClientRecord& c, GpuIndex gpu, bool owes, TimePoint now)
{
    const auto it = user_graces_.find({c.info.principal, gpu});
    if (it == user_graces_.end())
        return true;
    if (it->second.unpaid == 0 && it->second.barred_until <= now) {
        user_graces_.erase(it);
        return true;
    }
    return it->second.unpaid == (owes ? 1u : 0u) && it->second.barred_until <= now;
}

void Room::forget(const ClientRecord& c, TimePoint now)
{
    for (const auto& [g, grace] : c.graces) {
        if (grace.owed() == 0)
            continue;
        UserGraces& user = user_graces_[{c.info.principal, g}];
        --user.unpaid;
        user.barred_until = std::max(user.barred_until, now + kClaimDebt);
    }
    for (const auto& [g, m] : c.memory) {
        rooms_[g].requested -= m.shared();
        rooms_[g].pinned -= m.confirmed_pinned;
        if (!holds(c, g))
            rooms_[g].kept -= kept_part(c, g);
    }
    for_each_gpu(c.registered(),
                 [&](GpuIndex g) { rooms_[g].told_pinned.erase(told_pinned_key(c, g)); });
    for (const auto& [g, grace] : c.graces)
        if (grace.ends())
            grace_ends_.erase({*grace.ends(), c.id, g});
}

void Room::tell_unpageable(GpuIndex gpu, std::vector<Action>& out)
{
    GpuRoom& r = rooms_[gpu];
    const uint64_t pinned = r.pinned;
    constexpr uint64_t step = proto::kUnpageableStep;
    // Told of others' pinned memory `sent`, own `own`: due where
    // |pinned - own - sent| >= step, at the two ends of told_pinned.
    std::vector<ClientId> due;
    for (auto it = r.told_pinned.begin();
         pinned >= step && it != r.told_pinned.end() && it->first <= pinned - step; ++it)
        due.push_back(it->second);
    for (auto it = r.told_pinned.rbegin(); it != r.told_pinned.rend() && it->first >= pinned + step;
         ++it)
        due.push_back(it->second);
    std::sort(due.begin(), due.end());
    for (ClientId id : due) {
        ClientRecord& c = clients_.at(id);
        r.told_pinned.erase(told_pinned_key(c, gpu));
        const auto own = c.memory.find(gpu);
        const uint64_t others = pinned - (own == c.memory.end() ? 0 : own->second.confirmed_pinned);
        c.unpageable_sent[gpu] = others;
        r.told_pinned.insert(told_pinned_key(c, gpu));
        Action a{ActionKind::Unpageable, id, gpu_bit(gpu)};
        a.others_pinned = others;
        out.push_back(a);
    }
}

// ---- holds --------------------------------------------------------------------------

void Room::granted(ClientRecord& c)
{
    c.keep_offered = 0;  // a release nobody asked for evicts everything
    c.told_oversubscribed = false;
    dirty_ |= c.held;
    // What it left there is its own again.
    for_each_gpu(c.held, [&](GpuIndex g) { rooms_[g].kept -= kept_part(c, g); });
}

void Room::let_go(ClientRecord& c, GpuSet gpus)
{
    dirty_ |= gpus;
    for_each_gpu(gpus, [&](GpuIndex g) {
        const uint64_t managed = managed_on(c, g);
        // Never told of the oversubscription, it moved nothing (a Shrink
        // follows if others need the room).
        c.kept[g] = oversubscribed(g) && c.told_oversubscribed ? std::min(c.keep_offered, managed)
                                                               : managed;
        rooms_[g].kept += kept_part(c, g);  // it holds `g` no more
    });
}

void Room::describe(Action& a)
{
    a.oversubscribed = oversubscribed_any(a.gpus);
    const auto it = clients_.find(a.client);
    if (it == clients_.end())
        return;
    ClientRecord& c = it->second;
    if (a.kind == ActionKind::Drop || a.kind == ActionKind::Contended ||
        (a.kind == ActionKind::Grant && a.contended)) {
        a.keep = keep_allowance(c, a.gpus);
        c.keep_offered = a.keep;
    }
    if (a.oversubscribed && (a.kind == ActionKind::Grant || a.kind == ActionKind::Drop ||
                             a.kind == ActionKind::Contended))
        c.told_oversubscribed = true;
}

uint64_t Room::keep_allowance(const ClientRecord& c, GpuSet gpus) const
{
    uint64_t keep = UINT64_MAX;
    for_each_gpu(gpus, [&](GpuIndex g) {
        if (!oversubscribed(g))
            return;
        // Room for whoever goes next by the scheduler's order, the one the
        // grant will go to.
        const std::optional<ClientId> next = lineup_.goes_next(g, c.id);
        if (!next)
            return;  // nobody to make room for
        // What stays there: everybody's confirmed pinned memory, the
        // managed memory of the holders and of the next waiter, what the
        // others keep, and `c`'s own pinned memory, confirmed or not.
        const GpuRoom& r = rooms_[g];
        uint64_t need = r.pinned + r.kept;
        uint64_t own = 0;
        if (const auto m = c.memory.find(g); m != c.memory.end()) {
            need += m->second.pinned - m->second.confirmed_pinned;
            own = m->second.managed;
        }
        if (!holds(c, g))
            need -= kept_part(c, g);
        for (ClientId h : gpus_[g].holders)
            if (h != c.id)
                need += shared_managed_on(clients_.at(h), g);
        if (const ClientRecord& n = clients_.at(*next); !holds(n, g))
            need += shared_managed_on(n, g) - kept_part(n, g);
        const uint64_t capacity = gpus_[g].capacity;
        const uint64_t room = capacity > need ? capacity - need : 0;
        keep = std::min({keep, room, own});
    });
    return keep;
}

// ---- fit ----------------------------------------------------------------------------

uint64_t Room::holders_need(GpuIndex gpu, bool staying_only) const
{
    uint64_t need = rooms_[gpu].pinned;
    for (ClientId h : gpus_[gpu].holders) {
        const ClientRecord& c = clients_.at(h);
        if (!staying_only || !c.drop_sent)
            need += shared_managed_on(c, gpu);
    }
    return need;
}

bool Room::fits_beside_holders(const ClientRecord& c, GpuIndex gpu) const
{
    return holders_need(gpu) + managed_on(c, gpu) + unconfirmed_on(c, gpu) <= gpus_[gpu].capacity;
}

bool Room::fits_beside_staying(const ClientRecord& c, GpuIndex gpu) const
{
    return holders_need(gpu, true) + managed_on(c, gpu) + unconfirmed_on(c, gpu) <=
           gpus_[gpu].capacity;
}

std::vector<ClientRecord*> Room::beyond_fit(GpuIndex gpu,
                                            const std::vector<ClientRecord*>& holders) const
{
    std::vector<ClientRecord*> beyond;
    uint64_t need = rooms_[gpu].pinned;
    bool first = true, full = false;
    for (ClientRecord* h : holders) {
        // The first keeps it; the next ones while they fit (each with all
        // its own memory, of which others make room only for what counts
        // for them).
        full |=
            !first && need + managed_on(*h, gpu) + unconfirmed_on(*h, gpu) > gpus_[gpu].capacity;
        first = false;
        if (full)
            beyond.push_back(h);
        else
            need += shared_managed_on(*h, gpu);
    }
    return beyond;
}

TimePoint Room::short_of_room_until(GpuIndex gpu) const
{
    const GpuRoom& r = rooms_[gpu];
    return r.room_asked != 0 ? r.room_asked_at + kGrowthRound : TimePoint{};
}

// ---- Shrink ---------------------------------------------------------------------------

// A holder that grows a block at a time (PyTorch: 1 GiB) and waits for the
// room of each would get it a block per round, and every round costs those
// who give it a swap-out with its pinning, so many rounds add up to seconds.
// Such rounds double: the room comes in a few, and at most about twice what
// was needed is asked. A first round asks what is lacking, no more; so do
// rounds that follow faster than a swap-out is answered (a holder whose
// growth finds room as it comes: there, doubling would move far more than
// needed out of the way of a fill).
uint64_t Room::room_to_ask(GpuIndex gpu, uint64_t short_by, TimePoint now) const
{
    const GpuRoom& r = rooms_[gpu];
    const Duration since = now - r.room_asked_at;
    const bool waited_for_it = r.room_asked != 0 && since >= kAnsweredRound && since < kGrowthRound;
    return waited_for_it ? std::max(short_by, 2 * r.room_asked) : short_by;
}

void Room::want_room(const ClientRecord& c, GpuIndex gpu, uint64_t bytes)
{
    if (gpu >= rooms_.size() || !holds(c, gpu) || bytes == 0)
        return;
    rooms_[gpu].wanted = std::max(rooms_[gpu].wanted, std::min(bytes, gpus_[gpu].capacity));
    dirty_ |= gpu_bit(gpu);
}

GpuSet Room::publish_shrinks(TimePoint now, std::vector<Action>& out)
{
    const GpuSet dirty = dirty_;
    dirty_ = 0;
    GpuSet asked_on = 0;
    for_each_gpu(dirty, [&](GpuIndex g) {
        if (g >= rooms_.size())
            return;
        // A want smaller than a step would ask nobody (see below).
        uint64_t wanted = std::exchange(rooms_[g].wanted, 0);
        if (wanted != 0)
            wanted = std::max(wanted, kShrinkStep);
        if (!oversubscribed(g) && wanted == 0)
            return;
        const uint64_t need = holders_need(g);
        const uint64_t room = gpus_[g].capacity > need ? gpus_[g].capacity - need : 0;
        const uint64_t kept_here = rooms_[g].kept;
        const uint64_t short_by = std::max(kept_here > room ? kept_here - room : 0, wanted);
        if (short_by == 0 || kept_here == 0)
            return;
        // Who keeps what is left: the waiters in the order they go, then
        // the clients that wait for nothing here.
        std::vector<ClientId> order = lineup_.in_order(g);
        const std::set<ClientId> in_line(order.begin(), order.end());
        for (ClientId id : lineup_.members(g))
            if (!holds(clients_.at(id), g) && in_line.count(id) == 0)
                order.push_back(id);
        const auto kept_of = [&](const ClientRecord& c) -> std::optional<uint64_t> {
            const auto k = c.kept.find(g);
            const auto m = c.memory.find(g);
            if (holds(c, g) || k == c.kept.end() || m == c.memory.end())
                return std::nullopt;
            return std::min(k->second, m->second.confirmed_managed);
        };
        const uint64_t asked = std::min(room_to_ask(g, short_by, now), kept_here);
        uint64_t left = kept_here - asked;
        bool sent = false;
        for (ClientId id : order) {
            ClientRecord& c = clients_.at(id);
            const std::optional<uint64_t> kept = kept_of(c);
            if (!kept)
                continue;
            const uint64_t allowed = std::min(*kept, left);
            left -= allowed;
            if (*kept - allowed < kShrinkStep)
                continue;
            c.kept[g] = allowed;
            rooms_[g].kept -= *kept - allowed;
            Action a{ActionKind::Shrink, id, gpu_bit(g)};
            a.oversubscribed = true;
            a.keep = allowed;
            out.push_back(a);
            sent = true;
        }
        if (sent) {
            rooms_[g].room_asked = asked;
            rooms_[g].room_asked_at = now;
            asked_on |= gpu_bit(g);
        }
    });
    return asked_on;
}

}  // namespace nvshare::daemon
