// The connection to nvshared as the client thread runs it: registers the
// process's GPUs, asks for and gives back the lock (Holding, the state
// machine), and reports memory. It fails open: without a daemon the process
// runs unscheduled and reconnects when the daemon is back. Constructed and
// run by thread.cpp, on the client thread only.
#pragma once

#include <cstdint>

#include "common/protocol.h"
#include "preload/lock/connection.h"
#include "preload/lock/holding.h"
#include "preload/lock/idle_gaps.h"
#include "preload/lock/wait_announcer.h"
#include "preload/swap/switch_policy.h"

namespace nvshare::preload::client {

// Everything one connection to nvshared knows besides the socket.
struct Session {
    bool welcomed = false;
    Holding lock;
    uint32_t gpu_count = 0;   // GPUs named in our Hello
    uint32_t generation = 0;  // devices::generation() at Hello
    uint64_t connected_at = 0;
    uint64_t next_idle_check = 0;
    uint64_t quiet_since = 0;  // when ACTIVE was last cleared: no work submitted since
    uint64_t granted_at = 0;   // our latest grant
    uint64_t quantum_ns = 0;   // the time quantum nvshared's settings name
    bool likely_told = false;  // the debug log said a switch is likely, this hold
    bool hold_told = false;    // the debug log said this pause's idle hold
    uint64_t last_graph_check = 0;
    uint32_t revoke_cause = 0;  // from the RevokeCause before a Revoked
    // nvshared sent KnownRates: it takes our Rates (an older one would
    // refuse the type).
    bool takes_rates = false;
    // residency::rates_version of each GPU as last reported.
    uint64_t rates_reported[proto::kMaxGpusPerClient] = {};
    // When the swap engine moves memory around our switches (prestaging,
    // promotion, asking for room); fed the events below and asked each turn.
    swap::SwitchPolicy switching;
};

class ClientLoop {
public:
    void run();

private:
    // The connection.
    bool connect_and_hello();
    void disconnect();
    // The gate opens here (lock::open_gate); refused (data still swapped
    // out), we let go and ask again.
    void open_gate();
    void fail_open(const char* reason);
    // Every GPU of our Hello, as a client-local mask.
    uint64_t all_gpus() const;
    bool send_mask(proto::MsgType type);
    static bool on_frame(void* self, proto::MsgType type, const uint8_t* p, uint32_t length);

    // What nvshared says.
    bool handle(proto::MsgType type, const uint8_t* p, uint32_t length, uint64_t now);
    void apply_settings(const proto::Settings& s);
    void on_grant(const proto::GrantPayload& g, uint64_t now);
    void on_drop(const proto::DropPayload& d, uint64_t now);
    // nvshared asks us to leave at most `keep_bytes` on GPUs we do not hold
    // (a Shrink, or a Drop that came after we let go): others need the room.
    void shrink(uint64_t gpus, uint64_t keep_bytes);
    // KnownRates: what earlier processes measured on one of our GPUs.
    bool on_known_rates(const uint8_t* p, uint32_t length);
    void on_revoked();
    // What the switch policy is asked with, at `now`.
    swap::Facts facts(uint64_t now) const;
    void prestage(uint64_t now);
    // Fills in f.switch_likely and f.switch_likely_at; returns why it is
    // likely, for the debug log.
    const char* switch_likely(swap::Facts& f) const;
    void promote(uint64_t now);
    bool on_error(const uint8_t* p, uint32_t length);

    // What the loop does on each turn.
    void work(uint64_t now);
    void finish_drop(uint64_t now);
    void release_if_idle(uint64_t now);
    void yield_if_asked(uint64_t now);
    void make_room_if_asked(uint64_t now);
    void finish_swap_in(uint64_t now);
    // `room_wanted_mib`: per GPU, what a holder lacks there (MemoryPayload),
    // sent with the GPU's report even if its memory did not change.
    void report_memory(uint64_t now, bool requesting, const uint32_t* room_wanted_mib = nullptr);
    void request_lock(uint64_t now);
    // Lets go; `quiet`: the program's work is drained with none let through
    // since (quiesce), so memory may move; else nothing moves.
    void release(uint64_t deadline, bool quiet);
    // Waits for the program's GPU work; past `deadline` the threads that
    // wait at the closed gate go through (lock.cpp): the one synchronisation
    // of the client thread.
    bool drain(uint64_t deadline);
    // The gate closed and the program's work drained with none let through
    // meanwhile: what moving memory needs. False (nothing may move) where a
    // capture runs, or work went through a stuck drain until `deadline`.
    // True when nothing went through the gate since `let_through` was read:
    // threads that fail open are then refused until the next round of the
    // loop or open_gate() (swappable::hold_moves), so memory may move.
    bool quiesce(uint64_t deadline);
    bool hold_moves(uint32_t let_through);
    void report_stats();
    // Rates this process measured since it last said (to a daemon that
    // takes them).
    void report_rates();
    int timeout_ms(uint64_t now) const;
    void wait_event(int timeout);

    Connection conn_;
    Session s_;
    WaitAnnouncer wait_;
    IdleGaps gaps_;  // kept across connections: a property of the program
    bool failing_ = false;
    static constexpr uint32_t kBackoffFirstMs = 500;
    uint32_t backoff_ms_ = kBackoffFirstMs;
    uint64_t retry_at_ = 0;
};

}  // namespace nvshare::preload::client
