// The plugin's side of the kubelet's Registration service, and how it tells
// that the kubelet restarted: its socket is a new file.
#pragma once

#include <sys/types.h>

#include <ctime>
#include <string>

namespace nvshare::deviceplugin {

// Registers nvshare.com/gpu, served on `endpoint` (a file name in the
// kubelet socket's directory); false and *error when the kubelet refuses or
// does not answer.
bool register_with_kubelet(const std::string& kubelet_socket, const std::string& endpoint,
                           std::string* error);

// Which file a path names now: a re-created socket differs (another inode,
// or the same inode number with another change time).
struct FileIdentity {
    bool exists = false;
    dev_t device = 0;
    ino_t inode = 0;
    timespec changed{};
    bool operator==(const FileIdentity& other) const;
};
FileIdentity file_identity(const std::string& path);

}  // namespace nvshare::deviceplugin
