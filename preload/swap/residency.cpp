#include "preload/swap/residency.h"

#include <sys/mman.h>
#include <time.h>

#include <atomic>

#include "preload/clock.h"
#include "preload/driver/hook_table.h"
#include "preload/env.h"
#include "preload/log.h"
#include "preload/memory/allocations.h"
#include "preload/memory/contexts.h"
#include "preload/memory/devices.h"
#include "preload/swap/host_memory.h"
#include "preload/swap/room_wait.h"
#include "preload/swap/swap_plan.h"
#include "preload/swap/swappable.h"
#include "preload/swap/switch_share.h"
#include "preload/swap/tuning.h"

namespace nvshare::preload::residency {

namespace {

// Ranges moved per GPU and round. A process with more managed allocations
// than this gets its newest ones moved in bulk; older ones fault in.
constexpr size_t kMaxRanges = 16384;
// What stays of an allocation on eviction is kept in this unit (the GPU's
// large page), so the moves stay page-aligned.
constexpr uint64_t kKeepAlign = 2ull << 20;

struct GpuState {
    CUstream stream = nullptr;  // the library's own, created on first use
    bool in_flight = false;     // a swap-in is running
    uint64_t started_ns = 0;
    uint64_t bytes = 0;
    bool data_on_host = false;  // we evicted it: bring it back on the next grant
    uint64_t migrated_seq = 0;  // allocations up to this one were moved once
    uint64_t evicted = 0;       // bytes the latest eviction moved to host
    uint64_t restoring = 0;     // of those, what the running swap-in brings back
    // Transfer rates measured on this GPU (swap_plan::RateEstimate): the
    // driver's migration of managed memory, and the swap engine.
    swap_plan::RateEstimate evict_rate;
    swap_plan::RateEstimate swap_in_rate;
    swap_plan::RateEstimate engine_out_rate;
    swap_plan::RateEstimate engine_in_rate;
    Rates known;  // what nvshared says earlier processes measured here
    Stats stats;
};

GpuState g_gpus[devices::kMaxGpus];
// An await_room found no room: none is coming until the next grant. Read by
// the program's threads as they allocate (room_will_come).
std::atomic<bool> g_room_gave_up[devices::kMaxGpus];
alloc::Range* g_ranges = nullptr;  // scratch, mapped on first use

bool wanted(Policy policy, bool auto_says)
{
    return policy == Policy::On || (policy == Policy::Auto && auto_says);
}

// What stays on GPU `i` when we let go with `allowed` (swap_plan).
swap_plan::Kept kept_on(uint32_t i, uint64_t allowed)
{
    return swap_plan::kept_at_release(allowed, devices::capacity(i), config().evict == Policy::On);
}

// What the host memory made ahead of a switch leaves on GPU `i`
// (swap_plan::keep_beside_as_big).
uint64_t keep_beside_as_big(uint32_t i, uint64_t keep_bytes)
{
    return swap_plan::keep_beside_as_big(keep_bytes, devices::capacity(i), devices::used(i));
}

alloc::Range* scratch()
{
    if (g_ranges == nullptr) {
        void* m = mmap(nullptr, kMaxRanges * sizeof(alloc::Range), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        g_ranges = m == MAP_FAILED ? nullptr : static_cast<alloc::Range*>(m);
    }
    return g_ranges;
}

// The library's own stream on GPU `index`, made on first use with the GPU's
// context current; nullptr if the driver gives none.
CUstream stream_of(GpuState& g)
{
    auto create = NVS_REAL(cuStreamCreate);
    if (g.stream == nullptr &&
        (create == nullptr || create(&g.stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS))
        g.stream = nullptr;
    return g.stream;
}

// One move of the swap engine on GPU `index` (a callback of
// contexts::with_device_context): in (budget) or out (keep).
struct EngineMove {
    uint32_t index;
    bool in;
    uint64_t bytes;  // budget or keep
    swappable::Moved moved;
    bool wait_for_room = false;  // swap-in: see swappable::swap_in
    bool ran = false;
};

void engine_move(void* arg)
{
    auto* m = static_cast<EngineMove*>(arg);
    contexts::relax_capture_mode();
    CUstream stream = stream_of(g_gpus[m->index]);
    if (stream == nullptr)
        return;
    m->moved = m->in ? swappable::swap_in(m->index, m->bytes, stream, m->wait_for_room)
                     : swappable::swap_out(m->index, m->bytes, stream);
    m->ran = true;
}

// Device memory the swap engine may fill on GPU `i` now: the capacity less
// what is there already (our pinned and swappable memory on the device, our
// managed memory at most, and what other processes pin).
uint64_t engine_budget(uint32_t i)
{
    const devices::Gpu& gpu = devices::at(i);
    const int64_t pinned = gpu.pinned.load(std::memory_order_relaxed);
    const int64_t managed = gpu.managed.load(std::memory_order_relaxed) -
                            static_cast<int64_t>(swappable::total_bytes(i));
    const uint64_t taken = static_cast<uint64_t>(pinned > 0 ? pinned : 0) +
                           static_cast<uint64_t>(managed > 0 ? managed : 0) +
                           swappable::device_bytes(i) +
                           gpu.others_pinned.load(std::memory_order_relaxed);
    const uint64_t cap = devices::capacity(i);
    return cap > taken ? cap - taken : 0;
}

// Records a move of the swap engine in the GPU's statistics and rates.
void note_engine_move(GpuState& g, const swappable::Moved& m, bool in)
{
    if (m.bytes == 0)
        return;
    // A swap-out that spent much of its time pinning measured the pinning,
    // which switch_share_ns counts apart (for what is not made ahead): taken
    // for the copy's rate, it would make a holder's share of a switch
    // outlast its pauses, and the holder keep the GPU through all of them.
    if (in || m.making_ns * 4 < m.ns)
        (in ? g.engine_in_rate : g.engine_out_rate).add(m.bytes, m.ns);
    if (in) {
        g.stats.bytes_prefetched += m.bytes;
        g.stats.swap_ins++;
        g.stats.swap_in_ns += m.ns;
    } else {
        g.stats.bytes_evicted += m.bytes;
        g.stats.swap_outs++;
        g.stats.swap_out_ns += m.ns;
    }
    g.stats.dirty = true;
}

// Adds a later round of a swap-in to the first; where the room stands is
// the later round's.
void add_round(swappable::Moved& to, const swappable::Moved& round)
{
    to.bytes += round.bytes;
    to.ns += round.ns;
    to.lock_ns += round.lock_ns;
    to.place_ns += round.place_ns;
    to.create_ns += round.create_ns;
    to.access_ns += round.access_ns;
    to.sync_ns += round.sync_ns;
    to.short_of_room = round.short_of_room;
    to.left_on_host = round.left_on_host;
    to.out_to_host += round.out_to_host;
    to.left_waiting = round.left_waiting;
}

// The swap engine's swap-in on GPU `i`: memory for what has none, data back
// from host memory (waited for), waiting `patience` ns at a time for room
// that others still give back (0: not at all). Meanwhile what finds no room
// stays where it is: the previous holder lets go before it swaps out, so
// that its copies out overlap ours in, and room shows as its groups leave.
// Only what still finds none once the room stops growing goes to host memory.
// Returns the bytes that stay in host memory.
uint64_t engine_swap_in(uint32_t i, uint64_t patience)
{
    EngineMove m{i, true, engine_budget(i), {}, patience != 0};
    if (!contexts::with_device_context(devices::at(i).ordinal, engine_move, &m) || !m.ran)
        return 0;
    const uint64_t first = now_ns();
    swap::RoomWait wait(first, patience, m.moved.left_waiting + m.moved.left_on_host);
    while (m.moved.short_of_room && wait.waiting()) {
        // Host memory we kept would only save pinning at our next swap-out;
        // those who give the room may find none to swap out to without it,
        // and our work would then run over the bus until they found some.
        swappable::give_back_kept_host(i);
        const bool last = wait.last(now_ns());  // then what still waits goes to host memory
        if (!last) {
            const timespec pause{0, static_cast<long>(wait.pause_ns())};
            nanosleep(&pause, nullptr);
        }
        EngineMove again{i, true, engine_budget(i), {}, !last};
        if (!contexts::with_device_context(devices::at(i).ordinal, engine_move, &again) ||
            !again.ran)
            break;
        wait.round_done(last, again.moved.left_waiting + again.moved.left_on_host, now_ns());
        add_round(m.moved, again.moved);
    }
    if (m.moved.left_waiting != 0) {  // a round failed: nothing may stay unmapped
        EngineMove rest{i, true, engine_budget(i), {}, false};
        if (contexts::with_device_context(devices::at(i).ordinal, engine_move, &rest) && rest.ran)
            add_round(m.moved, rest.moved);
    }
    const uint64_t waited = swappable::finish_copies(i);  // a round that broke off
    m.moved.sync_ns += waited;
    m.moved.ns += waited;
    note_engine_move(g_gpus[i], m.moved, true);
    if (m.moved.bytes != 0)
        log_debug(
            "swapped in %llu bytes to GPU %u in %llu ms (lock %llu, device memory %llu, mapping "
            "%llu, access %llu, last copies %llu ms; %llu ms waiting for room)",
            static_cast<unsigned long long>(m.moved.bytes), i,
            static_cast<unsigned long long>(m.moved.ns / 1000000),
            static_cast<unsigned long long>(m.moved.lock_ns / 1000000),
            static_cast<unsigned long long>(m.moved.create_ns / 1000000),
            static_cast<unsigned long long>((m.moved.place_ns - m.moved.create_ns) / 1000000),
            static_cast<unsigned long long>(m.moved.access_ns / 1000000),
            static_cast<unsigned long long>(m.moved.sync_ns / 1000000),
            static_cast<unsigned long long>((now_ns() - first) / 1000000));
    if (m.moved.left_on_host != 0)
        log_debug(
            "%llu bytes stay in host memory (%llu swapped-out bytes moved there): no "
            "room on GPU %u",
            static_cast<unsigned long long>(m.moved.left_on_host),
            static_cast<unsigned long long>(m.moved.out_to_host), i);
    return m.moved.left_on_host;
}

// One round of migration of GPU `index`'s managed memory to `location`, on
// the library's stream, with the GPU's context current (a callback of
// contexts::with_device_context).
struct Round {
    uint32_t index;
    CUmemLocation location;
    uint64_t budget;          // bytes at most
    uint64_t newer_than = 0;  // only allocations after this one
    uint64_t keep = 0;        // eviction: leave the newest allocations up to this
    uint64_t bytes = 0;
    uint64_t max_seq = 0;
    bool ok = false;
};

void migrate(void* arg)
{
    auto* r = static_cast<Round*>(arg);
    GpuState& g = g_gpus[r->index];
    contexts::relax_capture_mode();
    auto prefetch = NVS_REAL(cuMemPrefetchAsync_v2);
    if (prefetch == nullptr || stream_of(g) == nullptr)
        return;
    alloc::Range* ranges = scratch();
    if (ranges == nullptr)
        return;
    const size_t n = alloc::managed_ranges(r->index, ranges, kMaxRanges);
    uint64_t kept = 0;
    for (size_t i = 0; i < n && r->bytes < r->budget; ++i) {
        if (ranges[i].seq <= r->newer_than)
            break;  // newest first: the rest is older
        uint64_t ptr = ranges[i].ptr, size = ranges[i].size;
        if (kept < r->keep) {
            // All of it, or its head in whole large pages.
            const uint64_t room = r->keep - kept;
            const uint64_t k = size <= room ? size : room & ~(kKeepAlign - 1);
            kept += k;
            if (k == size)
                continue;
            ptr += k;
            size -= k;
        }
        if (prefetch(ptr, size, r->location, 0, g.stream) == CUDA_SUCCESS)
            r->bytes += size;
        if (ranges[i].seq > r->max_seq)
            r->max_seq = ranges[i].seq;
    }
    r->ok = true;
}

bool stream_done(void* stream)
{
    auto query = NVS_REAL(cuStreamQuery);
    return query == nullptr || query(static_cast<CUstream>(stream)) != CUDA_ERROR_NOT_READY;
}

}  // namespace

bool on_grant(uint64_t gpus, bool oversubscribed, bool exclusive)
{
    bool restoring = false;
    for (uint32_t i = 0; i < devices::count(); ++i) {
        GpuState& g = g_gpus[i];
        if ((gpus >> i & 1) == 0)
            continue;
        // Always, before the program's work runs: its swappable memory must
        // be there (also inside a capture: the engine's stream is its own).
        // Sharing a GPU that is not oversubscribed, room that is missing is
        // not coming before a later grant. On an oversubscribed one (a group
        // turn) nvshared asks those who wait to give it back, as when we
        // hold it alone; a newcomer that let go at every step of its growth
        // there would swap all of its data out and in per step.
        const bool alone_or_given_room = exclusive || oversubscribed;
        swappable::set_shared_hold(i, !alone_or_given_room);
        g_room_gave_up[i].store(false, std::memory_order_relaxed);
        engine_swap_in(i, alone_or_given_room ? tuning::kRoomWaitNs : tuning::kSharedRoomWaitNs);
        if (g.in_flight)
            continue;
        if (config().prefetch == Policy::Off || contexts::active_captures() > 0)
            continue;  // never add work while the program captures a graph
        // Where everything fits and nothing of ours was evicted, data already
        // migrated is still on the GPU: only what is new is worth moving.
        const bool all = wanted(config().prefetch, oversubscribed || g.data_on_host);
        const bool evicted = g.data_on_host;
        Round r{i, {}, devices::capacity(i)};
        r.newer_than = all ? 0 : g.migrated_seq;
        r.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        r.location.id = devices::at(i).ordinal;
        const uint64_t start = now_ns();
        if (!contexts::with_device_context(devices::at(i).ordinal, migrate, &r) || !r.ok)
            continue;
        g.data_on_host = false;
        g.restoring = evicted ? g.evicted : 0;
        if (r.max_seq > g.migrated_seq)
            g.migrated_seq = r.max_seq;
        if (r.bytes == 0)
            continue;
        g.in_flight = true;
        restoring |= evicted;
        g.started_ns = start;
        g.bytes = r.bytes;
        log_debug("prefetching %llu bytes to GPU %u", static_cast<unsigned long long>(r.bytes), i);
    }
    return restoring;
}

bool busy()
{
    for (uint32_t i = 0; i < devices::count(); ++i)
        if (g_gpus[i].in_flight)
            return true;
    return false;
}

bool poll()
{
    bool changed = false;
    for (uint32_t i = 0; i < devices::count(); ++i) {
        GpuState& g = g_gpus[i];
        if (!g.in_flight || !stream_done(g.stream))
            continue;
        g.in_flight = false;
        const uint64_t took = now_ns() - g.started_ns;
        // Only a swap-in of evicted data measures a transfer: new memory is
        // merely populated, and what was kept is there already.
        g.swap_in_rate.add(g.restoring, took);
        g.restoring = 0;
        g.stats.bytes_prefetched += g.bytes;
        g.stats.swap_ins++;
        g.stats.swap_in_ns += took;
        g.stats.dirty = changed = true;
    }
    return changed;
}

void now_exclusive(uint64_t gpus)
{
    for (uint32_t i = 0; i < devices::count(); ++i)
        if ((gpus >> i & 1) != 0)
            swappable::set_shared_hold(i, false);
}

namespace {

// Whether all this process's memory on GPU `i` is the swap engine's: then
// its swap-out may follow the release, overlapping the next holder's swap-in
// (managed memory must leave before, or the next holder's faults race it).
bool moves_only_swappable(uint32_t i)
{
    return devices::at(i).managed.load(std::memory_order_relaxed) <=
           static_cast<int64_t>(swappable::total_bytes(i));
}

}  // namespace

bool swaps_out_after_release(uint64_t gpus, bool oversubscribed)
{
    if (!wanted(config().evict, oversubscribed) || contexts::active_captures() > 0)
        return false;
    for (uint32_t i = 0; i < devices::count(); ++i)
        if ((gpus >> i & 1) != 0 && !moves_only_swappable(i))
            return false;
    return true;
}

void before_release(uint64_t gpus, bool oversubscribed, uint64_t keep_bytes, uint64_t deadline_ns)
{
    for (uint32_t i = 0; i < devices::count(); ++i) {
        GpuState& g = g_gpus[i];
        if ((gpus >> i & 1) == 0)
            continue;
        if (!wanted(config().evict, oversubscribed) || contexts::active_captures() > 0) {
            swappable::let_go(i);
            continue;
        }
        const swap_plan::Kept kept = kept_on(i, keep_bytes);
        uint64_t keep = kept.total;
        // The swap engine's memory first: it moves at the bus's speed.
        EngineMove e{i, false, kept.engine, {}};
        if (contexts::with_device_context(devices::at(i).ordinal, engine_move, &e) && e.ran) {
            note_engine_move(g, e.moved, false);
            if (e.moved.bytes != 0) {
                log_debug(
                    "swapped out %llu bytes from GPU %u in %llu ms (host memory made "
                    "meanwhile: %s; %llu ms of the swap-out making it)",
                    static_cast<unsigned long long>(e.moved.bytes), i,
                    static_cast<unsigned long long>(e.moved.ns / 1000000),
                    host_memory::take_made().text,
                    static_cast<unsigned long long>(e.moved.making_ns / 1000000));
            }
        } else {
            swappable::let_go(i);
        }
        // What stays of it counts against what may stay of managed memory.
        const uint64_t stayed = swappable::device_bytes(i);
        keep = keep > stayed ? keep - stayed : 0;
        Round r{i, {}, UINT64_MAX};
        r.keep = keep;
        r.location.type = CU_MEM_LOCATION_TYPE_HOST;
        r.location.id = 0;
        const uint64_t start = now_ns();
        if (!contexts::with_device_context(devices::at(i).ordinal, migrate, &r) || !r.ok)
            continue;
        // Wait here: the point is that the GPU is free when we say Released.
        // Bounded by the grace period; the rest completes on its own.
        const timespec pause{0, 200000};
        while (!stream_done(g.stream) && now_ns() < deadline_ns)
            nanosleep(&pause, nullptr);
        poll();  // a swap-in still running on the stream has ended too
        g.data_on_host = true;
        g.evicted = r.bytes;
        if (r.bytes == 0)
            continue;
        const uint64_t took = now_ns() - start;
        if (stream_done(g.stream))
            g.evict_rate.add(r.bytes, took);
        g.stats.bytes_evicted += r.bytes;
        g.stats.swap_outs++;
        g.stats.swap_out_ns += took;
        g.stats.dirty = true;
        log_debug("evicted %llu bytes from GPU %u", static_cast<unsigned long long>(r.bytes), i);
    }
}

namespace {

struct Prestage {
    uint32_t index;
    uint64_t keep;
    swappable::MakeOrder order;
    bool more = false;
};

void prestage_step(void* arg)
{
    auto* p = static_cast<Prestage*>(arg);
    const uint64_t chunk = swap_plan::max_chunk_for(devices::at(p->index).physical_memory);
    p->more = swappable::prestage(p->index, p->keep, tuning::kPrestageChunks * chunk, p->order);
}

// One step of host memory for the first GPU of `gpus` that needs one; the
// swap engine keeps keep_of(gpu) bytes there.
template <typename KeepOf>
bool prestage_each(uint64_t gpus, swappable::MakeOrder order, KeepOf keep_of)
{
    if (config().evict == Policy::Off || contexts::active_captures() > 0)
        return false;
    for (uint32_t i = 0; i < devices::count(); ++i) {
        if ((gpus >> i & 1) == 0 || swappable::total_bytes(i) == 0)
            continue;
        Prestage p{i, kept_on(i, keep_of(i)).engine, order};
        if (contexts::with_device_context(devices::at(i).ordinal, prestage_step, &p) && p.more)
            return true;
    }
    return false;
}

}  // namespace

// After a Shrink and while waiting, the next swap-outs are Shrink rounds,
// each moving the oldest of what is left; at a release one swap-out moves
// all, newest first.
bool prestage(uint64_t gpus, uint64_t keep_bytes)
{
    return prestage_each(gpus, swappable::MakeOrder::LeavingFirst,
                         [keep_bytes](uint32_t) { return keep_bytes; });
}

bool prestage_for_switch(uint64_t gpus, uint64_t keep_bytes)
{
    return prestage_each(gpus, swappable::MakeOrder::CopiedFirst,
                         [keep_bytes](uint32_t i) { return keep_beside_as_big(i, keep_bytes); });
}

bool prestage_ahead(uint64_t gpus, uint64_t bytes)
{
    return prestage_each(gpus, swappable::MakeOrder::LeavingFirst, [bytes](uint32_t i) {
        const uint64_t on_device = swappable::device_bytes(i);
        return on_device > bytes ? on_device - bytes : 0;
    });
}

uint64_t stranded()
{
    uint64_t most = 0;
    for (uint32_t i = 0; i < devices::count(); ++i) {
        const uint64_t b = swappable::stranded_bytes(i);
        most = b > most ? b : most;
    }
    return most;
}

namespace {

// The device memory free beyond the driver's reserve
// (swap_plan::driver_reserve) on the current context's GPU, as the driver
// counts it (contexts and the driver's own memory included); false if the
// driver does not say.
bool usable_free(uint64_t* usable)
{
    auto get = NVS_REAL(cuMemGetInfo_v2);
    size_t free = 0, total = 0;
    if (get == nullptr || get(&free, &total) != CUDA_SUCCESS)
        return false;
    const uint64_t reserve = swap_plan::driver_reserve(total);
    *usable = free > reserve ? free - reserve : 0;
    return true;
}

struct Room {
    bool some = false;
};

void ask_room(void* arg)
{
    uint64_t usable = 0;
    static_cast<Room*>(arg)->some = usable_free(&usable) && usable >= tuning::kPromoteRoom;
}

}  // namespace

bool room_for_stranded()
{
    for (uint32_t i = 0; i < devices::count(); ++i) {
        Room r;
        if (swappable::stranded_bytes(i) != 0 &&
            contexts::with_device_context(devices::at(i).ordinal, ask_room, &r) && r.some)
            return true;
    }
    return false;
}

namespace {

struct Short {
    uint32_t gpu;
    uint64_t bytes = 0;
};

void measure_short(void* arg)
{
    auto* s = static_cast<Short*>(arg);
    uint64_t usable = 0;
    if (!usable_free(&usable))
        return;
    const uint64_t all = swappable::total_bytes(s->gpu), there = swappable::device_bytes(s->gpu);
    const uint64_t off = all > there ? all - there : 0;
    s->bytes = off > usable ? off - usable : 0;
}

}  // namespace

uint64_t room_short(uint32_t i)
{
    Short s{i};
    contexts::with_device_context(devices::at(i).ordinal, measure_short, &s);
    return s.bytes;
}

bool room_will_come(uint32_t i, uint64_t bytes)
{
    return !g_room_gave_up[i].load(std::memory_order_relaxed) && engine_budget(i) >= bytes;
}

void await_room(uint64_t gpus)
{
    for (uint32_t i = 0; i < devices::count(); ++i)
        if ((gpus >> i & 1) != 0 && engine_swap_in(i, tuning::kAwaitRoomNs) != 0)
            g_room_gave_up[i].store(true, std::memory_order_relaxed);
}

void promote()
{
    for (uint32_t i = 0; i < devices::count(); ++i)
        if (swappable::stranded_bytes(i) != 0)
            engine_swap_in(i, 0);
}

void fail_open()
{
    for (uint32_t i = 0; i < devices::count(); ++i) {
        swappable::set_shared_hold(i, false);  // no grant is coming: memory now
        engine_swap_in(i, 0);
    }
}

Stats& stats(uint32_t gpu)
{
    return g_gpus[gpu].stats;
}

namespace {

// A rate this process has not measured yet: the one earlier processes
// measured on the GPU, else the one assumed.
double or_assumed(double known, double assumed)
{
    return known > 0 ? known : assumed;
}

}  // namespace

void set_known_rates(uint32_t gpu, const Rates& r)
{
    if (gpu < devices::kMaxGpus)
        g_gpus[gpu].known = r;
}

uint64_t rates_version(uint32_t gpu)
{
    const GpuState& g = g_gpus[gpu];
    return g.engine_out_rate.samples() + g.engine_in_rate.samples() + g.evict_rate.samples() +
           g.swap_in_rate.samples() + host_memory::pin_rate_samples();
}

Rates measured_rates(uint32_t gpu)
{
    const GpuState& g = g_gpus[gpu];
    // As for our own estimates, one move alone (a first mapping, memory
    // still being freed) sets no rate for others.
    const auto of = [](const swap_plan::RateEstimate& e) {
        return e.samples() >= 2 ? e.get(0) : 0;
    };
    return {of(g.engine_out_rate), of(g.engine_in_rate), of(g.evict_rate), of(g.swap_in_rate),
            host_memory::pin_rate_samples() >= 2 ? host_memory::pin_rate(0) : 0};
}

namespace {

// The host's pinning rate, as this process or (on any of its GPUs) earlier
// ones measured it.
double host_pin_rate()
{
    double known_pin = 0;
    for (uint32_t i = 0; i < devices::count() && known_pin == 0; ++i)
        known_pin = g_gpus[i].known.host_pin;
    return host_memory::pin_rate(or_assumed(known_pin, tuning::kAssumedPinRate));
}

}  // namespace

uint64_t switch_making_ns(uint64_t keep_bytes)
{
    uint64_t most = 0;
    for (uint32_t i = 0; i < devices::count(); ++i) {
        const uint64_t b = swappable::unstaged_bytes(i, keep_beside_as_big(i, keep_bytes));
        most = b > most ? b : most;
    }
    return static_cast<uint64_t>(static_cast<double>(most) / host_pin_rate() * 1e9);
}

uint64_t switch_share_ns(bool oversubscribed, uint64_t keep_bytes, uint64_t* pinning_ns)
{
    if (pinning_ns != nullptr)
        *pinning_ns = 0;
    if (!wanted(config().evict, oversubscribed))
        return 0;  // nothing moves when we let go
    swap::GpuShare gpus[devices::kMaxGpus];
    const uint32_t count = devices::count();
    const double pin_rate = host_pin_rate();
    for (uint32_t i = 0; i < count; ++i) {
        const GpuState& g = g_gpus[i];
        const swap_plan::Kept kept = kept_on(i, keep_bytes);
        swap::GpuShare& s = gpus[i];
        s.managed = devices::at(i).managed.load(std::memory_order_relaxed);
        s.engine = swappable::device_bytes(i);
        s.engine_total = swappable::total_bytes(i);
        s.keep = kept.total;
        s.engine_kept = kept.engine;
        s.unstaged = swappable::unstaged_bytes(i, kept.engine);
        s.evict_rate = g.evict_rate.get(or_assumed(g.known.evict, tuning::kAssumedEvictRate));
        s.swap_in_rate =
            g.swap_in_rate.get(or_assumed(g.known.prefetch, tuning::kAssumedSwapInRate));
        s.engine_out_rate =
            g.engine_out_rate.get(or_assumed(g.known.engine_out, tuning::kAssumedSwapEngineRate));
        s.engine_in_rate =
            g.engine_in_rate.get(or_assumed(g.known.engine_in, tuning::kAssumedSwapEngineRate));
        s.pin_rate = pin_rate;
    }
    return swap::switch_share_ns(gpus, count, pinning_ns);
}

void reset_after_fork()
{
    // The parent's streams and statistics are not the child's.
    for (GpuState& g : g_gpus)
        g = GpuState{};
    for (std::atomic<bool>& gave_up : g_room_gave_up)
        gave_up.store(false, std::memory_order_relaxed);
}

}  // namespace nvshare::preload::residency
