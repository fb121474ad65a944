#include "preload/memory/contexts.h"

#include <pthread.h>

#include <atomic>

#include "preload/driver/hook_table.h"
#include "preload/env.h"
#include "preload/log.h"
#include "preload/memory/devices.h"

namespace nvshare::preload::contexts {

namespace {

struct Known {
    CUcontext ctx;
    CUdevice device;
    int primary_refs;  // primary contexts: retains minus releases
    bool primary;
};

constexpr int kMaxContexts = 256;
Known g_known[kMaxContexts];
int g_count = 0;
pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
// The contexts being synchronised right now, outside g_mutex, and by how
// many threads (the client thread's drain, a cuMemFree). Destroying one
// waits for those (g_synced) instead of a synchronisation holding g_mutex
// across it: a thread that reaches the gate takes g_mutex (note_current),
// and the work a drain waits for may be that thread's next submission.
struct Syncing {
    CUcontext ctx;
    int threads;
};
Syncing g_syncing[kMaxContexts];
int g_syncing_count = 0;
pthread_cond_t g_synced = PTHREAD_COND_INITIALIZER;
std::atomic<int> g_captures{0};

struct Lock {
    Lock() { pthread_mutex_lock(&g_mutex); }
    ~Lock() { pthread_mutex_unlock(&g_mutex); }
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;
};

int find_locked(CUcontext ctx)
{
    for (int i = 0; i < g_count; ++i)
        if (g_known[i].ctx == ctx)
            return i;
    return -1;
}

void remove_locked(int i)
{
    g_known[i] = g_known[--g_count];
}

void add(CUcontext ctx, CUdevice device, bool primary)
{
    if (ctx == nullptr)
        return;
    {
        Lock lock;
        const int i = find_locked(ctx);
        if (i >= 0) {
            if (primary)
                g_known[i].primary_refs++;
        } else if (g_count < kMaxContexts) {
            g_known[g_count++] = {ctx, device, primary ? 1 : 0, primary};
        } else {
            log_warn("more than %d CUDA contexts: not all are drained on release", kMaxContexts);
        }
    }
    devices::index_of(device, true);
}

// Before a context may go: the drain's synchronisation of it ends first.
// The driver's destroy synchronises the context too, so this costs the
// caller nothing it would not wait for.
int syncing_locked(CUcontext ctx)
{
    for (int i = 0; i < g_syncing_count; ++i)
        if (g_syncing[i].ctx == ctx)
            return i;
    return -1;
}

void await_unsynced_locked(CUcontext ctx)
{
    while (ctx != nullptr && syncing_locked(ctx) >= 0)
        pthread_cond_wait(&g_synced, &g_mutex);
}

// Marks `ctx` as being synchronised by one more thread; false if it is gone.
bool begin_sync(CUcontext ctx)
{
    Lock lock;
    if (find_locked(ctx) < 0)
        return false;  // destroyed meanwhile
    const int i = syncing_locked(ctx);
    if (i >= 0)
        g_syncing[i].threads++;
    else
        g_syncing[g_syncing_count++] = {ctx, 1};  // at most one entry per known context
    return true;
}

void end_sync(CUcontext ctx)
{
    Lock lock;
    const int i = syncing_locked(ctx);
    if (i >= 0 && --g_syncing[i].threads == 0)
        g_syncing[i] = g_syncing[--g_syncing_count];
    pthread_cond_broadcast(&g_synced);
}

void forget(CUcontext ctx)
{
    Lock lock;
    const int i = find_locked(ctx);
    if (i >= 0)
        remove_locked(i);
    await_unsynced_locked(ctx);
}

int find_primary_locked(CUdevice device)
{
    for (int i = 0; i < g_count; ++i)
        if (g_known[i].primary && g_known[i].device == device)
            return i;
    return -1;
}

// cuDevicePrimaryCtxRelease (reset false) and cuDevicePrimaryCtxReset: the
// driver's call runs under g_mutex, after the drain's synchronisation of the
// context, so that it never destroys a context the library is using. At a
// program's exit cudart releases the primary context while our thread may
// be moving memory out after letting go (with_device_context holds g_mutex
// throughout): on the GPU the swap-out failed halfway and its data stayed.
template <typename Call>
CUresult release_primary(CUdevice device, bool reset, Call call)
{
    Lock lock;
    if (const int i = find_primary_locked(device); i >= 0)
        await_unsynced_locked(g_known[i].ctx);
    const CUresult r = call();
    const int i = find_primary_locked(device);  // the list may have changed meanwhile
    if (r == CUDA_SUCCESS && i >= 0 && (reset || --g_known[i].primary_refs <= 0))
        remove_locked(i);
    return r;
}

void capture_began(CUresult r)
{
    if (r == CUDA_SUCCESS)
        g_captures.fetch_add(1, std::memory_order_acq_rel);
}

// Whether the driver says `stream` is capturing (including an invalidated
// capture, which still has to be ended).
bool capturing_now(CUstream stream)
{
    auto is_capturing = NVS_REAL(cuStreamIsCapturing);
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    return is_capturing != nullptr && is_capturing(stream, &status) == CUDA_SUCCESS &&
           status != CU_STREAM_CAPTURE_STATUS_NONE;
}

void capture_ended()
{
    int v = g_captures.load(std::memory_order_acquire);
    while (v > 0 && !g_captures.compare_exchange_weak(v, v - 1, std::memory_order_acq_rel)) {
    }
}

// Ending a capture can fail and still end it (UNJOINED ends and invalidates
// it; other errors may leave it going): what counts is whether the stream
// was capturing before the call and is not after.
template <typename Call>
CUresult end_capture(CUstream stream, Call call)
{
    const bool was = g_captures.load(std::memory_order_acquire) > 0 && capturing_now(stream);
    const CUresult r = call();
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ||
        r == CUDA_ERROR_STREAM_CAPTURE_UNJOINED || (was && !capturing_now(stream)))
        capture_ended();
    return r;
}

// Destroying a capturing stream succeeds and ends its capture.
template <typename Call>
CUresult destroy_stream(CUstream stream, Call call)
{
    const bool was = g_captures.load(std::memory_order_acquire) > 0 && capturing_now(stream);
    const CUresult r = call();
    if (r == CUDA_SUCCESS && was)
        capture_ended();
    return r;
}

}  // namespace

