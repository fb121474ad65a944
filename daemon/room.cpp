#include "daemon/room.h"

#include <algorithm>
#include <utility>

#include "common/protocol.h"

namespace nvshare::daemon {

namespace {

// The managed (movable) memory a client reported on `gpu`.
uint64_t managed_on(const ClientRecord& c, GpuIndex gpu)
{
    const auto m = c.memory.find(gpu);
    return m != c.memory.end() ? m->second.managed : 0;
}

// The part of its pinned memory the host did not confirm: it counts for the
// client's own fit alone.
uint64_t unconfirmed_on(const ClientRecord& c, GpuIndex gpu)
{
    const auto m = c.memory.find(gpu);
    return m != c.memory.end() ? m->second.pinned - m->second.confirmed_pinned : 0;
}

}  // namespace

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

void Room::set(ClientRecord& c, GpuIndex gpu, MemoryUse use, std::vector<Action>& out)
{
    // No process pins more than the GPU has; swappable memory may exceed
    // it (held in host memory), and above the GPU's size it changes nothing
    // for others.
    if (const uint64_t size = gpus_[gpu].description.physical_memory; size != 0)
        use.pinned = std::min(use.pinned, size);
    if (c.info.uid == 0) {
        use.confirmed_pinned = use.pinned;
    } else {
        const auto host = c.host_confirms.find(gpu);
        use.confirmed_pinned =
            host == c.host_confirms.end() ? 0 : std::min(use.pinned, host->second);
    }
    MemoryUse& slot = c.memory[gpu];
    GpuRoom& r = rooms_[gpu];
    // Bounded reports from at most a million clients: no sum can wrap.
    r.requested = r.requested - slot.shared() + use.shared();
    const bool pinned_changed = slot.confirmed_pinned != use.confirmed_pinned;
    r.pinned = r.pinned - slot.confirmed_pinned + use.confirmed_pinned;
    slot = use;
    dirty_ |= gpu_bit(gpu);
    if (pinned_changed)
        tell_unpageable(gpu, out);
}

void Room::confirm(ClientRecord& c, GpuIndex gpu, std::optional<uint64_t> bytes)
{
    if (bytes)
        c.host_confirms[gpu] = *bytes;
    else
        c.host_confirms.erase(gpu);
}

void Room::forget(const ClientRecord& c)
{
    for (const auto& [g, m] : c.memory) {
        rooms_[g].requested -= m.shared();
        rooms_[g].pinned -= m.confirmed_pinned;
    }
}

void Room::tell_unpageable(GpuIndex gpu, std::vector<Action>& out)
{
    const uint64_t pinned = rooms_[gpu].pinned;
    for (ClientId id : lineup_.members(gpu)) {
        const auto it = clients_.find(id);
        if (it == clients_.end())
            continue;
        ClientRecord& c = it->second;
        const auto own = c.memory.find(gpu);
        const uint64_t others = pinned - (own == c.memory.end() ? 0 : own->second.confirmed_pinned);
        uint64_t& sent = c.unpageable_sent[gpu];
        if ((others > sent ? others - sent : sent - others) < proto::kUnpageableStep)
            continue;
        sent = others;
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
        uint64_t need = 0;
        uint64_t own = 0;
        // Only the GPU's clients have memory there.
        for (ClientId id : lineup_.members(g)) {
            const ClientRecord& o = clients_.at(id);
            const auto m = o.memory.find(g);
            if (m == o.memory.end())
                continue;
            if (o.id == c.id) {
                need += m->second.pinned;  // its own claim, confirmed or not
                own = m->second.managed;
            } else if (o.id == *next || (o.held & gpu_bit(g)) != 0) {
                need += m->second.shared();
            } else {
                need += m->second.confirmed_pinned;
                const auto k = o.kept.find(g);
                if (k != o.kept.end())
                    need += std::min(k->second, m->second.managed);
            }
        }
        const uint64_t capacity = gpus_[g].capacity;
        const uint64_t room = capacity > need ? capacity - need : 0;
        keep = std::min({keep, room, own});
    });
    return keep;
}

// ---- fit ----------------------------------------------------------------------------

uint64_t Room::holders_need(GpuIndex gpu) const
{
    uint64_t need = rooms_[gpu].pinned;
    for (ClientId h : gpus_[gpu].holders)
        need += managed_on(clients_.at(h), gpu);
    return need;
}

bool Room::fits_beside_holders(const ClientRecord& c, GpuIndex gpu) const
{
    return holders_need(gpu) + managed_on(c, gpu) + unconfirmed_on(c, gpu) <= gpus_[gpu].capacity;
}

std::vector<ClientRecord*> Room::beyond_fit(GpuIndex gpu,
                                            const std::vector<ClientRecord*>& holders) const
{
    std::vector<ClientRecord*> beyond;
    uint64_t need = rooms_[gpu].pinned;
    bool first = true, full = false;
    for (ClientRecord* h : holders) {
        const uint64_t mine = managed_on(*h, gpu);
        // The first keeps it; the next ones while they fit (each with its
        // own unconfirmed pinned memory, which others do not make room for).
        full |= !first && need + mine + unconfirmed_on(*h, gpu) > gpus_[gpu].capacity;
        first = false;
        if (full)
            beyond.push_back(h);
        else
            need += mine;
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

GpuSet Room::publish_shrinks(TimePoint now, std::vector<Action>& out)
{
    const GpuSet dirty = dirty_;
    dirty_ = 0;
    GpuSet asked_on = 0;
    for_each_gpu(dirty, [&](GpuIndex g) {
        if (g >= rooms_.size() || !oversubscribed(g))
            return;
        const uint64_t need = holders_need(g);
        const uint64_t room = gpus_[g].capacity > need ? gpus_[g].capacity - need : 0;
        // Who keeps what is left: the waiters in the order they go, then
        // the clients that wait for nothing here.
        std::vector<ClientId> order = lineup_.in_order(g);
        for (ClientId id : lineup_.members(g))
            if ((clients_.at(id).held & gpu_bit(g)) == 0 &&
                std::find(order.begin(), order.end(), id) == order.end())
                order.push_back(id);
        const auto kept_of = [&](const ClientRecord& c) -> std::optional<uint64_t> {
            const auto k = c.kept.find(g);
            const auto m = c.memory.find(g);
            if ((c.held & gpu_bit(g)) != 0 || k == c.kept.end() || m == c.memory.end())
                return std::nullopt;
            return std::min(k->second, m->second.managed);
        };
        uint64_t kept_here = 0;
        for (ClientId id : order)
            kept_here += kept_of(clients_.at(id)).value_or(0);
        if (kept_here <= room)
            return;
        const uint64_t asked = std::min(room_to_ask(g, kept_here - room, now), kept_here);
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
