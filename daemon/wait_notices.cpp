#include "daemon/wait_notices.h"

#include <algorithm>

namespace nvshare::daemon {

namespace {

bool named(uint32_t place)
{
    return place <= WaitNotices::kNamedPlaces;
}

// Whether a waiter told `sent` must be told `now`: anything new among the
// first places, and a place that enters or leaves them. Further back only a
// new reason, which is looked for when the GPU's own reason changed.
bool news(const WaitFacts& sent, const WaitFacts& now)
{
    if (sent.same_news(now))
        return false;
    return named(sent.place) || named(now.place) || sent.reason != now.reason;
}

}  // namespace

std::optional<int> WaitNotices::first_rank(const WaitingLine& line, const LineOrder& order,
                                           const std::map<ClientId, ClientRecord>& clients)
{
    if (!line.mixed())  // one (user, class): nobody outranks anybody
        return std::nullopt;
    const std::optional<ClientId> head = line.head(order);
    if (!head)
        return std::nullopt;
    return line.rank(order, clients.at(*head));
}

WaitFacts WaitNotices::facts(const WaitingLine& line, const LineOrder& order,
                             const WaitFacts& holder, std::optional<int> first_rank,
                             const ClientRecord& c, uint32_t place)
{
    WaitFacts f = holder;
    f.place = place;
    if (!named(place)) {
        // Deep in the line, processes ahead are what is in its way.
        f.holder.reset();
        f.held_since = {};
        f.quantum = {};
    }
    // Behind a waiter that ranks higher, priority is why it waits: the line
    // goes by rank first, so that is a rank above the first waiter's.
    if (first_rank && *first_rank < line.rank(order, c))
        f.reason = WaitReason::Priority;
    return f;
}

WaitFacts WaitNotices::due(const WaitingLine& line, const LineOrder& order, const WaitFacts& holder,
                           const std::map<ClientId, ClientRecord>& clients, const ClientRecord& c)
{
    return facts(line, order, holder, first_rank(line, order, clients), c, line.place(order, c));
}

void WaitNotices::queued(const ClientRecord& c, GpuIndex gpu)
{
    const Key key{c.sequence, c.id};
    const auto sent = c.wait_sent.find(gpu);
    if (sent == c.wait_sent.end())
        untold_.insert(key);
    else if (named(sent->second.place))
        named_.insert(key);
}

void WaitNotices::left(const ClientRecord& c, GpuIndex /*gpu*/)
{
    const Key key{c.sequence, c.id};
    untold_.erase(key);
    named_.erase(key);
}

void WaitNotices::publish(GpuIndex gpu, const WaitingLine& line, const LineOrder& order,
                          const WaitFacts& holder, std::map<ClientId, ClientRecord>& clients,
                          std::vector<Action>& out)
{
    const std::optional<int> rank = first_rank(line, order, clients);
    std::vector<std::pair<uint32_t, ClientId>> told;  // (place, client)
    // Tells `c` at `place` if that is news for it.
    const auto look = [&](ClientRecord& c, uint32_t place) {
        const WaitFacts f = facts(line, order, holder, rank, c, place);
        const auto sent = c.wait_sent.find(gpu);
        if (sent != c.wait_sent.end() && !news(sent->second, f))
            return;
        left(c, gpu);
        c.wait_sent[gpu] = f;
        queued(c, gpu);
        told.push_back({place, c.id});
    };

    if (reason_ != holder.reason) {
        // Every waiter may have news: each is looked at.
        reason_ = holder.reason;
        uint32_t place = 0;
        for (ClientId id : line.all(order))
            look(clients.at(id), ++place);
    } else {
        const std::vector<ClientId> first = line.first(order, kNamedPlaces);
        uint32_t place = 0;
        for (ClientId id : first)
            look(clients.at(id), ++place);
        // Those told a first place that are no longer among the first, and
        // those told nothing yet (those among the first were just looked at).
        std::vector<Key> others(named_.begin(), named_.end());
        others.insert(others.end(), untold_.begin(), untold_.end());
        for (const auto& [sequence, id] : others) {
            if (std::find(first.begin(), first.end(), id) != first.end())
                continue;
            ClientRecord& c = clients.at(id);
            look(c, line.place(order, c));
        }
    }
    std::sort(told.begin(), told.end());
    for (const auto& [place, id] : told) {
        Action a{ActionKind::Waiting, id, gpu_bit(gpu)};
        a.wait = clients.at(id).wait_sent.at(gpu);
        out.push_back(a);
    }
}

}  // namespace nvshare::daemon
