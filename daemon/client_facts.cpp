#include "daemon/client_facts.h"

#include "daemon/usage.h"

namespace nvshare::daemon {

ClientFacts client_facts(const Scheduler& scheduler, const ClientRecord& c, TimePoint now)
{
    ClientFacts f;
    f.state = phase_name(c.phase);
    for (const auto& [g, m] : c.memory) {
        f.memory += m.total();
        f.pinned += m.pinned;
        f.confirmed_pinned += m.confirmed_pinned;
        f.confirmed += m.shared();
    }
    f.held = held_so_far(c, now);
    f.waited = waited_so_far(c, now);
    f.quantum_left = quantum_left(scheduler, c, now);
    // Its place now, not the one last told (deep in a line that is a snapshot).
    if (c.phase == Phase::Waiting)
        for (const auto& [g, told] : c.wait_sent)
            if (const auto w = scheduler.wait_facts(c.id, g))
                if (f.wait_place == 0 || w->place < f.wait_place) {
                    f.wait_place = w->place;
                    f.wait_reason = proto::wait_reason_name(w->reason);
                }
    for (const auto& [g, x] : c.swaps) {
        f.swaps.bytes_prefetched += x.bytes_prefetched;
        f.swaps.bytes_evicted += x.bytes_evicted;
        f.swaps.swap_ins += x.swap_ins;
        f.swaps.swap_in_time += x.swap_in_time;
        f.swaps.swap_outs += x.swap_outs;
        f.swaps.swap_out_time += x.swap_out_time;
    }
    return f;
}

uint64_t memory_on(const ClientRecord& c, GpuIndex gpu)
{
    const auto use = c.memory.find(gpu);
    return use == c.memory.end() ? 0 : use->second.total();
}

Duration quantum_left(const Scheduler& scheduler, const ClientRecord& c, TimePoint now)
{
    if (c.phase != Phase::Holding)
        return Duration::zero();
    const Duration left = scheduler.quantum_for(c) - (now - c.granted_at);
    return left > Duration::zero() ? left : Duration::zero();
}

const char* phase_name(Phase p)
{
    switch (p) {
        case Phase::Idle:
            return "idle";
        case Phase::Waiting:
            return "waiting";
        case Phase::Holding:
            return "holding";
    }
    return "?";
}

}  // namespace nvshare::daemon
