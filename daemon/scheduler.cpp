#include "daemon/scheduler.h"

#include <algorithm>
#include <bit>
#include <utility>

namespace nvshare::daemon {

namespace {

void erase_value(std::vector<ClientId>& v, ClientId id)
{
    v.erase(std::remove(v.begin(), v.end(), id), v.end());
}

}  // namespace

// ---- Clients -------------------------------------------------------------------

// ---- GPUs and settings ----------------------------------------------------------

Scheduler::Scheduler(SchedulerSettings settings)
    : settings_(settings),
      run_ahead_([this](GpuIndex g) -> const MemberClasses& { return queues_[g].classes; }),
      room_(gpus_.gpus(), clients_, lineup())
{
}

Lineup Scheduler::lineup()
{
    return {
        [this](GpuIndex g) -> const std::set<ClientId>& { return queues_[g].members; },
        [this](GpuIndex g) { return ordered(g, now_); },
        [this](GpuIndex g, ClientId besides) { return goes_next(g, besides); },
    };
}

std::optional<GpuIndex> Scheduler::ensure_gpu(const GpuDescription& description)
{
    // Before any client: a size it gives has nothing to refresh.
    const auto found = gpus_.ensure(description);
    if (found && found->added)
        add_gpu();
    return found ? std::optional(found->gpu) : std::nullopt;
}

std::optional<GpuIndex> Scheduler::claim_gpu(const GpuDescription& description, uint32_t uid,
                                             uint32_t principal, TimePoint now,
                                             std::string* refusal)
{
    const auto found = gpus_.claim(description, uid, principal, refusal);
    if (!found)
        return std::nullopt;
    if (found->added)
        add_gpu();
    else if (found->capacity_set)
        room_changed(found->gpu, now);
    return found->gpu;
}

void Scheduler::add_gpu()
{
    queues_.emplace_back();
    room_.add_gpu();
    // A new GPU has no clients yet: its mode alone says how it is shared.
    update_turns();
}

void Scheduler::set_capacity_override(const std::string& uuid, uint64_t bytes)
{
    gpus_.set_capacity_override(uuid, bytes);
}

void Scheduler::set_default_capacity(std::optional<uint64_t> bytes)
{
    gpus_.set_default_capacity(bytes);
}

void Scheduler::set_capacity(GpuIndex gpu, uint64_t bytes, TimePoint now)
{
    now_ = std::max(now_, now);
    if (!gpus_.set_capacity(gpu, bytes))
        return;
    room_changed(gpu, now);
    tick(now);
}

void Scheduler::set_mode(Mode mode, TimePoint now)
{
    now_ = std::max(now_, now);
    settings_.mode = mode;
    wait_dirty_ = ~GpuSet{0};  // the reason waiters are given follows the mode
    refresh_turns(now);
    tick(now);
}

void Scheduler::set_time_quantum(Duration tq, TimePoint now)
{
    now_ = std::max(now_, now);
    settings_.time_quantum = tq;
    quanta_changed(true, now);
}

// Deadlines derive from granted_at + TQ, so the running quanta follow; so do
// the waits under way where `waits` (softly, a waiter joins within a
// quantum).
void Scheduler::quanta_changed(bool waits, TimePoint now)
{
    wait_dirty_ = ~GpuSet{0};
    for (auto& [id, c] : clients_)
        if (c.phase == Phase::Holding)
            update_deadline(c);
    if (waits) {
        for (GpuQueue& q : queues_)
            q.followers.disband(clients_, deadlines_);
        admit(turns_.with({Turns::Soft}), now);
    }
    tick(now);
}

void Scheduler::set_gpu_mode(const std::string& uuid, std::optional<Mode> mode, TimePoint now)
{
    now_ = std::max(now_, now);
    gpus_.set_mode(uuid, mode);
    wait_dirty_ = ~GpuSet{0};
    refresh_turns(now);
    tick(now);
}

void Scheduler::set_gpu_time_quantum(const std::string& uuid, std::optional<Duration> tq,
                                     TimePoint now)
{
    now_ = std::max(now_, now);
    gpus_.set_time_quantum(uuid, tq);
    quanta_changed(true, now);
}

Mode Scheduler::mode_of(GpuIndex gpu) const
{
    return gpus_.mode_of(gpu, settings_.mode);
}

Duration Scheduler::time_quantum_of(GpuIndex gpu) const
{
    return gpus_.time_quantum_of(gpu, settings_.time_quantum);
}

void Scheduler::set_grace(Duration grace)
{
    settings_.grace = grace;
}

void Scheduler::set_quantum_ceiling(Duration ceiling, TimePoint now)
{
    now_ = std::max(now_, now);
    settings_.quantum_ceiling = ceiling;
    quanta_changed(false, now);
}

// ---- views --------------------------------------------------------------------

const ClientRecord* Scheduler::client(ClientId id) const
{
    auto it = clients_.find(id);
    return it == clients_.end() ? nullptr : &it->second;
}

ClientRecord* Scheduler::find(ClientId id)
{
    auto it = clients_.find(id);
    return it == clients_.end() ? nullptr : &it->second;
}

uint64_t Scheduler::requested_memory(GpuIndex gpu) const
{
    return room_.requested(gpu);
}

std::vector<ClientId> Scheduler::queue(GpuIndex gpu) const
{
    return ordered(gpu, now_);
}

std::optional<WaitFacts> Scheduler::wait_facts(ClientId id, GpuIndex gpu) const
{
    if (turns_.of(gpu) == Turns::Free)
        return std::nullopt;
    const ClientRecord* c = client(id);
    if (c == nullptr || c->phase != Phase::Waiting || (c->wanted & gpu_bit(gpu)) == 0)
        return std::nullopt;
    return WaitNotices::due(queues_[gpu].line, line_order(now_), facts_at(gpu, 0), clients_, *c);
}

std::vector<Action> Scheduler::take_actions()
{
    publish_waits();
    publish_shrinks();
    run_ahead_.publish(gpus_.gpus(), clients_, turns_.serialized(), now_, actions_);
    std::vector<Action> out;
    out.swap(actions_);
    return out;
}

std::optional<TimePoint> Scheduler::next_deadline() const
{
    std::optional<TimePoint> next = run_ahead_.recheck();
    if (const auto at = deadlines_.next())
        next = std::min(next.value_or(TimePoint::max()), *at);
    if (const auto at = room_.next_grace_end())
        next = std::min(next.value_or(TimePoint::max()), *at);
    return next;
}

// ---- client events ---------------------------------------------------------------

bool Scheduler::connect(ClientId id, ClientInfo info, std::vector<GpuIndex> gpus,
                        std::optional<TimePoint> now)
{
    if (now)
        now_ = std::max(now_, *now);
    if (clients_.count(id) != 0)
        return false;
    for (GpuIndex g : gpus)
        if (g >= gpus_.size())
            return false;
    ClientRecord c;
    c.id = id;
    c.info = std::move(info);
    c.gpus = std::move(gpus);
    c.last_active = now_;
    const GpuSet registered = c.registered();
    const int rank = policy::class_rank(c.info.priority);
    const ClientRecord& added = clients_.emplace(id, std::move(c)).first->second;
    usage_.joined(added);
    for_each_gpu(registered, [&](GpuIndex g) {
        queues_[g].members.insert(id);
        queues_[g].followers.joined(id);
        queues_[g].classes.add(rank, false, added.last_active);
        room_.joined(added, g, actions_);
    });
    return true;
}

void Scheduler::request(ClientId id, GpuSet gpus, TimePoint now)
{
    now_ = std::max(now_, now);
    ClientRecord* c = find(id);
    gpus &= c != nullptr ? c->registered() : 0;
    if (gpus == 0)
        return tick(now);  // every event looks at the time-dependent order
    set_activity(*c, c->phase, now);
    GpuSet freed = 0;
    if (c->phase == Phase::Holding) {
        if ((gpus & ~c->held) == 0) {
            // Already held: answer again so a confused client resynchronises.
            push(ActionKind::Grant, *c, c->held);
            actions_.back().bounded = c->bounded_sent;
            return tick(now);
        }
        // Never hold some GPUs while waiting for others: give up what is held.
        freed = end_hold(*c, c->held, now);
    }
    if (c->phase == Phase::Waiting) {
        const GpuSet old = c->wanted;
        dequeue(*c);
        for_each_gpu(old & ~gpus, [&](GpuIndex g) { c->wait_sent.erase(g); });
        c->wanted = gpus;
        enqueue(*c);  // keeps its place: same sequence number
        freed |= old & ~gpus;
        update_holder_deadlines(old & ~gpus);
    } else {
        set_activity(*c, Phase::Waiting, c->last_active);
        c->wait_sent.clear();
        c->sequence = next_sequence_++;
        c->waiting_since = now;
        c->wanted = gpus;
        enqueue(*c);
    }
    try_heads(freed, now);
    if (c->phase == Phase::Waiting) {
        if (grantable(*c, now)) {
            grant(*c, now);
        } else {
            notify_contention(c->wanted, now);
            update_deadline(*c);
        }
    }
    tick(now);
}

void Scheduler::release(ClientId id, GpuSet gpus, TimePoint now)
{
    now_ = std::max(now_, now);
    ClientRecord* c = find(id);
    if (c == nullptr)
        return;
    set_activity(*c, c->phase, now);
    if (c->phase == Phase::Waiting && (c->wanted & gpus) != 0) {
        const GpuSet wanted = c->wanted;
        for_each_gpu(wanted, [&](GpuIndex g) {
            if (const auto grace = c->graces.find(g); grace != c->graces.end())
                grace->second.left_line();
        });
        dequeue(*c);
        c->waited_total += now - c->waiting_since;
        set_activity(*c, Phase::Idle, c->last_active);
        c->wanted = 0;
        update_holder_deadlines(wanted);
        try_heads(wanted, now);
    } else if (c->phase == Phase::Holding && (c->held & gpus) != 0) {
        // A release it chose, while others wanted the GPU for most of the
        // hold, ends a burst that began with the request: its length tells
        // how long this client's bursts last.
        const Duration hold = now - c->granted_at;
        if ((c->held & ~gpus) == 0 && !c->drop_sent && c->contended_since &&
            (*c->contended_since - c->granted_at) * 2 <= hold)
            c->burst = policy::next_burst_estimate(c->burst, hold);
        try_heads(end_hold(*c, c->held & gpus, now), now);
    }
    tick(now);
}

bool Scheduler::report_memory(ClientId id, GpuIndex gpu, MemoryUse use, TimePoint now)
{
    now_ = std::max(now_, now);
    if (use.managed > kMaxReportedBytes || use.pinned > kMaxReportedBytes)
        return false;
    ClientRecord* c = find(id);
    if (c == nullptr || (c->registered() & gpu_bit(gpu)) == 0)
        return true;
    const auto was = c->memory.find(gpu);
    if (use.total() > (was == c->memory.end() ? 0 : was->second.total()) &&
        use.total() >= policy::kStartupGrowthFrom) {
        const bool first_growth = !c->grew_at && c->first_granted_at;
        c->grew_at = now;
        // Its first allocation moves its settle time earlier (settled_at):
        // those who wait for it to start learn when. Only deadlines on its
        // own GPUs depend on it (update_deadline reads the holders of the
        // GPUs a client holds or wants).
        if (first_growth)
            for_each_gpu(c->registered(), [&](GpuIndex g) { update_member_deadlines(g, true); });
    }
    set_memory(*c, gpu, use, now);
    return true;
}

void Scheduler::want_room(ClientId id, GpuIndex gpu, uint64_t bytes, TimePoint now)
{
    now_ = std::max(now_, now);
    if (const ClientRecord* c = find(id); c != nullptr)
        room_.want_room(*c, gpu, bytes);
}

void Scheduler::confirm_memory(ClientId id, GpuIndex gpu, std::optional<uint64_t> bytes,
                               TimePoint now)
{
    now_ = std::max(now_, now);
    ClientRecord* c = find(id);
    if (c == nullptr || (c->registered() & gpu_bit(gpu)) == 0)
        return;
    Room::confirm(*c, gpu, bytes);
    const auto m = c->memory.find(gpu);
    if (m != c->memory.end())
        set_memory(*c, gpu, m->second, now);
}

void Scheduler::set_host_counts_processes(GpuIndex gpu, bool counts)
{
    if (gpu < gpus_.size())
        gpus_[gpu].host_counts_processes = counts;
}

void Scheduler::confirm_host_memory(ClientId id, std::optional<uint64_t> bytes, TimePoint now)
{
    now_ = std::max(now_, now);
    ClientRecord* c = find(id);
    if (c == nullptr || c->memory.empty())
        return;
    c->host_resident = bytes;
    const auto first = c->memory.begin();
    set_memory(*c, first->first, first->second, now);
}

void Scheduler::set_memory(ClientRecord& c, GpuIndex gpu, MemoryUse use, TimePoint now)
{
    refresh_memory(c, gpu, use, now);
    tick(now);
}

void Scheduler::refresh_memory(ClientRecord& c, GpuIndex gpu, MemoryUse use, TimePoint now)
{
    set_room(c, gpu, use, now);
    room_changed(gpu, now);
    // What the host confirms on its later GPUs depends on this one
    // (Room::host_share).
    for (auto it = c.memory.upper_bound(gpu); it != c.memory.end(); ++it) {
        const uint64_t was = it->second.shared();
        set_room(c, it->first, it->second, now);
        if (it->second.shared() != was)
            room_changed(it->first, now);
    }
}

void Scheduler::set_room(ClientRecord& c, GpuIndex gpu, MemoryUse use, TimePoint now,
                         bool just_granted)
{
    const ClaimTurn turn = just_granted                     ? ClaimTurn::Granted
                           : (c.wanted & gpu_bit(gpu)) != 0 ? ClaimTurn::Waits
                                                            : ClaimTurn::None;
    room_.set(c, gpu, use, now, actions_, turn);
}

void Scheduler::room_changed(GpuIndex gpu, TimePoint now)
{
    room_.changed(gpu_bit(gpu));
    const GpuSet was_serialized = turns_.serialized();
    refresh_turns(now);
    // In group turns whose quanta run depends on memory (quantum_runs).
    update_holder_deadlines(gpu_bit(gpu) & turns_.with({Turns::Groups}));
    if ((was_serialized & turns_.serialized() & gpu_bit(gpu)) != 0) {
        keep_holders_that_fit(gpu, now);
        try_heads(gpu_bit(gpu), now);  // room may have appeared
    }
}

bool Scheduler::report_swaps(ClientId id, GpuIndex gpu, const SwapStats& stats, TimePoint now)
{
    now_ = std::max(now_, now);
    constexpr Duration kMaxTime = std::chrono::microseconds(kMaxReportedMicroseconds);
    if (stats.swap_in_time < Duration::zero() || stats.swap_in_time > kMaxTime ||
        stats.swap_out_time < Duration::zero() || stats.swap_out_time > kMaxTime)
        return false;
    ClientRecord* c = find(id);
    if (c == nullptr || (c->registered() & gpu_bit(gpu)) == 0)
        return true;
    SwapStats& old = c->swaps[gpu];
    if (stats.swap_ins > old.swap_ins && stats.swap_in_time >= old.swap_in_time) {
        // The quantum adapts to what switching costs now, not on average.
        const Duration latest = (stats.swap_in_time - old.swap_in_time) /
                                static_cast<Duration::rep>(std::min<uint64_t>(
                                    stats.swap_ins - old.swap_ins, uint64_t{1} << 62));
        c->last_swap_in[gpu] = latest;
        gpus_[gpu].last_swap_in = latest;
        wait_dirty_ |= c->held;  // its quantum may have grown
        update_deadline(*c);
    }
    old = stats;
    tick(now);
    return true;
}

bool Scheduler::report_rates(GpuIndex gpu, const MeasuredRates& rates)
{
    return gpu < gpus_.gpus().size() && merge(gpus_[gpu].rates, rates);
}

void Scheduler::disconnect(ClientId id, TimePoint now)
{
    now_ = std::max(now_, now);
    ClientRecord* c = find(id);
    if (c == nullptr)
        return;
    GpuSet affected = 0;
    if (c->phase == Phase::Holding)
        affected = end_hold(*c, c->held, now);
    if (c->phase == Phase::Waiting) {
        affected = c->wanted;
        dequeue(*c);
    }
    room_.forget(*c, now);
    const GpuSet registered = c->registered();
    const int rank = policy::class_rank(c->info.priority);
    const Phase phase = c->phase;
    const TimePoint last_active = c->last_active;
    usage_.retire(*c, now);
    deadlines_.set(*c, std::nullopt);
    clients_.erase(id);
    for_each_gpu(registered, [&](GpuIndex g) {
        queues_[g].members.erase(id);
        queues_[g].followers.left(id);
        queues_[g].classes.remove(rank, phase != Phase::Idle, last_active);
        room_.tell_unpageable(g, actions_);
    });
    update_holder_deadlines(affected);
    const GpuSet before = turns_.serialized();
    refresh_turns(now);
    // Its memory left its GPUs too: in group turns the first in line may
    // fit beside the holders now.
    if (before == turns_.serialized())
        try_heads(affected | (registered & turns_.with({Turns::Groups})), now);
    tick(now);
}

bool Scheduler::revoke(ClientId id, TimePoint now)
{
    now_ = std::max(now_, now);
    ClientRecord* c = find(id);
    if (c == nullptr || c->phase != Phase::Holding) {
        tick(now);
        return false;
    }
    try_heads(revoke_hold(*c, now, RevokeReason::Admin), now);
    tick(now);
    return true;
}

// ---- internals ----------------------------------------------------------------------

bool Scheduler::oversubscribed(GpuIndex gpu) const
{
    return room_.oversubscribed(gpu);
}

void Scheduler::push(ActionKind kind, const ClientRecord& c, GpuSet gpus, Duration grace)
{
    Action a{kind, c.id, gpus};
    a.exclusive = (gpus & turns_.serialized()) == gpus;
    a.contended = kind == ActionKind::Contended || c.contended_sent;
    a.grace = grace;
    room_.describe(a);
    actions_.push_back(a);
}

Duration Scheduler::quantum_for(const ClientRecord& c) const
{
    Duration swap{};
    for_each_gpu(c.held, [&](GpuIndex g) {
        if (auto it = c.last_swap_in.find(g); it != c.last_swap_in.end())
            swap = std::max(swap, it->second);
    });
    // A multi-GPU holder gets the shortest of its GPUs' quanta.
    std::optional<Duration> tq;
    for_each_gpu(c.held, [&](GpuIndex g) {
        const Duration q = time_quantum_of(g);
        tq = tq ? std::min(*tq, q) : q;
    });
    const Duration base = tq.value_or(settings_.time_quantum);
    // A client's own reports stretch only its own quantum, and only so far:
    // a bounded multiple of the admin's quantum, and the ceiling.
    const Duration ceiling =
        std::max(base, std::min(settings_.quantum_ceiling, base * kMaxQuantumStretch));
    const Duration own =
        std::max(base, std::min(ceiling, std::min(swap, ceiling) * kQuantumPerSwap));
    // A waiter of a higher class cuts it short.
    return policy::preempted_quantum(own, c.info.priority,
                                     best_waiting_class(c.held & turns_.scheduled()));
}

TurnStyles::Change Scheduler::update_turns()
{
    return turns_.update(static_cast<GpuIndex>(gpus_.size()), [&](GpuIndex g) {
        return TurnStyles::style(mode_of(g), room_.oversubscribed(g));
    });
}

void Scheduler::refresh_turns(TimePoint now)
{
    const TurnStyles::Change change = update_turns();
    if (!change.any)
        return;
    wait_dirty_ = ~GpuSet{0};
    room_.changed(~GpuSet{0});
    reschedule_all(now, change.became_serialized);
}

void Scheduler::enqueue(ClientRecord& c)
{
    wait_dirty_ |= c.wanted;
    for_each_gpu(c.wanted, [&](GpuIndex g) {
        queues_[g].line.add(c);
        queues_[g].followers.queued(c.id);
        queues_[g].notices.queued(c, g);
    });
    waiting_++;
}

void Scheduler::dequeue(ClientRecord& c)
{
    wait_dirty_ |= c.wanted;  // the places behind it move up
    leave_followers(c, false);
    for_each_gpu(c.wanted, [&](GpuIndex g) {
        queues_[g].line.remove(c);
        queues_[g].followers.unqueued(c.id);
        queues_[g].notices.left(c, g);
    });
    waiting_--;
}

void Scheduler::set_activity(ClientRecord& c, Phase phase, TimePoint last_active)
{
    if (phase == c.phase && last_active == c.last_active)
        return;
    const int rank = policy::class_rank(c.info.priority);
    for_each_gpu(c.registered(), [&](GpuIndex g) {
        queues_[g].classes.remove(rank, c.phase != Phase::Idle, c.last_active);
        queues_[g].classes.add(rank, phase != Phase::Idle, last_active);
    });
    c.phase = phase;
    c.last_active = last_active;
}

std::optional<ClientId> Scheduler::head(GpuIndex gpu, TimePoint now) const
{
    return queues_[gpu].line.head(line_order(now));
}

std::vector<ClientId> Scheduler::ordered(GpuIndex gpu, TimePoint now) const
{
    if (gpu >= queues_.size())
        return {};
    return queues_[gpu].line.all(line_order(now));
}

std::optional<ClientId> Scheduler::goes_next(GpuIndex gpu, ClientId besides) const
{
    return queues_[gpu].line.goes_next(line_order(now_), besides);
}

int Scheduler::best_waiting_class(GpuSet gpus) const
{
    int best = INT32_MAX;
    for_each_gpu(gpus, [&](GpuIndex g) {
        // Its class, not its aged rank: waiting long moves a waiter up the
        // queue but does not cut the holder's quantum.
        best = std::min(best, queues_[g].line.best_class());
    });
    return best;
}

bool Scheduler::wanted_by_others(const ClientRecord& c, TimePoint now) const
{
    bool any = false;
    for_each_gpu(c.held & turns_.scheduled(), [&](GpuIndex g) {
        if (turns_.of(g) != Turns::Soft) {
            // In a group turn, one still starting is told once it has
            // started: what it placed would otherwise have to move again.
            any |= !queues_[g].line.empty() &&
                   !(turns_.of(g) == Turns::Groups && soft_join::starting(c, now));
            return;
        }
        // Softly, nobody hands over while a process there is still
        // starting: it would hand over into a start, which may fill the GPU.
        bool others = !queues_[g].line.empty(), starts = false;
        for (ClientId h : gpus_[g].holders) {
            others |= h != c.id;
            starts |= soft_join::starting(clients_.at(h), now);
        }
        // One that waits only for the starts to settle starts next (every
        // follower: its own bound came by now_). The line is looked at only
        // where that decides, until one is found.
        if (others && !starts)
            starts =
                (!queues_[g].followers.empty() && now >= now_) ||
                queues_[g].line.any_of([&](ClientId id) {
                    const ClientRecord& w = clients_.at(id);
                    return soft_join::starting(w, now) &&
                           soft_join::policy_join_time(w, turn(g), time_quantum_of(g), now) <= now;
                });
        any |= others && !starts;
    });
    return any;
}

// Every waiter of a GPU in line order: those that may go go, the others'
// deadlines move (a holder granted just now may still be starting). A
// follower may go only where no holder is starting and its user is below
// its share, and then the first in line of its user's followers does; a
// pending one only once its bound has come, or as the first in line where
// nobody holds the GPU. So only the loose waiters, those pending ones and,
// while followers may start, the first follower in line of each user below
// its share are looked at; the followers' one deadline moves for all of
// them, the pending ones' where the holders' start passes their bound.
void Scheduler::admit(GpuSet gpus, TimePoint now)
{
    for_each_gpu(gpus & turns_.with({Turns::Soft}), [&](GpuIndex g) {
        GpuQueue& q = queues_[g];
        // The order as it was when the walk began (a grant's held time
        // starts at 0, but need not sum to exactly the same): kept before
        // the first grant.
        std::optional<policy::UserShares> shares;
        LineOrder order = line_order(now);
        using Place = std::pair<WaitingLine::Position, ClientId>;
        std::vector<Place> loose;
        loose.reserve(q.followers.loose().size());
        for (ClientId id : q.followers.loose())
            loose.push_back({q.line.position_of(order, clients_.at(id)), id});
        // Pending ones whose bound has come may go too, and the first in
        // line where nobody holds the GPU.
        for (const auto& [bound, id] : q.followers.pending()) {
            if (bound > now)
                break;
            loose.push_back({q.line.position_of(order, clients_.at(id)), id});
        }
        if (gpus_[g].holders.empty())
            if (const auto first = head(g, now);
                first && clients_.at(*first).pending && clients_.at(*first).pending->second > now)
                loose.push_back({q.line.position_of(order, clients_.at(*first)), *first});
        std::sort(loose.begin(), loose.end());
        // The first follower after `passed` of each user that may join.
        const auto next_follower = [&](const std::optional<Place>& passed) {
            return q.followers.next_in_line(
                passed,
                [&](ClientId id) {
                    return Place{q.line.position_of(order, clients_.at(id)), id};
                },
                [&](uint32_t uid) { return soft_join::user_may_join(uid, turn(g)); });
        };
        bool followers = soft_join::followers_may_start(turn(g), now);
        std::optional<Place> passed;
        size_t i = 0;
        for (;;) {
            const std::optional<Place> follower =
                followers ? next_follower(passed) : std::optional<Place>();
            if (i < loose.size() && (!follower || loose[i] < *follower))
                passed = loose[i++];
            else if (follower)
                passed = follower;
            else
                break;
            ClientRecord& w = clients_.at(passed->second);
            if (w.phase != Phase::Waiting)
                continue;
            if (grantable(w, now)) {
                if (!shares) {
                    shares = shares_;
                    order.shares = &*shares;
                }
                grant(w, now);
                followers = soft_join::followers_may_start(turn(g), now);
            } else {
                update_deadline(w);
            }
        }
        q.followers.set_at(soft_join::followers_due(turn(g), now_), deadlines_);
        update_pending(g);
    });
}

// First come, first served: a waiter may take its GPUs taken in turns only when
// they are free and nobody who came earlier wants them. (An earlier waiter
// either got them, or still waits and so holds its place.) This is what
// keeps multi-GPU requests from starving or deadlocking.
bool Scheduler::grantable(const ClientRecord& c, TimePoint now) const
{
    bool ok = true;
    for_each_gpu(c.wanted & turns_.scheduled(), [&](GpuIndex g) {
        if (!ok)
            return;
        if (gpus_[g].holders.empty() && head(g, now) == c.id)
            return;  // its turn
        switch (turns_.of(g)) {
            case Turns::Soft:
                ok = soft_join::may_join(c, turn(g), time_quantum_of(g), now);
                break;
            case Turns::Groups:
                ok = joins_group(c, g, now);
                break;
            case Turns::Free:
            case Turns::Strict:
                ok = false;
                break;
        }
    });
    return ok;
}

bool Scheduler::joins_group(const ClientRecord& c, GpuIndex gpu, TimePoint now) const
{
    return turns_.of(gpu) == Turns::Groups && head(gpu, now) == c.id &&
           soft_join::group_open(turn(gpu), room_.short_of_room_until(gpu), now) &&
           room_.fits_beside_holders(c, gpu);
}

void Scheduler::keep_holders_that_fit(GpuIndex gpu, TimePoint now)
{
    std::vector<ClientRecord*> holders;
    for (ClientId h : gpus_[gpu].holders)
        holders.push_back(&clients_.at(h));
    if (holders.size() <= 1)
        return;
    std::stable_sort(
        holders.begin(), holders.end(),
        [](const ClientRecord* a, const ClientRecord* b) { return a->granted_at < b->granted_at; });
    if (turns_.of(gpu) != Turns::Groups) {
        // One at a time: the first keeps it.
        for (size_t i = 1; i < holders.size(); ++i)
            send_drop(*holders[i], now, true);
        return;
    }
    // In group turns, those not leaving already while their memory fits.
    std::erase_if(holders, [](const ClientRecord* h) { return h->drop_sent; });
    for (ClientRecord* h : room_.beyond_fit(gpu, holders))
        send_drop(*h, now, true);
}

// Whether its quantum runs: somebody waits whom its letting go would help.
// Softly, that is a waiter of its own user (held back by the user's share);
// the others join when their bound comes.
bool Scheduler::contended(const ClientRecord& c) const
{
    return contended_on(c, c.held);
}

bool Scheduler::contended_on(const ClientRecord& c, GpuSet gpus) const
{
    bool any = false;
    for_each_gpu(gpus & turns_.serialized(), [&](GpuIndex g) { any |= !queues_[g].line.empty(); });
    for_each_gpu(gpus & turns_.with({Turns::Soft}), [&](GpuIndex g) {
        queues_[g].line.for_each_bucket(
            [&](uint32_t principal, int) { any |= principal == c.info.principal; });
        any |= soft_join::over_share(c, turn(g));
    });
    return any;
}

void Scheduler::grant(ClientRecord& c, TimePoint now)
{
    dequeue(c);
    set_activity(c, Phase::Holding, c.last_active);
    holding_++;
    c.held = c.wanted;
    c.wanted = 0;
    c.wait_sent.clear();
    c.granted_at = now;
    if (!c.first_granted_at)
        c.first_granted_at = now;
    c.waited_total += now - c.waiting_since;
    c.grants++;
    c.drop_sent = false;
    room_.granted(c);
    for_each_gpu(c.held, [&](GpuIndex g) {
        gpus_[g].holders.push_back(c.id);
        gpus_[g].grants++;
        // The grace of memory that waited for this turn runs from now.
        if (const auto m = c.memory.find(g); m != c.memory.end())
            set_room(c, g, m->second, now, true);
    });
    line_moved_ |= c.held & turns_.with({Turns::Soft, Turns::Groups});
    c.contended_sent = wanted_by_others(c, now);
    // Bounded from its first submission, if a higher class is here.
    run_ahead_.granted(c, turns_.serialized(), now_);
    c.contended_since.reset();
    if (c.contended_sent)
        c.contended_since = now;
    shares_.hold_began(c.info.principal, now);
    push(ActionKind::Grant, c, c.held);
    actions_.back().bounded = c.bounded_sent;
    // Joined a group turn: it shares the GPU with those already there.
    for_each_gpu(c.held,
                 [&](GpuIndex g) { actions_.back().exclusive &= gpus_[g].holders.size() == 1; });
    update_deadline(c);
    // Joined others softly: once it has started they are told, so that they
    // hand over at the end of their burst, and their share may have changed.
    for_each_gpu(c.held & turns_.with({Turns::Soft}), [&](GpuIndex g) {
        for (ClientId h : gpus_[g].holders) {
            if (h == c.id)
                continue;
            tell_contended(clients_.at(h), now);
            update_deadline(clients_.at(h));
        }
    });
    // Joined a group: whether the next in line fits beside the holders that
    // stay has changed (quantum_runs).
    update_holder_deadlines(c.held & turns_.with({Turns::Groups}));
}

GpuSet Scheduler::end_hold(ClientRecord& c, GpuSet gpus, TimePoint now)
{
    gpus &= c.held;
    wait_dirty_ |= gpus;
    room_.let_go(c, gpus);
    for_each_gpu(gpus, [&](GpuIndex g) { erase_value(gpus_[g].holders, c.id); });
    c.held &= ~gpus;
    if (c.held == 0) {
        c.held_total += now - c.granted_at;
        shares_.hold_ended(c.info.principal, c.granted_at, now);
        set_activity(c, Phase::Idle, c.last_active);
        holding_--;
        c.drop_sent = false;
        c.contended_sent = false;
        c.contended_since.reset();
    }
    update_deadline(c);
    // Soft turns: shares moved; group turns: one leaving may have kept the
    // others' quanta from running (quantum_runs).
    update_holder_deadlines(gpus & turns_.with({Turns::Soft, Turns::Groups}));
    return gpus;
}

void Scheduler::send_drop(ClientRecord& c, TimePoint now, bool turns_begin)
{
    if (c.drop_sent)
        return;
    c.drop_sent = true;
    c.drop_deadline = now + settings_.grace;
    c.drops++;
    push(ActionKind::Drop, c, c.held, settings_.grace);
    actions_.back().turns_begin = turns_begin;
    update_deadline(c);
}

GpuSet Scheduler::revoke_hold(ClientRecord& c, TimePoint now, RevokeReason reason)
{
    const GpuSet held = c.held;
    c.revocations++;
    Room::revoked(c);
    end_hold(c, held, now);
    push(ActionKind::Revoke, c, held);
    actions_.back().revoke_reason = reason;
    return held;
}

WaitFacts Scheduler::facts_at(GpuIndex gpu, uint32_t place) const
{
    WaitFacts f;
    f.place = place;
    f.reason = mode_of(gpu) == Mode::On  ? WaitReason::ModeOn
               : turns_.serializing(gpu) ? WaitReason::Oversubscribed
                                         : WaitReason::Turns;
    const auto& holders = gpus_[gpu].holders;
    if (!holders.empty()) {
        // The first granted: the one that keeps the GPU when it is taken in turns.
        const ClientRecord& h = clients_.at(holders.front());
        f.holder = h.id;
        f.held_since = h.granted_at;
        f.quantum = quantum_for(h);
    }
    return f;
}

// A waiter's facts change only when its GPU's queue, holder, quantum or
// reason does, so only the GPUs marked since the last call are looked at,
// and on each only the waiters that may have news (WaitNotices).
void Scheduler::publish_waits()
{
    const GpuSet dirty = wait_dirty_ & turns_.scheduled();
    wait_dirty_ = 0;
    for_each_gpu(dirty, [&](GpuIndex g) {
        if (g >= queues_.size())
            return;
        queues_[g].notices.publish(g, queues_[g].line, line_order(now_), facts_at(g, 0), clients_,
                                   actions_);
    });
}

void Scheduler::publish_shrinks()
{
    for_each_gpu(room_.publish_shrinks(now_, actions_),
                 [&](GpuIndex g) { update_member_deadlines(g, false); });
}

// GPUs were freed, a waiter left or the line moved: the first waiter of each
// such GPU may now go; in group turns, if not now, when the holders have
// started (update_deadline).
void Scheduler::try_heads(GpuSet freed, TimePoint now)
{
    for_each_gpu(freed & turns_.serialized(), [&](GpuIndex g) {
        const auto first = head(g, now);
        if (!first)
            return;
        ClientRecord& next = clients_.at(*first);
        if (grantable(next, now))
            grant(next, now);
        else
            update_deadline(next);
    });
    admit(freed, now);
}

// Tell holders of GPUs taken in turns that somebody waits, once per grant, so that
// an idle holder hands over at once instead of at the end of its quantum.
void Scheduler::notify_contention(GpuSet gpus, TimePoint now)
{
    for_each_gpu(gpus & turns_.scheduled(), [&](GpuIndex g) {
        for (ClientId h : gpus_[g].holders) {
            ClientRecord& holder = clients_.at(h);
            tell_contended(holder, now);
            update_deadline(holder);
        }
    });
}

void Scheduler::tell_contended(ClientRecord& c, TimePoint now)
{
    if (c.contended_sent || !wanted_by_others(c, now))
        return;
    c.contended_sent = true;
    c.contended_since = now;
    push(ActionKind::Contended, c, c.held & turns_.scheduled());
}

// In group turns the first in line joins the holders where it fits beside
// them: of holders whose quanta end, only as many are asked to let go as
// make it fit beside those that stay, and the rest go on with what they do
// while one of them leaves. Asking every one of them made a group whose
// quanta ended together all swap out, and come back for the last of their
// work beside the one granted. With nobody leaving, the quantum runs as
// anywhere: the first in line may fit and still not join (the group waits
// for room), and must not wait on that.
bool Scheduler::quantum_runs(const ClientRecord& c) const
{
    const GpuSet groups = c.held & turns_.with({Turns::Groups});
    bool runs = contended_on(c, c.held & ~groups);
    for_each_gpu(groups, [&](GpuIndex g) {
        const std::optional<ClientId> first = head(g, now_);
        if (!first)
            return;
        bool leaving = false;
        for (ClientId h : gpus_[g].holders)
            leaving |= h != c.id && clients_.at(h).drop_sent;
        runs |= !leaving || !room_.fits_beside_staying(clients_.at(*first), g);
    });
    return runs;
}

std::optional<TimePoint> Scheduler::quantum_end(const ClientRecord& c) const
{
    if (!quantum_runs(c))
        return std::nullopt;
    TimePoint end = c.granted_at + quantum_for(c);
    // Past its user's share it hands over soon: switching costs only the
    // handoff while memory fits.
    for_each_gpu(c.held & turns_.with({Turns::Soft}), [&](GpuIndex g) {
        if (soft_join::over_share(c, turn(g)))
            end = std::min(end, c.granted_at + policy::kShareRebalance);
    });
    return end;
}

void Scheduler::update_deadline(ClientRecord& c)
{
    std::optional<TimePoint> want;
    if (c.phase == Phase::Holding) {
        if (c.drop_sent) {
            want = c.drop_deadline;
        } else {
            want = quantum_end(c);
        }
        // Told that others want its GPUs once the holders there started.
        if (!c.contended_sent) {
            for_each_gpu(c.held & turns_.with({Turns::Soft, Turns::Groups}), [&](GpuIndex g) {
                for (ClientId h : gpus_[g].holders) {
                    const TimePoint at = soft_join::settled_time(clients_.at(h));
                    if (at > now_ && (!want || at < *want))
                        want = at;
                }
            });
        }
    } else if (c.phase == Phase::Waiting) {
        // When it may join the holders of a GPU taken in turns softly.
        for_each_gpu(c.wanted & turns_.with({Turns::Soft}), [&](GpuIndex g) {
            const TimePoint at = soft_join::join_time(c, turn(g), time_quantum_of(g), now_);
            if (at > now_ && (!want || at < *want))
                want = at;
        });
        // When the holders of a GPU taken in group turns have started and
        // have their room.
        for_each_gpu(c.wanted & turns_.with({Turns::Groups}), [&](GpuIndex g) {
            const TimePoint at =
                std::max(room_.short_of_room_until(g), soft_join::holders_settled(turn(g)));
            if (at > now_ && (!want || at < *want))
                want = at;
        });
    }
    // A follower whose deadline is its followers' stays or goes among them;
    // one whose own bound has not come is pending.
    const auto f = c.phase == Phase::Waiting ? follower_gpu(c, now_) : std::nullopt;
    if (f && f->second <= now_ && want == queues_[f->first].followers.at()) {
        if (c.follows == f->first)
            return;
        leave_followers(c, true);
        deadlines_.set(c, std::nullopt);
        queues_[f->first].followers.follow(c, f->first, deadlines_);
        return;
    }
    if (c.follows)
        queues_[*c.follows].followers.unfollow(c, true, deadlines_);
    set_pending(c, f && f->second > now_ ? f : std::nullopt, want);
    deadlines_.set(c, want);
}

std::optional<std::pair<GpuIndex, TimePoint>> Scheduler::follower_gpu(const ClientRecord& c,
                                                                      TimePoint now) const
{
    if (c.phase != Phase::Waiting || c.first_granted_at ||
        c.info.priority == Priority::Interactive ||
        policy::join_reads_holders(c.info.priority, c.burst))
        return std::nullopt;
    const GpuSet in_turns = c.wanted & turns_.scheduled();
    if (std::popcount(in_turns) != 1 || (in_turns & turns_.with({Turns::Soft})) == 0)
        return std::nullopt;
    const auto g = static_cast<GpuIndex>(std::countr_zero(in_turns));
    // Once its own bound has come, only the holders' start keeps it.
    return std::pair{g, soft_join::policy_join_time(c, turn(g), time_quantum_of(g), now)};
}

bool Scheduler::a_follower_may_go(GpuIndex gpu, TimePoint now) const
{
    const soft_join::Turn t = turn(gpu);
    return soft_join::followers_may_start(t, now) &&
           queues_[gpu].followers.any_may_join(
               [&](uint32_t uid) { return soft_join::user_may_join(uid, t); });
}

void Scheduler::leave_followers(ClientRecord& c, bool still_waiting)
{
    if (c.follows)
        queues_[*c.follows].followers.unfollow(c, still_waiting, deadlines_);
    if (c.pending)
        queues_[c.pending->first].followers.clear_pending(c, still_waiting);
}

void Scheduler::set_pending(ClientRecord& c, std::optional<std::pair<GpuIndex, TimePoint>> pending,
                            std::optional<TimePoint> deadline)
{
    if (c.pending && c.pending != pending)
        queues_[c.pending->first].followers.clear_pending(c, true);
    if (pending)
        queues_[pending->first].followers.set_pending(c, *pending, deadline);
}

// A pending waiter's join time is the later of its bound and the holders'
// start: where both its bound and its deadline were beyond that start, it
// is as it was.
void Scheduler::update_pending(GpuIndex gpu)
{
    const TimePoint upto = std::max(now_, soft_join::holders_settled(turn(gpu)));
    for (ClientId id : queues_[gpu].followers.to_update(upto))
        if (ClientRecord& c = clients_.at(id); c.pending && c.pending->first == gpu)
            update_deadline(c);
}

void Scheduler::update_member_deadlines(GpuIndex gpu, bool holders)
{
    SoftFollowers& f = queues_[gpu].followers;
    f.set_at(soft_join::followers_due(turn(gpu), now_), deadlines_);
    update_pending(gpu);
    const std::vector<ClientId> others(f.others().begin(), f.others().end());
    for (ClientId id : others) {
        ClientRecord& c = clients_.at(id);
        if (holders || (c.held & gpu_bit(gpu)) == 0)
            update_deadline(c);
    }
}

std::optional<TimePoint> Scheduler::deadline_of(ClientId id) const
{
    const ClientRecord* c = client(id);
    if (c == nullptr)
        return std::nullopt;
    return c->follows ? queues_[*c->follows].followers.at() : c->deadline;
}

void Scheduler::update_holder_deadlines(GpuSet gpus)
{
    for_each_gpu(gpus, [&](GpuIndex g) {
        for (ClientId h : gpus_[g].holders)
            update_deadline(clients_.at(h));
    });
}

// A GPU's turn style changed (mode, capacity or reported memory):
// look at everybody.
void Scheduler::reschedule_all(TimePoint now, GpuSet became_serialized)
{
    for_each_gpu(turns_.serialized(), [&](GpuIndex g) { keep_holders_that_fit(g, now); });

    std::vector<ClientRecord*> waiters;
    for (auto& [id, c] : clients_)
        if (c.phase == Phase::Waiting)
            waiters.push_back(&c);
    std::sort(waiters.begin(), waiters.end(), [](const ClientRecord* a, const ClientRecord* b) {
        return a->sequence < b->sequence;
    });
    for (ClientRecord* w : waiters)
        if (w->phase == Phase::Waiting && grantable(*w, now))
            grant(*w, now);

    for (auto& [id, c] : clients_) {
        if (c.phase == Phase::Holding) {
            // One told while its GPU was shared learns that it now takes
            // turns there (its allocations may then wait for room).
            if (c.contended_sent && !c.drop_sent && (c.held & became_serialized) != 0)
                push(ActionKind::Contended, c, c.held & turns_.scheduled());
            tell_contended(c, now);
        }
        update_deadline(c);
    }
    tick(now);
}

void Scheduler::tick(TimePoint now)
{
    now_ = std::max(now_, now);
    // Unconfirmed claims whose grace ended count for others no more.
    while (const auto ended = room_.grace_ended(now)) {
        const auto [id, g] = *ended;
        ClientRecord& c = clients_.at(id);
        refresh_memory(c, g, c.memory.at(g), now);
    }
    // The order of waiters moves with time (aging, held time), so a free GPU
    // whose first waiter could not go (it waits for another GPU too) may
    // have a new first waiter that can.
    GpuSet idle = 0;
    for (GpuIndex g = 0; g < gpus_.size(); ++g)
        if (gpus_[g].holders.empty() && !queues_[g].line.empty())
            idle |= gpu_bit(g);
    try_heads(idle & turns_.scheduled(), now);
    while (const auto entry = deadlines_.due(now)) {
        ClientRecord& c = clients_.at(entry->second);
        if (c.follows) {
            // A GPU's followers come due: where nothing else comes due among
            // them and none of them may go, each would only find its
            // deadline moved to the same new one.
            const GpuIndex g = *c.follows;
            SoftFollowers& f = queues_[g].followers;
            if (!deadlines_.another_before(*entry, f.last()) && !a_follower_may_go(g, now)) {
                f.set_at(soft_join::followers_due(turn(g), now_), deadlines_);
                continue;
            }
            f.unfollow(c, true, deadlines_);  // then it comes due on its own, as any other
        }
        deadlines_.set(c, std::nullopt);  // the first entry: its own
        if (c.phase == Phase::Waiting) {
            // Its bound for joining the holders came.
            if (grantable(c, now))
                grant(c, now);
            else
                update_deadline(c);
            continue;
        }
        if (c.phase != Phase::Holding)
            continue;
        tell_contended(c, now);  // those it shares with may have started
        if (c.drop_sent) {
            if (now >= c.drop_deadline)
                try_heads(revoke_hold(c, now, RevokeReason::GraceExpired), now);
            else
                update_deadline(c);
        } else if (const auto end = quantum_end(c); end && now >= *end) {
            send_drop(c, now);
        } else {
            update_deadline(c);
        }
    }
    // Every event ends here: where it granted a GPU taken in turns, the
    // next in line may join the one granted (group turns), or the waiters
    // that could not join may now, or later (soft turns: when they may join
    // depends on the holders).
    while (line_moved_ != 0)
        try_heads(std::exchange(line_moved_, GpuSet{0}), now);
}

}  // namespace nvshare::daemon
