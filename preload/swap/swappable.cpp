#include "preload/swap/swappable.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "preload/clock.h"
#include "preload/driver/hook_table.h"
#include "preload/log.h"
#include "preload/memory/contexts.h"
#include "preload/memory/devices.h"
#include "preload/swap/host_memory.h"
#include "preload/swap/small_blocks.h"
#include "preload/swap/swap_plan.h"

namespace nvshare::preload::swappable {

namespace {

enum class Where : uint8_t { Device, Out, Host, Absent };

struct Chunk {
    CUmemGenericAllocationHandle device;  // while Device
    CUmemGenericAllocationHandle host;    // once made, for the allocation's life
    void* out;                            // likewise: where its data goes when swapped out
    Where where;
    bool moving;    // chosen by the swap-out in progress
    uint8_t group;  // of that swap-out's copies
};

struct Record {
    uint64_t id;  // unique for the process's life: a record found again is the same
    CUdeviceptr ptr;
    CUdeviceptr staging;  // where the host chunks stay mapped; 0 until needed
    uint64_t bytes;       // asked for
    uint64_t map_bytes;   // of this record's own mmap
    swap_plan::Layout layout;
    uint32_t gpu;
    CUdevice ordinal;
    CUcontext context;  // current at the allocation, as the driver records it
    bool is_slab;       // of small blocks (g_small[gpu]), its slab number:
    uint32_t slab;
    Chunk chunks[1];  // layout.count of them
};

// The allocations, oldest first (appended; a free closes the gap).
Record** g_records = nullptr;
// The same records by address (the second half of g_records' mapping).
Record** g_by_address = nullptr;
size_t g_count = 0;
// Freed while a stream capture ran (no synchronisation allowed), in the
// order freed: still mapped (a block: still taken) until the work queued
// before them has ended. `block` 0: the whole record, out of the lists; else
// a block of the slab `record`, still listed.
struct Deferred {
    Record* record;
    CUdeviceptr block;
};
constexpr size_t kMaxDeferred = 64;
Deferred g_deferred[kMaxDeferred];
size_t g_deferred_count = 0;
size_t g_capacity = 0;
uint64_t g_next_id = 1;
pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
// Per GPU: the books of its slabs of small allocations (small_blocks.h).
small_blocks::Pool g_small[devices::kMaxGpus];
// Per GPU: the process holds it (allocations get device memory at once).
bool g_resident[devices::kMaxGpus];
std::atomic<bool> g_shared_hold[devices::kMaxGpus];
// Chunks with nothing mapped (Absent, Out): absent_at() has nothing to look
// for while 0.
std::atomic<uint64_t> g_absent{0};
// hold_moves() to release_moves(): the client thread moves memory.
bool g_moves_held = false;
// The driver answered with an error that ends the process's CUDA (a sticky
// one, e.g. an illegal address): every later launch fails anyway.
bool g_sticky = false;
// Per GPU, bytes of swappable memory in all and on the device.
std::atomic<uint64_t> g_total[devices::kMaxGpus];
std::atomic<uint64_t> g_device[devices::kMaxGpus];
// Per GPU, bytes of chunks whose data is in host memory (Host).
std::atomic<uint64_t> g_host[devices::kMaxGpus];
// Per GPU, the stream of a swap-in round whose copies were not waited for
// (the next round maps more chunks meanwhile); nullptr when none. A chunk
// freed before they end waits for them: its memory is still their target.
CUstream g_unsynced[devices::kMaxGpus];

// Copies are grouped for the swap-out's pipeline: the chunks of a group are
// remapped as soon as the group's copies are done, while later groups copy.
constexpr size_t kGroups = 32;
constexpr uint64_t kMinGroupBytes = 64ull << 20;  // small: room shows chunk by chunk
constexpr uint8_t kNoGroup = 0xff;                // a chunk whose copy is not queued yet
// A swap-in grants access to consecutive chunks in one call, up to this
// many and this many bytes (runs of small chunks).
constexpr uint32_t kAccessRun = 8;
constexpr uint64_t kAccessRunBytes = 512ull << 20;
CUevent g_events[devices::kMaxGpus][kGroups];
// Per GPU, the CUDA ordinals of the peers that may reach its chunks (besides
// the GPU itself), and how many enables each pair has had less its
// disables. Under g_mutex.
constexpr uint32_t kMaxPeers = 64;
uint64_t g_peers[devices::kMaxGpus];
uint32_t g_peer_enables[devices::kMaxGpus][kMaxPeers];

class Lock {
public:
    Lock() { pthread_mutex_lock(&g_mutex); }
    ~Lock() { pthread_mutex_unlock(&g_mutex); }
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;
};

void* map_pages(size_t bytes)
{
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
}

bool append(Record* r)
{
    if (g_count == g_capacity) {
        const size_t n = g_capacity == 0 ? 256 : g_capacity * 2;
        auto** fresh = static_cast<Record**>(map_pages(2 * n * sizeof(Record*)));
        if (fresh == nullptr)
            return false;
        if (g_records != nullptr) {
            memcpy(fresh, g_records, g_count * sizeof(Record*));
            memcpy(fresh + n, g_by_address, g_count * sizeof(Record*));
            munmap(g_records, 2 * g_capacity * sizeof(Record*));
        }
        g_records = fresh;
        g_by_address = fresh + n;
        g_capacity = n;
    }
    g_records[g_count] = r;
    size_t at = g_count;  // reservations never overlap: the first above r
    for (size_t lo = 0, hi = g_count; lo < hi;) {
        const size_t mid = (lo + hi) / 2;
        if (g_by_address[mid]->ptr > r->ptr)
            at = hi = mid;
        else
            lo = mid + 1;
    }
    memmove(g_by_address + at + 1, g_by_address + at, (g_count - at) * sizeof(Record*));
    g_by_address[at] = r;
    g_count++;
    return true;
}

// Position in g_by_address of the last record that starts at or below
// `ptr`, or -1.
long last_at_or_below(CUdeviceptr ptr)
{
    long found = -1;
    for (size_t lo = 0, hi = g_count; lo < hi;) {
        const size_t mid = (lo + hi) / 2;
        if (g_by_address[mid]->ptr <= ptr) {
            found = static_cast<long>(mid);
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return found;
}

// The record whose reservation holds `ptr`, or nullptr: a binary search, so
// that pointer queries cost the same however many allocations there are.
Record* find_containing(CUdeviceptr ptr)
{
    const long at = last_at_or_below(ptr);
    if (at < 0)
        return nullptr;
    Record* r = g_by_address[at];
    return ptr - r->ptr < r->layout.reserved ? r : nullptr;
}

// Takes r out of both lists (the caller destroys or defers it).
void remove(Record* r)
{
    const long at = last_at_or_below(r->ptr);
    const auto a = static_cast<size_t>(at);
    memmove(g_by_address + a, g_by_address + a + 1, (g_count - a - 1) * sizeof(Record*));
    size_t i = 0;
    while (g_records[i] != r)
        ++i;
    memmove(g_records + i, g_records + i + 1, (g_count - i - 1) * sizeof(Record*));
    g_count--;
}

CUmemAllocationProp prop_for(CUmemLocationType type, int id)
{
    CUmemAllocationProp p{};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = type;
    p.location.id = id;
    return p;
}

CUmemAccessDesc access_for(CUdevice device, CUmemAccess_flags flags)
{
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device;
    access.flags = flags;
    return access;
}

// Read-write access for the record's GPU and its peers (set_peer) to
// [va, va + size), which may span several mappings: the driver's answer.
// The one place that grants access to the chunks' addresses. With the lock
// held.
CUresult allow_access(const Record& r, CUdeviceptr va, uint64_t size)
{
    auto set_access = NVS_REAL(cuMemSetAccess);
    CUmemAccessDesc access[1 + kMaxPeers];
    size_t n = 0;
    access[n++] = access_for(r.ordinal, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    for (uint32_t peer = 0; peer < kMaxPeers; ++peer)
        if ((g_peers[r.gpu] >> peer & 1) != 0 && static_cast<CUdevice>(peer) != r.ordinal)
            access[n++] =
                access_for(static_cast<CUdevice>(peer), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    return set_access != nullptr ? set_access(va, size, access, n) : CUDA_ERROR_NOT_SUPPORTED;
}

bool unmap_at(CUdeviceptr va, uint64_t size)
{
    auto unmap = NVS_REAL(cuMemUnmap);
    return unmap != nullptr && unmap(va, size) == CUDA_SUCCESS;
}

// Maps `handle` at `va`, with read-write access for the record's GPU unless
// the caller grants it later for a longer range (`access` false). False
// (nothing mapped) if cuMemMap or cuMemSetAccess fails, with the driver's
// answer in *failure where given.
bool map_at(const Record& r, CUdeviceptr va, uint64_t size, CUmemGenericAllocationHandle handle,
            bool access = true, CUresult* failure = nullptr)
{
    auto map = NVS_REAL(cuMemMap);
    CUresult e = map != nullptr ? map(va, size, 0, handle, 0) : CUDA_ERROR_NOT_SUPPORTED;
    if (e == CUDA_SUCCESS && access) {
        e = allow_access(r, va, size);
        if (e != CUDA_SUCCESS)
            unmap_at(va, size);
    }
    if (failure != nullptr)
        *failure = e;
    return e == CUDA_SUCCESS;
}

void release_handle(CUmemGenericAllocationHandle h)
{
    if (auto release = NVS_REAL(cuMemRelease); release != nullptr && h != 0)
        release(h);
}

CUresult create_on(const Record& r, CUmemLocationType type, uint64_t size,
                   CUmemGenericAllocationHandle* out)
{
    auto create = NVS_REAL(cuMemCreate);
    if (create == nullptr)
        return CUDA_ERROR_NOT_FOUND;
    const CUmemAllocationProp prop =
        prop_for(type, type == CU_MEM_LOCATION_TYPE_DEVICE ? r.ordinal : 0);
    const CUresult e = create(out, size, &prop, 0);
    g_sticky |= contexts::is_sticky(e);
    return e;
}

void count_host(const Record& r, uint64_t size, bool added)
{
    if (added)
        g_host[r.gpu].fetch_add(size, std::memory_order_relaxed);
    else
        g_host[r.gpu].fetch_sub(size, std::memory_order_relaxed);
}

void count_device(const Record& r, uint64_t size, bool added)
{
    if (added)
        g_device[r.gpu].fetch_add(size, std::memory_order_relaxed);
    else
        g_device[r.gpu].fetch_sub(size, std::memory_order_relaxed);
}

// Whether the device keeps the driver's room with `size` more bytes taken
// (swap_plan::leaves_driver_reserve). Asked of the current context where it
// is the chunk's GPU's (the swap engine's moves, the allocating thread);
// elsewhere the driver's own answer to cuMemCreate stands.
bool keeps_driver_room(const Record& r, uint64_t size)
{
    auto get = NVS_REAL(cuMemGetInfo_v2);
    size_t free = 0, total = 0;
    if (get == nullptr || contexts::current_device() != r.ordinal ||
        get(&free, &total) != CUDA_SUCCESS)
        return true;
    return swap_plan::leaves_driver_reserve(size, free, total);
}

// Device memory for chunk i at its address (no data moves). False (chunk
// unchanged) if the device has none to give, counting the driver's room as
// taken (a failure of CUDA_ERROR_OUT_OF_MEMORY then), or if cuMemCreate,
// cuMemMap or cuMemSetAccess fails (their answer). With `access` false the GPU
// may not reach it yet: the caller grants access (allow_access) or takes
// the chunk back (leave_device) before anything uses it.
bool place_on_device(Record& r, uint32_t i, uint64_t* create_ns = nullptr, bool access = true,
                     CUresult* failure = nullptr)
{
    Chunk& c = r.chunks[i];
    const uint64_t size = r.layout.size_of(i), va = r.ptr + r.layout.offset_of(i);
    CUmemGenericAllocationHandle h = 0;
    const uint64_t creating = create_ns != nullptr ? now_ns() : 0;
    const CUresult created = keeps_driver_room(r, size)
                                 ? create_on(r, CU_MEM_LOCATION_TYPE_DEVICE, size, &h)
                                 : CUDA_ERROR_OUT_OF_MEMORY;
    if (create_ns != nullptr)
        *create_ns += now_ns() - creating;
    if (failure != nullptr)
        *failure = created;
    if (created != CUDA_SUCCESS)
        return false;
    if (c.where == Where::Host && !unmap_at(va, size)) {
        release_handle(h);
        return false;
    }
    if (!map_at(r, va, size, h, access || c.where == Where::Host, failure)) {
        release_handle(h);
        if (c.where == Where::Host && !map_at(r, va, size, c.host))
            log_warn("cannot map a swapped-out chunk back at %#llx: GPU work on it will fail",
                     static_cast<unsigned long long>(va));
        return false;
    }
    if (c.where == Where::Host)
        count_host(r, size, false);
    else
        g_absent.fetch_sub(1, std::memory_order_relaxed);
    c.device = h;
    c.where = Where::Device;
    count_device(r, size, true);
    return true;
}

// The chunk's host memory, made once and mapped at the staging address;
// made only within the host's budget (host_memory::may_pin).
bool ensure_host(Record& r, uint32_t i)
{
    Chunk& c = r.chunks[i];
    if (c.host != 0)
        return true;
    if (!host_memory::may_pin(r.layout.size_of(i)))
        return false;
    if (r.staging == 0) {
        auto reserve = NVS_REAL(cuMemAddressReserve);
        CUdeviceptr va = 0;
        if (reserve == nullptr || reserve(&va, r.layout.reserved, 0, 0, 0) != CUDA_SUCCESS)
            return false;
        r.staging = va;
    }
    const uint64_t size = r.layout.size_of(i);
    CUmemGenericAllocationHandle h = 0;
    if (create_on(r, CU_MEM_LOCATION_TYPE_HOST, size, &h) != CUDA_SUCCESS)
        return false;
    if (!map_at(r, r.staging + r.layout.offset_of(i), size, h)) {
        release_handle(h);
        return false;
    }
    c.host = h;
    return true;
}

// Chunk i, Absent or Out, gets its host-located VMM memory at its address
// (the device is full while we hold the GPU).
bool place_on_host(Record& r, uint32_t i)
{
    Chunk& c = r.chunks[i];
    if (!ensure_host(r, i) ||
        !map_at(r, r.ptr + r.layout.offset_of(i), r.layout.size_of(i), c.host))
        return false;
    c.where = Where::Host;
    g_absent.fetch_sub(1, std::memory_order_relaxed);
    count_host(r, r.layout.size_of(i), true);
    return true;
}

// A placement at a grant (swap-in, the gate's open) that the driver refused
// with an error other than a full device: the chunk goes on as one that
// found the device full (a later placement, else host memory), since the
// allocation that made it waits for the grant with nothing to answer; the
// error is named here.
void warn_refused(const Record& r, uint32_t i, CUresult failure)
{
    if (failure == CUDA_SUCCESS || failure == CUDA_ERROR_OUT_OF_MEMORY)
        return;
    log_warn(
        "GPU %d refused memory for %llu bytes at %#llx (CUDA error %d): placed as on a "
        "full GPU",
        r.ordinal, static_cast<unsigned long long>(r.layout.size_of(i)),
        static_cast<unsigned long long>(r.ptr + r.layout.offset_of(i)), static_cast<int>(failure));
}

// Chunk i gives its device memory back and leaves its address unmapped
// until it comes back: Out once its data is copied to its host memory, or
// `to` (Absent or Out) where a swap-in takes back a chunk it placed, the
// data untouched. False (still Device) on failure.
bool leave_device(Record& r, uint32_t i, Where to = Where::Out)
{
    Chunk& c = r.chunks[i];
    const uint64_t size = r.layout.size_of(i);
    if (!unmap_at(r.ptr + r.layout.offset_of(i), size))
        return false;
    release_handle(c.device);
    c.device = 0;
    c.where = to;
    g_absent.fetch_add(1, std::memory_order_relaxed);
    count_device(r, size, false);
    return true;
}

void destroy(Record* r)
{
    auto free_address = NVS_REAL(cuMemAddressFree);
    for (uint32_t i = 0; i < r->layout.count; ++i) {
        Chunk& c = r->chunks[i];
        const uint64_t size = r->layout.size_of(i), off = r->layout.offset_of(i);
        if (c.where == Where::Device || c.where == Where::Host)
            unmap_at(r->ptr + off, size);
        if (c.where == Where::Device)
            count_device(*r, size, false);
        if (c.where == Where::Host)
            count_host(*r, size, false);
        if (c.where == Where::Absent || c.where == Where::Out)
            g_absent.fetch_sub(1, std::memory_order_relaxed);
        if (c.host != 0)
            unmap_at(r->staging + off, size);
        release_handle(c.device);
        release_handle(c.host);
        host_memory::release(c.out, size);
    }
    if (free_address != nullptr) {
        free_address(r->ptr, r->layout.reserved);
        if (r->staging != 0)
            free_address(r->staging, r->layout.reserved);
    }
    g_total[r->gpu].fetch_sub(r->layout.reserved, std::memory_order_relaxed);
    if (r->is_slab)  // counted while it lived (allocate_small)
        devices::add_usage(r->gpu, devices::Kind::Managed,
                           -static_cast<int64_t>(r->layout.reserved));
    munmap(r, r->map_bytes);
}

bool stream_copy(CUdeviceptr dst, CUdeviceptr src, uint64_t size, CUstream stream)
{
    auto copy = NVS_REAL(cuMemcpyAsync);
    return copy != nullptr && copy(dst, src, size, stream) == CUDA_SUCCESS;
}

CUresult stream_wait(CUstream stream)
{
    auto sync = NVS_REAL(cuStreamSynchronize);
    return sync != nullptr ? sync(stream) : CUDA_ERROR_NOT_SUPPORTED;
}

bool stream_sync(CUstream stream)
{
    return stream_wait(stream) == CUDA_SUCCESS;
}

// Waits for the copies of a swap-in round on GPU `gpu` not waited for yet.
// With the lock held.
bool wait_unsynced(uint32_t gpu)
{
    CUstream stream = g_unsynced[gpu];
    g_unsynced[gpu] = nullptr;
    return stream == nullptr || stream_sync(stream);
}

CUevent group_event(uint32_t gpu, size_t group)
{
    CUevent& e = g_events[gpu][group];
    auto create = NVS_REAL(cuEventCreate);
    if (e == nullptr && create != nullptr &&
        create(&e, CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC) != CUDA_SUCCESS)
        e = nullptr;
    return e;
}

// Calls f(record, chunk index) for every chunk of GPU `gpu`, newest
// allocation first (what stays on the GPU longest), until f returns false.
template <typename F>
void for_each_chunk(uint32_t gpu, F&& f)
{
    for (size_t k = g_count; k-- > 0;) {
        Record& r = *g_records[k];
        if (r.gpu != gpu)
            continue;
        for (uint32_t i = 0; i < r.layout.count; ++i)
            if (!f(r, i))
                return;
    }
}

// The same for the chunks marked moving.
template <typename F>
void for_each_moving(uint32_t gpu, F&& f)
{
    for_each_chunk(gpu, [&](Record& r, uint32_t i) {
        if (r.chunks[i].moving)
            f(r, i);
        return true;
    });
}

// Whether chunk i of r leaves the GPU in a swap-out that keeps `stay`: it is
// there and the newer chunks took what may stay (counted in `stay`).
bool beyond_keep(const Record& r, uint32_t i, swap_plan::Budget& stay)
{
    return r.chunks[i].where == Where::Device && !stay.take(r.layout.size_of(i));
}

// Where chunk c's data goes when it is swapped out, as a driver address.
CUdeviceptr out_address(const Chunk& c)
{
    return reinterpret_cast<CUdeviceptr>(c.out);
}

// The record `r` if it is still allocated and still the one with `id`.
Record* still_there(const Record* r, uint64_t id)
{
    for (size_t k = 0; k < g_count; ++k)
        if (g_records[k] == r && r->id == id)
            return g_records[k];
    return nullptr;
}

// A chunk whose host memory is being made (the record may be freed meanwhile).
struct Wanted {
    const Record* record;
    uint64_t id;
    uint32_t chunk;
};
// Chunks whose host memory is made at once (the more, the more threads
// fault it in).
constexpr size_t kMakeAtOnce = 64;

// Makes the host memory of `n` chunks (sizes[k] bytes each) and gives it to
// those still there without any; returns the bytes made; *failed: some got
// none. With the lock held; where `unlocked`, it is let go while the memory
// is made, so that the program's threads that allocate or free meanwhile
// are not held up (the chunks are looked up again afterwards).
uint64_t make_for(const Wanted* wanted, const uint64_t* sizes, size_t n, bool unlocked,
                  bool* failed)
{
    void* made[kMakeAtOnce];
    if (unlocked)
        pthread_mutex_unlock(&g_mutex);
    const uint64_t total = host_memory::make(sizes, made, n);
    if (unlocked)
        pthread_mutex_lock(&g_mutex);
    for (size_t k = 0; k < n; ++k) {
        Record* r = still_there(wanted[k].record, wanted[k].id);
        *failed |= made[k] == nullptr;
        if (r != nullptr && r->chunks[wanted[k].chunk].out == nullptr)
            r->chunks[wanted[k].chunk].out = made[k];
        else
            host_memory::release(made[k], sizes[k]);  // freed meanwhile
    }
    return total;
}

// Makes the host memory of the chunks of GPU `gpu` that a swap-out keeping
// `keep` would move and that have none yet, at most `max_bytes` of it, in
// batches, newest first (the order a swap-out copies in: its first copies
// then start at once while it makes the rest). Returns the bytes made;
// *more: such chunks remain beyond max_bytes; *failed: some got none. With
// the lock held (let go while making where `unlocked`, as make_for).
uint64_t make_out_memory(uint32_t gpu, uint64_t keep, uint64_t max_bytes, bool unlocked, bool* more,
                         bool* failed)
{
    Wanted wanted[kMakeAtOnce];
    uint64_t sizes[kMakeAtOnce];
    uint64_t asked = 0, total = 0;
    *more = *failed = false;
    for (bool batch_full = true; batch_full && !*more && !*failed;) {
        size_t n = 0;
        batch_full = false;
        swap_plan::Budget stay(keep);
        for_each_chunk(gpu, [&](Record& r, uint32_t i) {
            if (!beyond_keep(r, i, stay) || r.chunks[i].out != nullptr)
                return true;
            *more = asked >= max_bytes;
            batch_full = n == kMakeAtOnce;
            if (*more || batch_full)
                return false;
            wanted[n] = {&r, r.id, i};
            sizes[n] = r.layout.size_of(i);
            asked += sizes[n++];
            return true;
        });
        total += make_for(wanted, sizes, n, unlocked, failed);
    }
    return total;
}

// The same, one batch of about `max_bytes` (at least a chunk), oldest
// first: for the chunks that leave first when what may stay shrinks round
// by round (each Shrink moves the oldest of what is left). The lock is let
// go while the memory is made.
uint64_t make_leaving_first(uint32_t gpu, uint64_t keep, uint64_t max_bytes, bool* more,
                            bool* failed)
{
    swap_plan::LastFit<Wanted, kMakeAtOnce> last(max_bytes);
    swap_plan::Budget stay(keep);
    for_each_chunk(gpu, [&](Record& r, uint32_t i) {
        if (beyond_keep(r, i, stay) && r.chunks[i].out == nullptr)
            last.push({&r, r.id, i}, r.layout.size_of(i));
        return true;
    });
    Wanted wanted[kMakeAtOnce];
    uint64_t sizes[kMakeAtOnce];
    const size_t n = last.count();
    for (size_t k = 0; k < n; ++k) {  // the oldest first
        wanted[k] = last.at(n - 1 - k);
        sizes[k] = last.size_at(n - 1 - k);
    }
    *more = last.dropped();
    *failed = false;
    return make_for(wanted, sizes, n, true, failed);
}

// The host memory of chunks whose data is on the device and that a
// swap_out(gpu, keep) would keep only saves pinning it again later: while
// the host runs low on memory it goes back (three processes that each kept
// host memory for all of their data pinned more than the host had, and the
// kernel's OOM killer ended two of them). Returns the bytes given back.
// With the lock held.
uint64_t give_back_cached_host(uint32_t gpu, uint64_t keep)
{
    if (!host_memory::host_low())
        return 0;
    wait_unsynced(gpu);  // a swap-in's copies may still read from it
    swap_plan::Budget stay(keep);
    uint64_t bytes = 0;
    for_each_chunk(gpu, [&](Record& r, uint32_t i) {
        Chunk& c = r.chunks[i];
        if (c.where != Where::Device || beyond_keep(r, i, stay) || c.out == nullptr || c.moving)
            return true;
        host_memory::release(c.out, r.layout.size_of(i));
        c.out = nullptr;
        bytes += r.layout.size_of(i);
        return true;
    });
    if (bytes != 0)
        log_debug(
            "the host runs low on memory: gave back %llu MiB of host memory kept for data "
            "on GPU %d",
            static_cast<unsigned long long>(bytes >> 20), devices::at(gpu).ordinal);
    return bytes;
}

}  // namespace

CUresult allocate(CUdeviceptr* dptr, uint64_t bytes, uint32_t gpu, uint64_t* reserved,
                  Unmapped* unmapped, bool wait_for_room)
{
    *unmapped = Unmapped::None;
    const devices::Gpu& g = devices::at(gpu);
    const swap_plan::Layout layout =
        swap_plan::layout(bytes, g.swap_granularity, swap_plan::max_chunk_for(g.physical_memory));
    auto reserve = NVS_REAL(cuMemAddressReserve);
    auto free_address = NVS_REAL(cuMemAddressFree);
    if (layout.count == 0 || reserve == nullptr || free_address == nullptr)
        return CUDA_ERROR_NOT_SUPPORTED;
    const long page = sysconf(_SC_PAGESIZE);
    const uint64_t record_bytes = sizeof(Record) + (layout.count - 1) * sizeof(Chunk);
    const uint64_t map_bytes =
        (record_bytes + static_cast<uint64_t>(page) - 1) & ~(static_cast<uint64_t>(page) - 1);
    auto* r = static_cast<Record*>(map_pages(map_bytes));
    if (r == nullptr)
        return CUDA_ERROR_OUT_OF_MEMORY;
    r->bytes = bytes;
    r->map_bytes = map_bytes;
    r->layout = layout;
    r->gpu = gpu;
    r->ordinal = g.ordinal;
    if (auto current = NVS_REAL(cuCtxGetCurrent); current != nullptr)
        current(&r->context);
    if (const CUresult e = reserve(&r->ptr, layout.reserved, layout.alignment(), 0, 0);
        e != CUDA_SUCCESS) {
        munmap(r, map_bytes);
        return e;
    }
    for (uint32_t i = 0; i < layout.count; ++i)
        r->chunks[i].where = Where::Absent;
    Lock lock;
    r->id = g_next_id++;
    g_absent.fetch_add(layout.count, std::memory_order_relaxed);
    g_total[gpu].fetch_add(layout.reserved, std::memory_order_relaxed);
    // While the process holds the GPU its work may reach the memory at once:
    // what the device cannot hold goes to host memory, never to managed
    // memory, whose page faults the driver cannot serve on a GPU full of
    // memory it cannot evict (an illegal address).
    // Sharing the GPU, what is full may be the others' memory: the rest
    // waits for a grant with room (the caller lets go), pinning nothing.
    // Holding it alone, where others' memory that can move takes the room,
    // the rest waits for them to give it back (nvshared asks them once it
    // learns our size): pinning host memory meanwhile is slow, and slows
    // their pinning of the host memory they move to.
    // Memory left to wait must have host memory to go to should the room
    // not come: where the host has none left to pin, what finds no room is
    // out of memory now, not an unmapped address later.
    // An error other than a full device (e.g. a sticky one) is the
    // allocation's answer, as the driver's own cuMemAlloc gives it.
    bool ok = true;
    CUresult error = CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t on_host = 0, left_absent = 0;
    const bool shared = g_shared_hold[gpu].load(std::memory_order_relaxed);
    const bool may_wait = (shared || wait_for_room) && host_memory::may_pin(layout.reserved);
    for (uint32_t i = 0; g_resident[gpu] && i < layout.count && ok; ++i) {
        CUresult failure = CUDA_SUCCESS;
        if (on_host == 0 && left_absent == 0 && place_on_device(*r, i, nullptr, true, &failure))
            continue;
        if (failure != CUDA_SUCCESS && failure != CUDA_ERROR_OUT_OF_MEMORY) {
            error = failure;
            ok = false;
            break;
        }
        if (may_wait) {
            left_absent += layout.size_of(i);
            continue;
        }
        ok = place_on_host(*r, i);
        on_host += layout.size_of(i);
    }
    if (ok && on_host != 0)
        log_debug(
            "GPU %d is full: %llu bytes of a new allocation live in host memory until the "
            "next grant",
            r->ordinal, static_cast<unsigned long long>(on_host));
    if (ok && left_absent != 0 && shared)
        log_debug(
            "GPU %d is full while shared: %llu bytes of a new allocation wait for the next "
            "grant; letting go",
            r->ordinal, static_cast<unsigned long long>(left_absent));
    else if (ok && left_absent != 0)
        log_debug(
            "GPU %d is full: %llu bytes of a new allocation wait for the room others give "
            "back",
            r->ordinal, static_cast<unsigned long long>(left_absent));
    if (!ok || !append(r)) {
        destroy(r);
        return error;
    }
    *dptr = r->ptr;
    *reserved = layout.reserved;
    if (!g_resident[gpu])
        *unmapped = Unmapped::UntilGrant;
    else if (left_absent != 0)
        *unmapped = shared ? Unmapped::UntilSharedGrant : Unmapped::UntilRoom;
    return CUDA_SUCCESS;
}

namespace {

// Whether every chunk of `r` has memory at its address. With the lock held.
bool all_mapped(const Record& r)
{
    for (uint32_t i = 0; i < r.layout.count; ++i)
        if (r.chunks[i].where != Where::Device && r.chunks[i].where != Where::Host)
            return false;
    return true;
}

// A block of `bytes` from a slab of GPU `gpu` with room, for an allocation
// made in `context`: false if none has room. *unmapped: where the slab has
// chunks without memory, what an allocation that left them so waits out:
// the grant where the process does not hold the GPU; holding it, as
// allocate() waits for the room on a full GPU (the slab was made so, or a
// swap-in waits for room). With the lock held.
bool take_block(uint64_t bytes, uint32_t gpu, CUcontext context, CUdeviceptr* dptr,
                Unmapped* unmapped)
{
    uint64_t addr = 0;
    uint32_t slab = 0;
    if (!g_small[gpu].take(bytes, g_next_id, reinterpret_cast<uint64_t>(context), &addr, &slab))
        return false;
    g_next_id++;
    const Record* r = find_containing(addr);
    *dptr = addr;
    if (r == nullptr || all_mapped(*r))
        *unmapped = Unmapped::None;
    else if (!g_resident[gpu])
        *unmapped = Unmapped::UntilGrant;
    else
        *unmapped = g_shared_hold[gpu].load(std::memory_order_relaxed) ? Unmapped::UntilSharedGrant
                                                                       : Unmapped::UntilRoom;
    return true;
}

// Gives back the block at `block` of slab `r`: nothing is unmapped, the
// block's room is free for the next allocations; the slab goes (destroyed,
// as a freed allocation) where the books say so. The work that may use
// the block has ended (the caller waited). With the lock held.
bool give_block(Record* r, CUdeviceptr block)
{
    bool drop = false;
    if (!g_small[r->gpu].give(r->slab, block, &drop))
        return false;
    if (drop) {
        wait_unsynced(r->gpu);
        remove(r);
        destroy(r);
    }
    return true;
}

}  // namespace

CUresult allocate_small(CUdeviceptr* dptr, uint64_t bytes, uint32_t gpu, Unmapped* unmapped,
                        bool wait_for_room)
{
    *unmapped = Unmapped::None;
    const uint64_t slab_bytes = swap_plan::small_slab(devices::at(gpu).swap_granularity);
    if (slab_bytes == 0 || bytes == 0 || bytes > slab_bytes)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUcontext context = nullptr;
    if (auto current = NVS_REAL(cuCtxGetCurrent); current != nullptr)
        current(&context);
    {
        Lock lock;
        small_blocks::Pool& pool = g_small[gpu];
        if (pool.slab_bytes() != slab_bytes && !pool.set_slab_bytes(slab_bytes))
            return CUDA_ERROR_NOT_SUPPORTED;
        if (take_block(bytes, gpu, context, dptr, unmapped))
            return CUDA_SUCCESS;
    }
    // No slab has room: a new one, made as any allocation (on the device,
    // in host memory, or absent until a grant or the room).
    CUdeviceptr base = 0;
    uint64_t reserved = 0;
    Unmapped slab_unmapped = Unmapped::None;
    if (const CUresult e =
            allocate(&base, slab_bytes, gpu, &reserved, &slab_unmapped, wait_for_room);
        e != CUDA_SUCCESS)
        return e;
    Lock lock;
    Record* r = find_containing(base);
    uint32_t slab = 0;
    if (r == nullptr || r->ptr != base || reserved != slab_bytes ||
        !g_small[gpu].add_slab(base, &slab)) {
        if (r != nullptr && r->ptr == base) {
            wait_unsynced(gpu);
            remove(r);
            destroy(r);
        }
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r->is_slab = true;
    r->slab = slab;
    devices::add_usage(gpu, devices::Kind::Managed, static_cast<int64_t>(reserved));
    if (!take_block(bytes, gpu, context, dptr, unmapped))
        return CUDA_ERROR_OUT_OF_MEMORY;  // not for a slab this size
    // The new slab waits as allocate() decided, with the same facts.
    if (*unmapped != Unmapped::None && slab_unmapped != Unmapped::None)
        *unmapped = slab_unmapped;
    return CUDA_SUCCESS;
}

bool free_allocation(CUdeviceptr ptr, bool later)
{
    Lock lock;
    Record* r = find_containing(ptr);
    if (r == nullptr || (r->is_slab ? !g_small[r->gpu].live_at(r->slab, ptr) : r->ptr != ptr))
        return false;
    const bool room = g_deferred_count < kMaxDeferred;
    if (later && room) {
        // Still mapped (a block: still taken): work queued before may use it.
        if (!r->is_slab) {
            wait_unsynced(r->gpu);
            remove(r);
        }
        g_deferred[g_deferred_count++] = {r, r->is_slab ? ptr : 0};
        return true;
    }
    if (later)
        log_warn("more than %zu allocations freed during stream captures: one is unmapped now",
                 kMaxDeferred);
    if (r->is_slab)
        return give_block(r, ptr);
    wait_unsynced(r->gpu);
    remove(r);
    destroy(r);
    return true;
}

size_t deferred_frees()
{
    Lock lock;
    return g_deferred_count;
}

void finish_frees(size_t count)
{
    Lock lock;
    count = count < g_deferred_count ? count : g_deferred_count;
    for (size_t k = 0; k < count; ++k) {
        if (g_deferred[k].block != 0)
            give_block(g_deferred[k].record, g_deferred[k].block);
        else
            destroy(g_deferred[k].record);
    }
    memmove(g_deferred, g_deferred + count, (g_deferred_count - count) * sizeof(Deferred));
    g_deferred_count -= count;
}

bool describe(CUdeviceptr ptr, Described* out)
{
    Lock lock;
    const Record* found = find_containing(ptr);
    if (found == nullptr)
        return false;
    const Record& r = *found;
    if (r.is_slab) {
        small_blocks::Block b{};
        if (!g_small[r.gpu].find(r.slab, ptr, &b))
            return false;
        *out = {b.start, b.bytes, kBufferIdBase + b.id, r.ordinal,
                reinterpret_cast<CUcontext>(b.tag)};
        return true;
    }
    if (ptr - r.ptr >= r.bytes)
        return false;
    *out = {r.ptr, r.bytes, kBufferIdBase + r.id, r.ordinal, r.context};
    return true;
}

bool absent_at(CUdeviceptr ptr)
{
    if (g_absent.load(std::memory_order_relaxed) == 0)
        return false;
    Lock lock;
    const Record* found = find_containing(ptr);
    if (found == nullptr)
        return false;
    const Record& r = *found;
    const uint64_t chunk = (ptr - r.ptr) / r.layout.chunk;
    return chunk < r.layout.count &&
           (r.chunks[chunk].where == Where::Absent || r.chunks[chunk].where == Where::Out);
}

bool open_if_mapped(void (*open)())
{
    Lock lock;
    if (g_moves_held)
        return false;
    // With the process's CUDA gone, work fails in the driver, wherever its
    // memory is: held back, the program would wait for good.
    bool mapped = true;
    if (g_absent.load(std::memory_order_relaxed) != 0) {
        // Every record once, whatever its GPU.
        for (size_t k = g_count; k-- > 0;) {
            Record& r = *g_records[k];
            for (uint32_t i = 0; i < r.layout.count; ++i) {
                Chunk& c = r.chunks[i];
                CUresult failure = CUDA_SUCCESS;
                if (c.where == Where::Absent && !place_on_device(r, i, nullptr, true, &failure)) {
                    warn_refused(r, i, failure);
                    if (!place_on_host(r, i))
                        log_warn(
                            "no memory for %llu bytes at %#llx, neither on GPU %d nor on the host",
                            static_cast<unsigned long long>(r.layout.size_of(i)),
                            static_cast<unsigned long long>(r.ptr + r.layout.offset_of(i)),
                            r.ordinal);
                }
                mapped &= c.where == Where::Device || c.where == Where::Host || g_sticky;
            }
        }
    }
    if (!mapped)
        return false;
    // A swap-in round's copies still in flight (later rounds were to wait
    // for them): the work let through reads what they bring.
    for (uint32_t gpu = 0; gpu < devices::kMaxGpus; ++gpu)
        wait_unsynced(gpu);
    open();
    return true;
}

void hold_moves()
{
    Lock lock;
    g_moves_held = true;
}

void release_moves()
{
    Lock lock;
    g_moves_held = false;
}

bool set_peer(uint32_t gpu, CUdevice peer, bool enabled)
{
    if (gpu >= devices::kMaxGpus || peer < 0 || static_cast<uint32_t>(peer) >= kMaxPeers)
        return false;
    Lock lock;
    uint32_t& enables = g_peer_enables[gpu][peer];
    const uint64_t bit = 1ull << peer;
    // Only the first enable and the last disable change what is mapped.
    if (enabled ? enables++ != 0 : enables == 0 || --enables != 0)
        return true;
    auto set_access = NVS_REAL(cuMemSetAccess);
    const CUmemAccessDesc access = access_for(
        peer, enabled ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE);
    bool all = set_access != nullptr;
    // Runs of consecutive chunks mapped at their addresses, one call each.
    for (size_t k = 0; k < g_count && set_access != nullptr; ++k) {
        const Record& r = *g_records[k];
        if (r.gpu != gpu || r.ordinal == peer)
            continue;
        for (uint32_t i = 0; i < r.layout.count;) {
            const auto mapped = [&](uint32_t j) {
                return r.chunks[j].where == Where::Device || r.chunks[j].where == Where::Host;
            };
            if (!mapped(i)) {
                ++i;
                continue;
            }
            uint32_t end = i + 1;
            while (end < r.layout.count && mapped(end))
                ++end;
            const uint64_t from = r.layout.offset_of(i);
            const uint64_t to = r.layout.offset_of(end - 1) + r.layout.size_of(end - 1);
            all &= set_access(r.ptr + from, to - from, &access, 1) == CUDA_SUCCESS;
            i = end;
        }
    }
    if (enabled && !all) {
        enables = 0;  // not counted: later mappings do not ask for it either
        return false;
    }
    if (enabled)
        g_peers[gpu] |= bit;
    else if (all)
        g_peers[gpu] &= ~bit;
    else
        enables = 1;  // it could not be taken away everywhere: kept
    return all;
}

Moved swap_in(uint32_t gpu, uint64_t budget, CUstream stream, bool wait_for_room)
{
    Moved m;
    const uint64_t start = now_ns();
    Lock lock;
    m.lock_ns = now_ns() - start;
    g_resident[gpu] = true;
    swap_plan::Budget room(budget);
    bool device_full = false, budget_spent = false, copied_to_host = false;
    uint64_t on_host = 0;
    // Chunk i, without device memory, stays in (or goes to) host memory, or
    // with `wait_for_room` waits for a later round.
    const auto elsewhere = [&](Record& r, uint32_t i, bool was_out) {
        Chunk& c = r.chunks[i];
        const uint64_t size = r.layout.size_of(i), off = r.layout.offset_of(i);
        if (wait_for_room && !budget_spent && c.where != Where::Host) {
            m.left_waiting += size;  // for the room others still give back
            return;
        }
        if (c.where != Where::Host && !place_on_host(r, i))
            log_warn("no memory for %llu bytes at %#llx, neither on GPU %d nor on the host",
                     static_cast<unsigned long long>(size),
                     static_cast<unsigned long long>(r.ptr + off), r.ordinal);
        else if (was_out) {  // its data, to where its address now shows host memory
            copied_to_host |= stream_copy(r.ptr + off, out_address(c), size, stream);
            m.out_to_host += size;
        }
        on_host += c.where == Where::Host ? size : 0;
    };
    // Consecutive small chunks of one record placed without access: granted
    // in one call, then their copies are queued; kept short, so that copies
    // start while later chunks are mapped.
    struct Run {
        Record* r = nullptr;
        uint32_t first = 0, count = 0;
        Where was[kAccessRun];
    } run;
    const auto flush = [&] {
        if (run.count == 0)
            return;
        Record& r = *run.r;
        const uint32_t last = run.first + run.count - 1;
        const uint64_t from = r.layout.offset_of(run.first);
        const uint64_t granting = now_ns();
        const bool all =
            allow_access(r, r.ptr + from,
                         r.layout.offset_of(last) + r.layout.size_of(last) - from) == CUDA_SUCCESS;
        for (uint32_t k = 0; k < run.count; ++k) {
            const uint32_t i = run.first + k;
            const uint64_t size = r.layout.size_of(i), off = r.layout.offset_of(i);
            if (!all && allow_access(r, r.ptr + off, size) != CUDA_SUCCESS) {
                // As before it was placed (its data untouched), or if even
                // that fails, mapped without access: GPU work on it faults.
                m.short_of_room = true;
                if (leave_device(r, i, run.was[k]))
                    elsewhere(r, i, run.was[k] == Where::Out);
                else
                    log_warn("cannot map a chunk at %#llx for GPU %d: GPU work on it will fail",
                             static_cast<unsigned long long>(r.ptr + off), r.ordinal);
                continue;
            }
            if (run.was[k] == Where::Out &&
                stream_copy(r.ptr + off, out_address(r.chunks[i]), size, stream))
                m.bytes += size;
        }
        m.access_ns += now_ns() - granting;
        run.count = 0;
    };
    for_each_chunk(gpu, [&](Record& r, uint32_t i) {
        Chunk& c = r.chunks[i];
        const uint64_t size = r.layout.size_of(i), off = r.layout.offset_of(i);
        if (c.where == Where::Device)
            return true;
        const Where was = c.where;
        if (!device_full && !room.take(size))
            device_full = budget_spent = true;  // no room will come for it
        if (!device_full) {
            const bool joins = run.count != 0 && run.r == &r && run.first + run.count == i &&
                               run.count < kAccessRun &&
                               off + size - r.layout.offset_of(run.first) <= kAccessRunBytes;
            if (!joins)
                flush();
            const uint64_t placing = now_ns();
            // A Host chunk's address stays usable throughout: access at once.
            CUresult failure = CUDA_SUCCESS;
            const bool placed = place_on_device(r, i, &m.create_ns, was == Where::Host, &failure);
            m.place_ns += now_ns() - placing;
            if (!placed)
                warn_refused(r, i, failure);
            if (placed && was == Where::Host) {
                // The copy runs while the next chunks are made and mapped.
                if (stream_copy(r.ptr + off, r.staging + off, size, stream))
                    m.bytes += size;
            } else if (placed) {
                if (run.count == 0) {
                    run.r = &r;
                    run.first = i;
                }
                run.was[run.count++] = was;
            }
            if (placed)
                return true;
            device_full = true;  // the device refused within the budget
            m.short_of_room = true;
        }
        elsewhere(r, i, was == Where::Out);
        return true;
    });
    flush();
    const uint64_t syncing = now_ns();
    if (wait_for_room && m.short_of_room && !copied_to_host) {
        // Another round follows as room shows: it maps its chunks while
        // these copies run, and the last round (or finish_copies) waits.
        if (m.bytes != 0)
            g_unsynced[gpu] = stream;
    } else {
        if (m.bytes != 0 || copied_to_host)
            stream_sync(stream);
        wait_unsynced(gpu);  // earlier rounds' (on the same stream, ended with these)
    }
    m.sync_ns = now_ns() - syncing;
    m.ns = now_ns() - start;
    m.left_on_host = on_host;
    return m;
}

Moved swap_out(uint32_t gpu, uint64_t keep, CUstream stream)
{
    Moved m;
    const uint64_t start = now_ns();
    Lock lock;
    g_resident[gpu] = false;
    wait_unsynced(gpu);
    // The newest chunks stay, up to `keep`; the rest moves.
    swap_plan::Budget stay(keep);
    uint64_t moving = 0;
    for_each_chunk(gpu, [&](Record& r, uint32_t i) {
        r.chunks[i].moving = beyond_keep(r, i, stay);
        r.chunks[i].group = kNoGroup;  // not yet: an earlier swap-out's is stale
        moving += r.chunks[i].moving ? r.layout.size_of(i) : 0;
        return true;
    });
    if (moving == 0) {
        give_back_cached_host(gpu, UINT64_MAX);  // made ahead for a bigger next holder
        return m;
    }
    // Copied out in groups: the host memory of a group that has none yet is
    // made while the copies queued before it run, and each group is remapped
    // once its copies are done, while later groups still copy, so that the
    // room shows as it goes.
    const uint64_t group_bytes =
        moving / kGroups > kMinGroupBytes ? moving / kGroups + 1 : kMinGroupBytes;
    auto record = NVS_REAL(cuEventRecord);
    auto query = NVS_REAL(cuEventQuery);
    auto wait = NVS_REAL(cuEventSynchronize);
    // Group g's chunks leave the device (copied = its copies are done) or stay.
    const auto finish_group = [&](uint8_t g, bool copied) {
        for_each_moving(gpu, [&](Record& r, uint32_t i) {
            Chunk& c = r.chunks[i];
            if (c.group != g)
                return;
            c.moving = false;
            if (!copied || !leave_device(r, i))
                m.bytes -= r.layout.size_of(i);  // stays on the device
        });
    };
    uint8_t group = 0;  // groups 0 .. group-1 end with an event; the last with none
    int done = -1;      // the groups up to this one have left the device
    uint64_t in_group = 0;
    bool no_host = false;
    for_each_moving(gpu, [&](Record& r, uint32_t i) {
        const uint64_t size = r.layout.size_of(i), off = r.layout.offset_of(i);
        Chunk& c = r.chunks[i];
        if (c.out == nullptr && !no_host) {
            while (query != nullptr && done + 1 < group &&
                   query(g_events[gpu][done + 1]) == CUDA_SUCCESS)
                finish_group(static_cast<uint8_t>(++done), true);
            bool more = false;
            const uint64_t making = now_ns();
            make_out_memory(gpu, keep, group_bytes, false, &more, &no_host);
            m.making_ns += now_ns() - making;
        }
        c.group = group;
        if (c.out == nullptr || !stream_copy(out_address(c), r.ptr + off, size, stream)) {
            c.moving = false;  // stays on the device
            return;
        }
        m.bytes += size;
        in_group += size;
        CUevent e = group + 1u < kGroups ? group_event(gpu, group) : nullptr;
        if (in_group >= group_bytes && e != nullptr && record != nullptr &&
            record(e, stream) == CUDA_SUCCESS) {
            ++group;
            in_group = 0;
        }
    });
    if (no_host) {
        const uint64_t refused = host_memory::take_refused();
        if (refused != 0)
            log_warn(
                "the host runs low on memory: %llu MiB of data stay on GPU %d, not swapped "
                "out",
                static_cast<unsigned long long>(refused >> 20), devices::at(gpu).ordinal);
        else
            log_warn("cannot get pinned host memory to swap out to: data stays on GPU %d",
                     devices::at(gpu).ordinal);
    }
    CUresult failed = CUDA_SUCCESS;
    for (int g = done + 1; g <= group; ++g) {
        if (failed == CUDA_SUCCESS &&
            (g == group || wait == nullptr || wait(g_events[gpu][g]) != CUDA_SUCCESS))
            failed = stream_wait(stream);
        finish_group(static_cast<uint8_t>(g), failed == CUDA_SUCCESS);
    }
    if (failed == CUDA_ERROR_DEINITIALIZED)  // the process is ending: nothing to keep
        log_debug("swapping out from GPU %d stopped: the driver is shutting down",
                  devices::at(gpu).ordinal);
    else if (failed != CUDA_SUCCESS)
        log_warn("swapping out from GPU %d failed (CUDA error %d): its data stays there",
                 devices::at(gpu).ordinal, static_cast<int>(failed));
    if (failed == CUDA_SUCCESS)
        give_back_cached_host(gpu, UINT64_MAX);  // a waiter's: what stays
    m.ns = now_ns() - start;
    return m;
}

bool prestage(uint32_t gpu, uint64_t keep, uint64_t max_bytes, MakeOrder order)
{
    Lock lock;
    give_back_cached_host(gpu, keep);
    bool more = false, failed = false;  // no memory: the swap-out will say so
    const uint64_t made = order == MakeOrder::LeavingFirst
                              ? make_leaving_first(gpu, keep, max_bytes, &more, &failed)
                              : make_out_memory(gpu, keep, max_bytes, true, &more, &failed);
    if (made != 0 && !more && !failed) {
        log_debug(
            "host memory for the next swap-out from GPU %d is ready (made since the last "
            "report: %s)",
            devices::at(gpu).ordinal, host_memory::take_made().text);
    }
    return more && !failed;
}

uint64_t unstaged_bytes(uint32_t gpu, uint64_t keep)
{
    Lock lock;
    swap_plan::Budget stay(keep);
    uint64_t bytes = 0;
    for_each_chunk(gpu, [&](Record& r, uint32_t i) {
        if (beyond_keep(r, i, stay) && r.chunks[i].out == nullptr)
            bytes += r.layout.size_of(i);
        return true;
    });
    return bytes;
}

uint64_t finish_copies(uint32_t gpu)
{
    const uint64_t start = now_ns();
    Lock lock;
    wait_unsynced(gpu);
    return now_ns() - start;
}

uint64_t give_back_kept_host(uint32_t gpu)
{
    Lock lock;
    return give_back_cached_host(gpu, UINT64_MAX);
}

void set_shared_hold(uint32_t gpu, bool shared)
{
    g_shared_hold[gpu].store(shared, std::memory_order_relaxed);
}

void let_go(uint32_t gpu)
{
    Lock lock;
    g_resident[gpu] = false;
}

uint64_t total_bytes(uint32_t gpu)
{
    return g_total[gpu].load(std::memory_order_relaxed);
}

uint64_t device_bytes(uint32_t gpu)
{
    return g_device[gpu].load(std::memory_order_relaxed);
}

uint64_t stranded_bytes(uint32_t gpu)
{
    Lock lock;
    return g_resident[gpu] ? g_host[gpu].load(std::memory_order_relaxed) : 0;
}

void reset_after_fork()
{
    // The parent's allocations and events are not the child's.
    pthread_mutex_init(&g_mutex, nullptr);
    g_records = nullptr;
    g_by_address = nullptr;
    g_count = g_capacity = 0;
    g_deferred_count = 0;
    for (small_blocks::Pool& pool : g_small)
        pool.forget();
    g_absent.store(0);
    g_moves_held = false;
    g_sticky = false;
    memset(g_peers, 0, sizeof g_peers);
    memset(g_peer_enables, 0, sizeof g_peer_enables);
    for (uint32_t i = 0; i < devices::kMaxGpus; ++i) {
        g_resident[i] = false;
        g_shared_hold[i].store(false);
        g_total[i].store(0);
        g_device[i].store(0);
        g_host[i].store(0);
        for (CUevent& e : g_events[i])
            e = nullptr;
        g_unsynced[i] = nullptr;
    }
}

}  // namespace nvshare::preload::swappable
