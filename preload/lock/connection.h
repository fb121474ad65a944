// The socket to nvshared: connect, send frames (encoded by common/codec.h),
// read and split incoming frames. No policy: the client decides what to say
// and what a message means. Client thread only, except close_after_fork().
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/codec.h"

namespace nvshare::preload {

class Connection {
public:
    // Connects to the configured socket; false (and closed) on failure.
    bool connect();
    // Sends our Hello; false (and closed) on failure.
    bool hello(const proto::Hello& hello);
    void close();
    bool is_open() const { return fd_ >= 0; }
    int fd() const { return fd_; }

    bool send_bytes(const uint8_t* frame, size_t size);
    template <typename Payload>
    bool send(proto::MsgType type, const Payload& payload)
    {
        uint8_t frame[proto::frame_size(sizeof(Payload))];
        return send_bytes(frame, proto::encode(type, payload, frame, sizeof frame));
    }

    // What read_frames() calls for each complete frame; false: nonsense,
    // drop the connection.
    using Handler = bool (*)(void* ctx, proto::MsgType type, const uint8_t* payload,
                             uint32_t length);
    // One read (poll says when there is more), then every complete frame to
    // `handle`. False: the connection is gone or spoke nonsense.
    bool read_frames(Handler handle, void* ctx);

    // After fork in the child: the parent's connection must not stay open.
    static void close_after_fork();

private:
    int fd_ = -1;
    size_t in_len_ = 0;
    uint8_t in_[64 * 1024];
};

}  // namespace nvshare::preload
