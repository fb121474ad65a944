// The file side of `nvsharectl preload`: where the files are, the lock, and
// the atomic replacement of /etc/ld.so.preload. The decisions are in
// cli/preload_merge.h.
#pragma once

#include <string>
#include <vector>

#include "cli/preload_merge.h"

namespace nvshare::cli {

struct PreloadPaths {
    std::string file;     // /etc/ld.so.preload      ($NVSHARE_LD_SO_PRELOAD)
    std::string dir;      // /etc/ld.so.preload.d    ($NVSHARE_LD_SO_PRELOAD_D)
    std::string entry;    // how the file names libnvshare.so ($NVSHARE_PRELOAD_ENTRY)
    std::string drop_in;  // dir + "/nvshare.conf"
    std::string state;    // dir + "/.merged": what the merge wrote (hidden: not a drop-in)
};

// The built-in paths, or the environment's overrides (for tests and for
// preparing another root).
PreloadPaths preload_paths();

// errno and a message naming the file, for a failed step.
struct FileError {
    int error = 0;
    std::string message;
};

// An exclusive flock(2) on the drop-in directory (created 0755 if missing):
// merges run one at a time, each reading the drop-ins and the file and
// replacing it as one step. The directory itself is the lock so that no lock
// file is left in /etc and the path unit watching the directory never fires
// because of one.
class DropInLock {
public:
    DropInLock() = default;
    ~DropInLock();
    DropInLock(const DropInLock&) = delete;
    DropInLock& operator=(const DropInLock&) = delete;
    bool acquire(const std::string& dir, FileError* error);

private:
    int fd_ = -1;
};

// Reads a regular file of at most max_bytes. A missing file is not an error
// (*exists = false, empty text); a symlink or other special file is.
bool read_regular_file(const std::string& path, size_t max_bytes, std::string* text, bool* exists,
                       FileError* error);

// The drop-ins of `dir` (names per is_drop_in_name). A symlink to /dev/null
// or anything else that is not a regular file masks the name, with a
// warning; a drop-in (or the directory) that someone besides root could
// change is ignored with a warning (all of them, for the directory); an unreadable drop-in is an error, so its entries are never
// dropped by accident.
bool read_drop_ins(const std::string& dir, std::vector<preload::DropIn>* drop_ins,
                   std::vector<std::string>* warnings, FileError* error);

// Replaces `path` atomically: a temporary file in the same directory, mode
// 0644, owner root:root (when running as root), fsync, rename, fsync of the
// directory. A process starting meanwhile sees the old or the new file,
// never a partial one.
bool replace_file(const std::string& path, const std::string& text, FileError* error);

// Writes `text` to `path` as replace_file does, but only when the content
// differs (a file rewritten at every service start mostly stays the same);
// the directory is made 0755 if missing (its parent must exist). A present
// file over max_bytes is an error.
bool update_file(const std::string& path, const std::string& text, size_t max_bytes,
                 FileError* error);

// "/etc/cdi" for "/etc/cdi/nvshare.json"; "." for a bare name.
std::string parent_dir(const std::string& path);

// Removes `path` (missing is fine) and syncs its directory.
bool remove_file(const std::string& path, FileError* error);

}  // namespace nvshare::cli