bool note_current()
{
    auto get_current = NVS_REAL(cuCtxGetCurrent);
    auto get_device = NVS_REAL(cuCtxGetDevice);
    CUcontext ctx = nullptr;
    if (get_current == nullptr || get_device == nullptr || get_current(&ctx) != CUDA_SUCCESS ||
        ctx == nullptr)
        return false;
    {
        Lock lock;
        if (find_locked(ctx) >= 0)
            return true;
    }
    CUdevice device = 0;
    if (get_device(&device) != CUDA_SUCCESS)
        return false;
    add(ctx, device, false);
    return true;
}

bool note_current_or_stream(CUstream stream)
{
    if (note_current())
        return true;
    // The default streams mean "the current context's": there is none.
    if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD)
        return false;
    auto get_ctx = NVS_REAL(cuStreamGetCtx);
    auto push = NVS_REAL(cuCtxPushCurrent_v2);
    auto pop = NVS_REAL(cuCtxPopCurrent_v2);
    CUcontext ctx = nullptr;
    if (get_ctx == nullptr || push == nullptr || pop == nullptr ||
        get_ctx(stream, &ctx) != CUDA_SUCCESS || ctx == nullptr || push(ctx) != CUDA_SUCCESS)
        return false;
    const bool noted = note_current();
    CUcontext popped = nullptr;
    pop(&popped);
    return noted;
}

int current_device()
{
    auto get_device = NVS_REAL(cuCtxGetDevice);
    CUdevice device = 0;
    if (get_device == nullptr || get_device(&device) != CUDA_SUCCESS)
        return -1;
    return device;
}

int device_of(CUcontext ctx)
{
    auto push = NVS_REAL(cuCtxPushCurrent_v2);
    auto pop = NVS_REAL(cuCtxPopCurrent_v2);
    if (ctx == nullptr || push == nullptr || pop == nullptr || push(ctx) != CUDA_SUCCESS)
        return -1;
    const int device = current_device();
    CUcontext popped = nullptr;
    pop(&popped);
    return device;
}

bool drain_all()
{
    return sync_all(nullptr);
}

