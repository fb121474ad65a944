#include "preload/lock/thread.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <new>

#include "preload/driver/base_glibc.h"
#include "preload/lock/admission.h"
#include "preload/lock/client.h"
#include "preload/lock/connection.h"
#include "preload/lock/gate.h"
#include "preload/log.h"
#include "preload/mailbox.h"
#include "preload/memory/allocations.h"
#include "preload/memory/contexts.h"
#include "preload/memory/devices.h"
#include "preload/swap/host_memory.h"
#include "preload/swap/residency.h"
#include "preload/swap/swappable.h"

namespace nvshare::preload::client_thread {

namespace {

enum Started { kNotStarted = 0, kStarting = 1, kRunning = 2, kFailed = 3 };

std::atomic<int> g_started{kNotStarted};
bool g_atfork_registered = false;

// The ClientLoop holds a 64 KiB buffer: mapped when the thread first starts, not
// static storage, because every process on the host maps the library's
// zero-filled data at exec time and most never use CUDA. Kept across fork
// (the child's thread reuses the inherited mapping).
void* g_client_storage = nullptr;

void* thread_main(void*)
{
    if (g_client_storage == nullptr) {
        void* m = mmap(nullptr, sizeof(client::ClientLoop), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            // Fail open: run unscheduled rather than block the program.
            lock::open_gate();  // nothing is swapped out before the thread runs
            mailbox::set_ready();
            log_warn("out of memory for the nvshared connection: GPU work runs unscheduled");
            return nullptr;
        }
        g_client_storage = m;
    }
    client::ClientLoop* c = new (g_client_storage) client::ClientLoop();
    c->run();
    return nullptr;
}

void child_after_fork()
{
    // Only the forking thread exists in the child: no client thread, and the
    // parent's connection must not stay open here. The child registers anew
    // on its own first use.
    Connection::close_after_fork();
    mailbox::reset_after_fork();
    g_started.store(kNotStarted);
    gate_reset();
    contexts::reset_after_fork();
    devices::reset_after_fork();
    alloc::reset_after_fork();
    residency::reset_after_fork();
    swappable::reset_after_fork();
    host_memory::reset_after_fork();
}

}  // namespace

bool ensure_started()
{
    int state = g_started.load(std::memory_order_acquire);
    if (state == kRunning)
        return true;
    if (state == kFailed)
        return false;
    int expected = kNotStarted;
    if (g_started.compare_exchange_strong(expected, kStarting, std::memory_order_acq_rel)) {
        if (!g_atfork_registered) {
            pthread_atfork(nullptr, nullptr, child_after_fork);
            g_atfork_registered = true;
        }
        const int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        mailbox::set_event_fd(efd);
        const int r = efd < 0 ? EMFILE : base_glibc::start_detached(thread_main, nullptr);
        if (r != 0) {
            log_warn("cannot start the nvshared client (%s): GPU work runs unscheduled",
                     strerror(r));
            g_started.store(kFailed, std::memory_order_release);
            mailbox::set_ready();
            return false;
        }
        g_started.store(kRunning, std::memory_order_release);
        return true;
    }
    while ((state = g_started.load(std::memory_order_acquire)) == kStarting)
        sched_yield();
    return state == kRunning;
}

}  // namespace nvshare::preload::client_thread
