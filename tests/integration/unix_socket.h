// Raw Unix socket work for the tests that play systemd or a misbehaving
// client.
#pragma once

#include <string>

#include "tests/support/wait.h"

namespace nvshare::test {

// A listening Unix stream socket bound at path (a stand-in for systemd's).
int listen_unix(const std::string& path);
// Waits until the peer has read everything we sent on a Unix stream socket.
bool wait_drained(int fd, Millis timeout = kTimeout);

}  // namespace nvshare::test