bool sync_all(CUresult* failed)
{
    if (g_captures.load(std::memory_order_acquire) > 0)
        return false;
    auto push = NVS_REAL(cuCtxPushCurrent_v2);
    auto pop = NVS_REAL(cuCtxPopCurrent_v2);
    auto sync = NVS_REAL(cuCtxSynchronize);
    if (push == nullptr || pop == nullptr || sync == nullptr)
        return true;
    // Another thread's global-mode capture must not make our
    // synchronisation illegal (and we never sync a capturing stream).
    relax_capture_mode();
    // The list as it is now; contexts made meanwhile have no work of ours to
    // wait for. g_mutex is held only between synchronisations, never across
    // one (see g_syncing).
    CUcontext list[kMaxContexts];
    int n = 0;
    CUcontext mine = nullptr;  // whose error is the caller's (as the driver's own wait)
    if (auto get_current = NVS_REAL(cuCtxGetCurrent); get_current != nullptr)
        get_current(&mine);
    {
        Lock lock;
        for (int i = 0; i < g_count; ++i)
            list[n++] = g_known[i].ctx;
    }
    for (int i = 0; i < n; ++i) {
        if (!begin_sync(list[i]))
            continue;
        if (push(list[i]) == CUDA_SUCCESS) {
            const CUresult r = sync();
            if (r != CUDA_SUCCESS) {
                log_debug("synchronising context %p: error %d", static_cast<void*>(list[i]),
                          static_cast<int>(r));
                if (failed != nullptr && *failed == CUDA_SUCCESS && list[i] == mine)
                    *failed = r;
            }
            CUcontext popped = nullptr;
            pop(&popped);
        }
        end_sync(list[i]);
    }
    return true;
}

void relax_capture_mode()
{
    static thread_local bool relaxed = false;
    if (relaxed)
        return;
    if (auto exchange = NVS_REAL(cuThreadExchangeStreamCaptureMode)) {
        CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
        exchange(&mode);
    }
    relaxed = true;
}

bool with_device_context(CUdevice ordinal, void (*fn)(void*), void* arg)
{
    auto push = NVS_REAL(cuCtxPushCurrent_v2);
    auto pop = NVS_REAL(cuCtxPopCurrent_v2);
    if (push == nullptr || pop == nullptr)
        return false;
    Lock lock;  // the context cannot be destroyed while we use it
    for (int i = 0; i < g_count; ++i) {
        if (g_known[i].device != ordinal || push(g_known[i].ctx) != CUDA_SUCCESS)
            continue;
        fn(arg);
        CUcontext popped = nullptr;
        pop(&popped);
        return true;
    }
    return false;
}

int active_captures()
{
    return g_captures.load(std::memory_order_acquire);
}

bool stream_capturing(CUstream stream)
{
    if (g_captures.load(std::memory_order_acquire) == 0)
        return false;
    auto is_capturing = NVS_REAL(cuStreamIsCapturing);
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    return is_capturing != nullptr && is_capturing(stream, &status) == CUDA_SUCCESS &&
           status != CU_STREAM_CAPTURE_STATUS_NONE;
}

bool is_sticky(CUresult e)
{
    switch (e) {
        case CUDA_ERROR_ILLEGAL_ADDRESS:
        case CUDA_ERROR_LAUNCH_FAILED:
        case CUDA_ERROR_ECC_UNCORRECTABLE:
        case CUDA_ERROR_HARDWARE_STACK_ERROR:
        case CUDA_ERROR_ILLEGAL_INSTRUCTION:
        case CUDA_ERROR_MISALIGNED_ADDRESS:
        case CUDA_ERROR_INVALID_ADDRESS_SPACE:
        case CUDA_ERROR_INVALID_PC:
        case CUDA_ERROR_ASSERT:
            return true;
        default:
            return false;
    }
}

CUresult lost_error()
{
    auto get_limit = NVS_REAL(cuCtxGetLimit);
    size_t value = 0;
    const CUresult e = get_limit != nullptr ? get_limit(&value, CU_LIMIT_STACK_SIZE) : CUDA_SUCCESS;
    return is_sticky(e) ? e : CUDA_SUCCESS;
}

void reset_after_fork()
{
    pthread_mutex_init(&g_mutex, nullptr);
    pthread_cond_init(&g_synced, nullptr);
    g_syncing_count = 0;
    g_count = 0;
    g_captures.store(0);
}

}  // namespace nvshare::preload::contexts

// ---- exported wrappers ---------------------------------------------------------

using nvshare::preload::contexts::add;
using nvshare::preload::contexts::capture_began;
using nvshare::preload::contexts::destroy_stream;
using nvshare::preload::contexts::end_capture;
using nvshare::preload::contexts::forget;
using nvshare::preload::contexts::release_primary;

// Calls `real` (returning CUDA_ERROR_NOT_FOUND if the driver lacks it); the
// result is `r`.
#define NVS_CALL_REAL_PTR(real, ...) \
    if ((real) == nullptr)           \
        return CUDA_ERROR_NOT_FOUND; \
    const CUresult r = (real)(__VA_ARGS__)
#define NVS_CALL_REAL(name, ...) \
    auto real = NVS_REAL(name);  \
    NVS_CALL_REAL_PTR(real, __VA_ARGS__)

