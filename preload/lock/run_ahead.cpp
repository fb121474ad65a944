#include "preload/lock/run_ahead.h"

#include <pthread.h>
#include <time.h>

#include "preload/clock.h"
#include "preload/driver/hook_table.h"
#include "preload/memory/contexts.h"

namespace nvshare::preload::run_ahead {

namespace {

// One ring for the process, in the first context a bounded call came from;
// events are never destroyed, so a thread polling one while another records
// it again only waits a little longer.
pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
CUcontext g_context = nullptr;
CUevent g_events[kQueued] = {};
bool g_recorded[kQueued] = {};
unsigned g_next = 0;

void wait_for(CUevent event)
{
    auto query = NVS_REAL(cuEventQuery);
    if (query == nullptr)
        return;
    const uint64_t deadline = now_ns() + static_cast<uint64_t>(kWaitLimitNs);
    // Polled, not cuEventSynchronize: the wait must stay bounded whatever
    // the queued work waits for.
    while (query(event) == CUDA_ERROR_NOT_READY && now_ns() < deadline) {
        timespec ts{0, 100 * 1000};
        nanosleep(&ts, nullptr);
    }
}

}  // namespace

void before_submit(CUstream stream)
{
    if (contexts::active_captures() > 0)
        return;  // recording an event could join or break a capture
    auto current = NVS_REAL(cuCtxGetCurrent);
    auto create = NVS_REAL(cuEventCreate);
    auto record = NVS_REAL(cuEventRecord);
    CUcontext ctx = nullptr;
    if (current == nullptr || create == nullptr || record == nullptr ||
        current(&ctx) != CUDA_SUCCESS || ctx == nullptr)
        return;
    pthread_mutex_lock(&g_mutex);
    if (g_context == nullptr)
        g_context = ctx;
    if (ctx != g_context) {
        pthread_mutex_unlock(&g_mutex);
        return;
    }
    const unsigned slot = g_next++ % kQueued;
    CUevent oldest = g_recorded[slot] ? g_events[slot] : nullptr;
    pthread_mutex_unlock(&g_mutex);
    if (oldest != nullptr)
        wait_for(oldest);  // kQueued submissions ago: let the GPU catch up
    pthread_mutex_lock(&g_mutex);
    if (g_events[slot] == nullptr &&
        create(&g_events[slot], CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        g_events[slot] = nullptr;
    if (g_events[slot] != nullptr)
        g_recorded[slot] = record(g_events[slot], stream) == CUDA_SUCCESS;
    pthread_mutex_unlock(&g_mutex);
}

}  // namespace nvshare::preload::run_ahead
