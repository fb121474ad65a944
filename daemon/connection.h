// One client's connection on the lock socket: its descriptor and sd-event
// sources, the bytes read and those waiting to be sent, and its deadlines.
// The byte I/O is here (one read per wakeup, frames queued and flushed
// without blocking, a peer that does not read dropped); what the bytes mean,
// and what its events do, is the server's.
#pragma once

#include <sys/socket.h>
#include <systemd/sd-event.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/codec.h"
#include "daemon/scheduler_types.h"

namespace nvshare::daemon {

class Server;

// A client that lets this much pile up unread is stuck; drop it rather than
// let it grow the daemon's memory.
inline constexpr size_t kMaxOutBuffer = 256 * 1024;
// A peer that leaves what was sent to it unread this long is disconnected
// (a status it asked for and never reads would stay in memory for good).
inline constexpr auto kUnreadLimit = std::chrono::seconds(10);
// A connection must say Hello (or be done with its status query) this soon.
inline constexpr auto kHelloDeadline = std::chrono::seconds(5);

struct Connection {
    // `doomed`: where mark_dead() puts the serial, for the owner to close
    // the connection at its next reap.
    Connection(Server* owner, uint64_t serial_number, int socket, const ucred& peer_cred,
               uint32_t charged_to, std::vector<uint64_t>& doomed);
    ~Connection();  // disables its sources, closes its descriptors
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    // Watches the socket (`on_io`) and sets up the deadline timer
    // (`on_timer`, armed by arm_timer()) on `event`, both with this as
    // their userdata; false on failure.
    bool watch(sd_event* event, sd_event_io_handler_t on_io, sd_event_time_handler_t on_timer);
    // Reads once: one read per wakeup, as the socket stays readable
    // (level-triggered) and sd-event serves every other ready client before
    // this one again, so that a client that writes nonstop cannot starve
    // the rest. True: bytes came (kept in `in` unless closing); false:
    // nothing now, or the peer is gone (then marked dead).
    bool read();
    // Room for one frame at the end of the output, or null when the
    // connection is dead or does not read (then marked dead).
    uint8_t* frame_room(size_t size);
    template <typename Message>
    void send(const Message& message);
    template <typename Payload>
    void send(proto::MsgType type, const Payload& payload);
    // Sends what the peer takes now; the rest waits for EPOLLOUT.
    void flush();
    // Stops reading and sending for good: the socket is closed.
    void close_socket();
    // Reading unless paused, writing while output waits.
    void update_io_events();
    // The earliest of its deadlines: the end of the wait for its exiting
    // process, the Hello deadline, the end of a pause, the unread limit.
    std::optional<TimePoint> next_deadline() const;
    // The timer at next_deadline(), or off.
    void arm_timer();
    // To be closed at the owner's next reap.
    void mark_dead();
    // Bytes sent to it that it has not read yet.
    size_t unread() const { return out.size() - out_sent; }

    Server* server = nullptr;  // for the event callbacks, which get only this
    uint64_t serial = 0;       // also the ClientId once registered
    int fd = -1;
    ucred peer{};            // from SO_PEERCRED: who the client really is
    uint32_t principal = 0;  // who it is charged to (principals.h)
    sd_event_source* source = nullptr;
    std::vector<uint8_t> in;
    std::vector<uint8_t> out;
    size_t out_sent = 0;
    // While part of `out` waits for the peer to read: when it last read
    // some (or when that began). A peer that reads nothing for
    // kUnreadLimit is disconnected.
    TimePoint read_progress{};
    bool registered = false;
    bool closing = false;  // stop reading; close once `out` is flushed
    bool dead = false;     // close at the next reap
    // An unregistered connection is closed at hello_deadline. A paused one
    // (its user's status queries ran over their rate) is not read until
    // resume_at; its frames wait in `in`. `timer` fires at the earlier.
    TimePoint hello_deadline{};
    bool paused = false;
    TimePoint resume_at{};
    sd_event_source* timer = nullptr;
    // A holder whose process was exiting when the connection closed
    // (process_exit.h): the scheduler hears of it once `exit_fd`, a pidfd,
    // turns readable, or at closed_at + kExitWaitMax (`timer`).
    int exit_fd = -1;
    sd_event_source* exit_watch = nullptr;
    TimePoint closed_at{};

private:
    std::vector<uint64_t>* doomed_;
};

template <typename Message>
void Connection::send(const Message& message)
{
    const size_t size = proto::frame_size(proto::payload_size(message));
    if (uint8_t* room = frame_room(size)) {
        proto::encode(message, room, size);
        flush();
    }
}

template <typename Payload>
void Connection::send(proto::MsgType type, const Payload& payload)
{
    const size_t size = proto::frame_size(sizeof payload);
    if (uint8_t* room = frame_room(size)) {
        proto::encode(type, payload, room, size);
        flush();
    }
}

}  // namespace nvshare::daemon
