// Test programs that bind-mount their own files over the host's (polkitd's
// directories, /etc/subuid): a mount namespace of the program's own, so
// that nothing reaches the host.
#pragma once

#include <string>

namespace nvshare::test {

// Enters a new mount namespace, with nothing propagating back to the host.
// Call it from main while the program has one thread. "" when done, else
// why not (not root, or the kernel refused): the tests then skip with it.
std::string enter_private_mount_namespace();

}  // namespace nvshare::test