NVS_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev)
{
    NVS_CALL_REAL(cuDevicePrimaryCtxRetain, pctx, dev);
    if (r == CUDA_SUCCESS && !nvshare::preload::config().disabled)
        add(*pctx, dev, true);
    return r;
}

namespace {

// cuDevicePrimaryCtxRelease (reset false) and cuDevicePrimaryCtxReset.
template <bool reset, typename Real>
CUresult primary_release(Real real, CUdevice dev)
{
    if (real == nullptr)
        return CUDA_ERROR_NOT_FOUND;
    return release_primary(dev, reset, [&] { return real(dev); });
}

template <typename Real>
CUresult ctx_create(Real real, CUcontext* pctx, unsigned int flags, CUdevice dev)
{
    NVS_CALL_REAL_PTR(real, pctx, flags, dev);
    if (r == CUDA_SUCCESS && !nvshare::preload::config().disabled)
        add(*pctx, dev, false);
    return r;
}

// Forget before destroying: the client thread must never sync a dead context.
template <typename Real>
CUresult ctx_destroy(Real real, CUcontext ctx)
{
    forget(ctx);
    NVS_CALL_REAL_PTR(real, ctx);
    return r;
}

template <typename Real, typename... Args>
CUresult begin_capture(Real real, int /*per_thread*/, Args... args)
{
    NVS_CALL_REAL_PTR(real, args...);
    capture_began(r);
    return r;
}

template <typename Real>
CUresult stream_end_capture(Real real, int per_thread, CUstream hStream, CUgraph* phGraph)
{
    if (real == nullptr)
        return CUDA_ERROR_NOT_FOUND;
    // In the _ptsz twin, 0 names the per-thread default stream.
    const CUstream s = per_thread != 0 && hStream == nullptr ? CU_STREAM_PER_THREAD : hStream;
    return end_capture(s, [&] { return real(hStream, phGraph); });
}

template <typename Real>
CUresult stream_destroy(Real real, CUstream hStream)
{
    if (real == nullptr)
        return CUDA_ERROR_NOT_FOUND;
    return destroy_stream(hStream, [&] { return real(hStream); });
}

}  // namespace

// clang-format off
NVS_VERSION_PAIR(cuDevicePrimaryCtxRelease, _v2, primary_release<false>, (CUdevice dev), (dev))
NVS_VERSION_PAIR(cuDevicePrimaryCtxReset, _v2, primary_release<true>, (CUdevice dev), (dev))
NVS_VERSION_PAIR(cuCtxCreate, _v2, ctx_create,
                 (CUcontext* pctx, unsigned int flags, CUdevice dev), (pctx, flags, dev))
// clang-format on

NVS_EXPORT CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* paramsArray, int numParams,
                                   unsigned int flags, CUdevice dev)
{
    NVS_CALL_REAL(cuCtxCreate_v3, pctx, paramsArray, numParams, flags, dev);
    if (r == CUDA_SUCCESS && !nvshare::preload::config().disabled)
        add(*pctx, dev, false);
    return r;
}

NVS_EXPORT CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* ctxCreateParams,
                                   unsigned int flags, CUdevice dev)
{
    NVS_CALL_REAL(cuCtxCreate_v4, pctx, ctxCreateParams, flags, dev);
    if (r == CUDA_SUCCESS && !nvshare::preload::config().disabled)
        add(*pctx, dev, false);
    return r;
}

// clang-format off
NVS_VERSION_PAIR(cuCtxDestroy, _v2, ctx_destroy, (CUcontext ctx), (ctx))
NVS_PER_THREAD_PAIR(cuStreamBeginCapture, begin_capture, (CUstream hStream), (hStream))
NVS_PER_THREAD_PAIR(cuStreamBeginCapture_v2, begin_capture,
                    (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode))
NVS_PER_THREAD_PAIR(cuStreamBeginCaptureToGraph, begin_capture,
                    (CUstream hStream, CUgraph hGraph, const CUgraphNode* dependencies,
                     const CUgraphEdgeData* dependencyData, size_t numDependencies,
                     CUstreamCaptureMode mode),
                    (hStream, hGraph, dependencies, dependencyData, numDependencies, mode))
NVS_PER_THREAD_PAIR(cuStreamEndCapture, stream_end_capture,
                    (CUstream hStream, CUgraph* phGraph), (hStream, phGraph))
NVS_VERSION_PAIR(cuStreamDestroy, _v2, stream_destroy, (CUstream hStream), (hStream))
// clang-format on
