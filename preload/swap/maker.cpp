#include "preload/swap/maker.h"

#include <pthread.h>
#include <string.h>

#include <atomic>

#include "preload/driver/base_glibc.h"
#include "preload/log.h"
#include "preload/mailbox.h"
#include "preload/memory/contexts.h"
#include "preload/swap/swap_plan.h"
#include "preload/swap/tuning.h"

namespace nvshare::preload::maker {

namespace {

pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_wished = PTHREAD_COND_INITIALIZER;
Wish g_wish;             // the latest wish (g_mutex)
uint64_t g_done = 0;     // the wish (by g_asked) the maker finished (g_mutex)
bool g_told = true;      // want() said it was done (g_mutex)
bool g_started = false;  // the thread runs (g_mutex)
bool g_failed = false;   // it could not be started (g_mutex)
// Wishes so far: the maker ends a wish's steps as soon as this changes.
std::atomic<uint64_t> g_asked{0};

struct Step {
    uint32_t gpu;
    uint64_t keep;
    swappable::MakeOrder order;
    bool more = false;
};

void make_step(void* arg)
{
    auto* s = static_cast<Step*>(arg);
    const uint64_t chunk = swap_plan::max_chunk_for(devices::at(s->gpu).physical_memory);
    s->more = swappable::prestage(s->gpu, s->keep, tuning::kPrestageChunks * chunk, s->order);
}

// The steps of wish number `asked`, GPU after GPU, until none remains or a
// later wish came.
void make_for(const Wish& w, uint64_t asked)
{
    for (uint32_t i = 0; i < devices::count() && i < devices::kMaxGpus; ++i) {
        if ((w.gpus >> i & 1) == 0)
            continue;
        Step s{i, w.keep[i], w.order};
        do {
            if (g_asked.load(std::memory_order_acquire) != asked)
                return;
            // A context of the GPU, held in use for the step (not locked:
            // the client thread uses the contexts meanwhile).
            if (!contexts::in_device_context(devices::at(i).ordinal, make_step, &s))
                break;
        } while (s.more);
    }
}

void* thread_main(void*)
{
    // The library's own calls must never make another thread's global-mode
    // stream capture illegal.
    contexts::relax_capture_mode();
    pthread_mutex_lock(&g_mutex);
    for (;;) {
        while (g_done == g_asked.load(std::memory_order_relaxed))
            pthread_cond_wait(&g_wished, &g_mutex);
        const uint64_t asked = g_asked.load(std::memory_order_relaxed);
        const Wish w = g_wish;
        pthread_mutex_unlock(&g_mutex);
        make_for(w, asked);
        pthread_mutex_lock(&g_mutex);
        if (g_asked.load(std::memory_order_relaxed) == asked) {
            g_done = asked;
            mailbox::poke();  // the client thread learns it at its next turn
        }
    }
    return nullptr;
}

// With g_mutex held. False if the thread cannot run.
bool start_locked()
{
    if (g_started || g_failed)
        return g_started;
    const int r = base_glibc::start_detached(thread_main, nullptr);
    if (r != 0) {
        g_failed = true;
        log_warn(
            "cannot start the thread that makes host memory ahead (%s): swap-outs make it "
            "as they go",
            strerror(r));
        return false;
    }
    g_started = true;
    return true;
}

// A new wish (g_mutex held): the maker takes it at the end of its step.
void ask_locked(const Wish& w)
{
    g_wish = w;
    const uint64_t asked = g_asked.load(std::memory_order_relaxed) + 1;
    g_asked.store(asked, std::memory_order_release);
    g_told = false;
    if (w.gpus == 0 || !start_locked()) {
        g_done = asked;  // nothing to make, or no maker to make it
        g_told = true;
    }
    pthread_cond_signal(&g_wished);
}

}  // namespace

bool want(const Wish& w)
{
    pthread_mutex_lock(&g_mutex);
    bool making;
    const bool done = g_done == g_asked.load(std::memory_order_relaxed);
    if (w.gpus == 0) {
        if (g_wish.gpus != 0)
            ask_locked(w);
        making = false;
    } else if (!(w == g_wish) || (done && g_told)) {
        ask_locked(w);  // a new wish, or the same asked again once done
        making = !g_told;
    } else if (done) {
        g_told = true;  // the maker finished it: said once
        making = false;
    } else {
        making = true;
    }
    pthread_mutex_unlock(&g_mutex);
    return making;
}

void stop()
{
    want(Wish{});
}

void reset_after_fork()
{
    pthread_mutex_init(&g_mutex, nullptr);
    pthread_cond_init(&g_wished, nullptr);
    g_wish = Wish{};
    g_asked.store(0);
    g_done = 0;
    g_told = true;
    g_started = false;
    g_failed = false;
}

}  // namespace nvshare::preload::maker
