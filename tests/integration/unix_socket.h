// Raw Unix socket work for the tests that play systemd or a misbehaving
// client.
#pragma once

#include <cstddef>
#include <string>

#include "tests/support/wait.h"

namespace nvshare::test {

// A listening Unix stream socket bound at path (a stand-in for systemd's).
int listen_unix(const std::string& path);
// Sends all bytes on a (blocking) socket; false on error.
bool send_all(int fd, const void* data, size_t size);
// Waits until the peer has read everything we sent on a Unix stream socket.
bool wait_drained(int fd, Millis timeout = kTimeout);

}  // namespace nvshare::test
