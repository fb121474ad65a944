#include "daemon/wait_notices.h"

#include <algorithm>
#include <bit>

namespace nvshare::daemon {

namespace {

// Whether a waiter told `sent` must be told `now`: anything new among the
// first places; further back, a place in another power of two or a new reason.
bool news(const WaitFacts& sent, const WaitFacts& now)
{
    if (sent.same_news(now))
        return false;
    return !(now.place > WaitNotices::kNamedPlaces && sent.place > WaitNotices::kNamedPlaces &&
             sent.reason == now.reason && std::bit_width(sent.place) == std::bit_width(now.place));
}

}  // namespace

WaitNotices::Group WaitNotices::group_of(const ClientRecord& c, const WaitFacts& told)
{
    return {c.info.principal, policy::class_rank(c.info.priority), std::bit_width(told.place),
            told.reason == WaitReason::Priority};
}

void WaitNotices::queued(const ClientRecord& c, GpuIndex gpu)
{
    const Key key{c.sequence, c.id};
    const auto sent = c.wait_sent.find(gpu);
    if (sent == c.wait_sent.end())
        untold_.insert(key);
    else if (sent->second.place <= kNamedPlaces)
        named_.insert(key);
    else
        deep_[group_of(c, sent->second)].insert(key);
}

void WaitNotices::left(const ClientRecord& c, GpuIndex gpu)
{
    const Key key{c.sequence, c.id};
    const auto sent = c.wait_sent.find(gpu);
    if (sent == c.wait_sent.end()) {
        untold_.erase(key);
    } else if (sent->second.place <= kNamedPlaces) {
        named_.erase(key);
    } else if (const auto g = deep_.find(group_of(c, sent->second)); g != deep_.end()) {
        g->second.erase(key);
        if (g->second.empty())
            deep_.erase(g);
    }
}

void WaitNotices::publish(GpuIndex gpu, const WaitingLine& line, const LineOrder& order,
                          const WaitFacts& holder, std::map<ClientId, ClientRecord>& clients,
                          std::vector<Action>& out)
{
    // Behind a waiter that ranks higher, priority is why it waits: the line
    // goes by rank first, so that is a rank above the first waiter's.
    const bool mixed = line.mixed();  // else nobody outranks anybody
    const std::optional<ClientId> head = line.head(order);
    const int first_rank = mixed && head ? line.rank(order, clients.at(*head)) : 0;
    const auto facts = [&](const ClientRecord& c, uint32_t place) {
        WaitFacts f = holder;
        f.place = place;
        if (place > kNamedPlaces) {
            // Deep in the line, processes ahead are what is in its way.
            f.holder.reset();
            f.held_since = {};
            f.quantum = {};
        }
        if (mixed && first_rank < line.rank(order, c))
            f.reason = WaitReason::Priority;
        return f;
    };
    std::vector<std::pair<uint32_t, ClientId>> told;  // (place, client)
    // Tells `c` at `place` if that is news for it; whether it was.
    const auto look = [&](ClientRecord& c, uint32_t place) {
        const WaitFacts f = facts(c, place);
        const auto sent = c.wait_sent.find(gpu);
        if (sent != c.wait_sent.end() && !news(sent->second, f))
            return false;
        if (sent != c.wait_sent.end() && sent->second.place <= kNamedPlaces &&
            place <= kNamedPlaces) {
            sent->second = f;  // among the named still
        } else {
            left(c, gpu);
            c.wait_sent[gpu] = f;
            queued(c, gpu);
        }
        told.push_back({place, c.id});
        return true;
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
        // Further back: each group's ends, inwards while there is news.
        for (auto g = deep_.begin(); g != deep_.end();) {
            const Group group = g->first;
            for (const bool front : {true, false}) {
                for (auto it = deep_.find(group); it != deep_.end(); it = deep_.find(group)) {
                    const ClientId id =
                        front ? it->second.begin()->second : it->second.rbegin()->second;
                    ClientRecord& c = clients.at(id);
                    if (!look(c, line.place(order, c)))
                        break;
                }
            }
            g = deep_.upper_bound(group);
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
