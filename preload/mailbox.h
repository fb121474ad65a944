// What application threads and the client thread tell each other besides the
// gate word: a wake-up for the client thread, that some thread wants the
// lock, that nvshared's settings arrived (or we failed open), and until when
// a drain may take. A leaf: it depends on nothing of the library, so that any
// part (memory/ too) may wake the client thread.
#pragma once

#include <cstdint>

namespace nvshare::preload::mailbox {

// The client thread's wake-up (an eventfd, -1 until started).
void set_event_fd(int fd);
int event_fd();
// Something changed (memory, GPUs, a wish for the lock): wake the client.
void poke();
// Reads a wake-up off the eventfd (client thread).
void consume_wakeup();

// An application thread waits at the closed gate: ask for the lock.
void want_lock();
// Marks the wish without a wake-up (the client thread itself).
void set_want();
void clear_want();
bool wanted();

// An allocation found the GPU full while this process shares it with
// others (the gate is closed already): let go, and wait for a grant that
// has room (the client thread takes the request).
void want_yield();
bool take_yield();

// An allocation found the GPU full while this process holds it alone and
// others' memory takes the room (the gate is closed already): wait for the
// room they give back (the client thread takes the request).
void want_room();
bool take_room();

// nvshared's settings arrived, or we failed open: first allocations wait
// for this at most a while.
void set_ready();
// Waits until set_ready() or at most timeout_ms.
void wait_ready(int timeout_ms);

// While the client thread drains: when the drain should be over at the
// latest. Waiting threads fail open past it (drain_overdue()).
void drain_until(uint64_t deadline_ns);
void drain_done();
bool drain_overdue();

// After fork in the child: no wish, not ready; closes the eventfd.
void reset_after_fork();

}  // namespace nvshare::preload::mailbox
