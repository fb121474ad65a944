#include "preload/memory/allocations.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>

#include "preload/driver/hook_table.h"
#include "preload/mailbox.h"

namespace nvshare::preload::alloc {

namespace {

using devices::Kind;

AllocTable g_pointers;  // device pointers
AllocTable g_handles;   // cuMemCreate handles
// Extra references to a handle (cuMemRetainAllocationHandle gives back the
// same value): handle -> count in `size`. Each cuMemRelease drops one; the
// memory is uncounted only with the last.
AllocTable g_handle_refs;
AllocTable g_arrays;  // CUarray and CUmipmappedArray handles
pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;

AllocTable& table_of(Table t)
{
    switch (t) {
        case Table::Pointers:
            return g_pointers;
        case Table::Handles:
            return g_handles;
        case Table::Arrays:
            break;
    }
    return g_arrays;
}

std::atomic<bool> g_graph_memory{false};

}  // namespace

void track(Table t, uint64_t key, uint64_t size, int gpu, Kind kind, bool rewritten, bool swappable)
{
    AllocTable& table = table_of(t);
    pthread_mutex_lock(&g_mutex);
    const bool ok = table.insert(key, size, gpu, static_cast<uint16_t>(kind), rewritten, swappable);
    pthread_mutex_unlock(&g_mutex);
    if (ok)
        devices::add_usage(static_cast<uint32_t>(gpu), kind, static_cast<int64_t>(size));
}

bool untrack(Table t, uint64_t key, AllocTable::Entry* out)
{
    AllocTable& table = table_of(t);
    pthread_mutex_lock(&g_mutex);
    const bool found = table.remove(key, out);
    pthread_mutex_unlock(&g_mutex);
    if (found)
        devices::add_usage(static_cast<uint32_t>(out->gpu), static_cast<Kind>(out->kind),
                           -static_cast<int64_t>(out->size));
    return found;
}

void retrack(Table table, const AllocTable::Entry& e)
{
    track(table, e.key, e.size, e.gpu, static_cast<Kind>(e.kind), e.rewritten, e.swappable);
}

void retain_handle(uint64_t handle)
{
    AllocTable::Entry e{};
    pthread_mutex_lock(&g_mutex);
    if (g_handles.find(handle, &e)) {
        AllocTable::Entry refs{};
        const uint64_t n = g_handle_refs.remove(handle, &refs) ? refs.size : 0;
        g_handle_refs.insert(handle, n + 1, e.gpu, e.kind);
    }
    pthread_mutex_unlock(&g_mutex);
}

bool take_handle_refs(uint64_t handle, AllocTable::Entry* refs)
{
    pthread_mutex_lock(&g_mutex);
    const bool retained = g_handle_refs.remove(handle, refs);
    pthread_mutex_unlock(&g_mutex);
    return retained;
}

void put_handle_refs(uint64_t handle, uint64_t left, const AllocTable::Entry& refs)
{
    pthread_mutex_lock(&g_mutex);
    if (left != 0)
        g_handle_refs.insert(handle, left, refs.gpu, refs.kind);
    pthread_mutex_unlock(&g_mutex);
}

void reset_after_fork()
{
    pthread_mutex_init(&g_mutex, nullptr);
    g_pointers.clear();
    g_handles.clear();
    g_handle_refs.clear();
    g_arrays.clear();
}

size_t managed_ranges(uint32_t gpu, Range* out, size_t max)
{
    if (max == 0)
        return 0;
    // Keep the `max` newest in a min-heap on seq, then sort newest first.
    const auto older = [](const Range& a, const Range& b) { return a.seq > b.seq; };
    size_t n = 0;
    pthread_mutex_lock(&g_mutex);
    g_pointers.for_each([&](const AllocTable::Entry& e) {
        if (e.gpu != static_cast<int32_t>(gpu) || e.kind != static_cast<uint16_t>(Kind::Managed) ||
            e.swappable)
            return;
        const Range r{e.key, e.size, e.seq};
        if (n < max) {
            out[n++] = r;
            std::push_heap(out, out + n, older);
        } else if (r.seq > out[0].seq) {
            std::pop_heap(out, out + n, older);
            out[n - 1] = r;
            std::push_heap(out, out + n, older);
        }
    });
    pthread_mutex_unlock(&g_mutex);
    std::sort(out, out + n, [](const Range& a, const Range& b) { return a.seq > b.seq; });
    return n;
}

namespace {

AllocTable::Entry pointer_entry(uint64_t ptr)
{
    AllocTable::Entry e{};
    pthread_mutex_lock(&g_mutex);
    if (!g_pointers.find(ptr, &e))
        e = AllocTable::Entry{};
    pthread_mutex_unlock(&g_mutex);
    return e;
}

}  // namespace

bool made_managed(uint64_t ptr)
{
    return pointer_entry(ptr).rewritten;
}

void note_graph_memory()
{
    if (!g_graph_memory.exchange(true))
        mailbox::poke();  // the client thread starts looking at the pools
}

bool graph_memory_in_use()
{
    return g_graph_memory.load(std::memory_order_relaxed);
}

void refresh_graph_memory()
{
    auto real = NVS_REAL(cuDeviceGetGraphMemAttribute);
    if (real == nullptr)
        return;
    for (uint32_t i = 0; i < devices::count(); ++i) {
        devices::Gpu& g = devices::at(i);
        cuuint64_t reserved = 0;
        if (real(g.ordinal, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved) != CUDA_SUCCESS)
            continue;
        const uint64_t before = g.graph_pool.exchange(reserved);
        if (reserved != before)
            devices::add_usage(i, Kind::Pinned,
                               static_cast<int64_t>(reserved) - static_cast<int64_t>(before));
    }
}

}  // namespace nvshare::preload::alloc
