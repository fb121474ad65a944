// The lock socket's listening end, on the loop: opens the socket (or takes
// the one systemd passes), accepts new connections as fast as accept_gate.h
// allows, refuses at once those over their user's rate, and hands the others
// to its owner. Its priority is below the clients' (the clients' messages
// that are ready come first); a client's turn calls accept_if_due() so that
// a client that never stops sending cannot starve new connections.
#pragma once

#include <sys/socket.h>
#include <systemd/sd-event.h>

#include <cstdint>
#include <functional>
#include <string>

#include "daemon/accept_gate.h"
#include "daemon/principals.h"
#include "daemon/scheduler_types.h"

namespace nvshare::daemon {

class Listener {
public:
    // `accepted`: a new connection of `peer`, charged to `principal`,
    // within its user's rate; the descriptor is the callee's from then on.
    // `after_round`: a round of accepting that the listener's own event
    // started has ended.
    struct Handler {
        std::function<void(int fd, const ucred& peer, uint32_t principal, TimePoint now)> accepted;
        std::function<void()> after_round;
    };

    // `principals` must outlive the listener: who a peer is charged to.
    Listener(const Principals& principals, Handler handler);
    ~Listener();  // closes the socket; unlinks it where it bound it
    Listener(const Listener&) = delete;
    Listener& operator=(const Listener&) = delete;

    // Opens the socket at `socket_path` (or takes systemd's) and watches it
    // on `event`; false (logged) on failure.
    bool open(sd_event* event, const std::string& socket_path);
    // A round of accepting where none ran for kAcceptAtLeastEvery and
    // accepting is neither paused nor resting.
    void accept_if_due();
    // A descriptor is free again: accepting goes on if it was paused for
    // want of one.
    void descriptor_freed();

private:
    bool open_socket();
    void accept_round();
    // Answers a connection over its user's rate with an Error frame, if the
    // socket takes it at once, and closes it.
    void refuse_fast(int fd, const ucred& peer, uint32_t principal, TimePoint now);
    void pause_accepting();
    void resume_accepting();
    // Stops accepting for kAcceptPause (accept_gate.h).
    void rest_accepting();
    void update_source();
    static int on_ready(sd_event_source* s, int fd, uint32_t revents, void* self);
    static int on_retry(sd_event_source* s, uint64_t usec, void* self);
    static int on_rest_end(sd_event_source* s, uint64_t usec, void* self);

    const Principals& principals_;
    Handler handler_;
    sd_event* event_ = nullptr;
    std::string path_;
    int fd_ = -1;
    bool own_socket_ = false;  // bound by us (not socket-activated): unlink on exit
    sd_event_source* source_ = nullptr;
    sd_event_source* retry_source_ = nullptr;  // resumes accepting after EMFILE
    bool paused_ = false;
    sd_event_source* rest_source_ = nullptr;  // accepting again after kAcceptPause
    bool resting_ = false;
    TimePoint last_round_{};
    AcceptGate gate_;
};

}  // namespace nvshare::daemon
