#include "cli/preload_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "build-config.h"
#include "cli/library_facts.h"
#include "common/write_all.h"

namespace nvshare::cli {

namespace {

std::string env_or(const char* name, const char* fallback)
{
    const char* value = getenv(name);
    return value != nullptr && value[0] != '\0' ? value : fallback;
}

bool fail(FileError* error, const std::string& what, int err)
{
    error->error = err;
    error->message = what + ": " + strerror(err);
    return false;
}

bool sync_dir(const std::string& dir, FileError* error)
{
    const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return fail(error, dir, errno);
    const bool ok = fsync(fd) == 0;
    const int err = errno;
    close(fd);
    return ok || fail(error, "fsync " + dir, err);
}

// Appends fd's content to *out until EOF or until it holds more than
// `limit` bytes; returns 0 or an errno value.
int read_up_to(int fd, size_t limit, std::string* out)
{
    char buf[8192];
    while (out->size() <= limit) {
        const ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        if (n == 0)
            break;
        out->append(buf, static_cast<size_t>(n));
    }
    return 0;
}

}  // namespace

std::string parent_dir(const std::string& path)
{
    const auto slash = path.rfind('/');
    if (slash == std::string::npos)
        return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

PreloadPaths preload_paths()
{
    PreloadPaths p;
    p.file = env_or("NVSHARE_LD_SO_PRELOAD", "/etc/ld.so.preload");
    p.dir = env_or("NVSHARE_LD_SO_PRELOAD_D", "/etc/ld.so.preload.d");
    p.entry = env_or("NVSHARE_PRELOAD_ENTRY", NVSHARE_PRELOAD_ENTRY);
    p.drop_in = p.dir + "/nvshare.conf";
    p.state = p.dir + "/.merged";
    return p;
}

DropInLock::~DropInLock()
{
    if (fd_ >= 0)
        close(fd_);  // releases the flock
}

bool DropInLock::acquire(const std::string& dir, FileError* error)
{
    if (mkdir(dir.c_str(), 0755) == 0) {
        chmod(dir.c_str(), 0755);  // whatever the umask
    } else if (errno != EEXIST) {
        return fail(error, "cannot create " + dir, errno);
    }
    fd_ = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd_ < 0)
        return fail(error, dir, errno);
    while (flock(fd_, LOCK_EX) < 0) {
        if (errno != EINTR)
            return fail(error, "cannot lock " + dir, errno);
    }
    return true;
}

bool read_regular_file(const std::string& path, size_t max_bytes, std::string* text, bool* exists,
                       FileError* error)
{
    text->clear();
    *exists = false;
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT)
            return true;
        if (errno == ELOOP)
            return fail(error, path + " is a symbolic link; not following it", errno);
        return fail(error, path, errno);
    }
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(error, path + " is not a regular file", EINVAL);
    }
    *exists = true;
    const int err = read_up_to(fd, max_bytes, text);
    close(fd);
    if (err != 0)
        return fail(error, path, err);
    if (text->size() > max_bytes)
        return fail(error, path + " is larger than expected", EFBIG);
    return true;
}

bool read_drop_ins(const std::string& dir, std::vector<preload::DropIn>* drop_ins,
                   std::vector<std::string>* warnings, FileError* error)
{
    drop_ins->clear();
    // Each entry goes into every program, root's too: only root may be able
    // to change the directory, a drop-in or what a drop-in links to.
    const preload::LibraryFacts dir_facts = gather_path_facts(dir);
    if (dir_facts.error == 0) {
        if (std::string why = preload::changeable_by_others(dir_facts, "directory"); !why.empty()) {
            warnings->push_back(dir + ": " + why + "; none of its drop-ins is merged");
            return true;
        }
    }
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) {
        if (errno == ENOENT)
            return true;  // no drop-ins: no entries
        return fail(error, dir, errno);
    }
    std::vector<std::string> names;
    while (const dirent* e = readdir(d)) {
        if (preload::is_drop_in_name(e->d_name))
            names.emplace_back(e->d_name);
    }
    closedir(d);
    for (const auto& name : names) {
        const std::string path = dir + "/" + name;
        struct stat st {};
        if (stat(path.c_str(), &st) != 0) {
            if (errno == ENOENT) {
                // Removed meanwhile, or a dangling symlink: nothing to list.
                continue;
            }
            return fail(error, path, errno);
        }
        if (!S_ISREG(st.st_mode)) {
            warnings->push_back(path + ": not a regular file; ignored");
            continue;
        }
        if (std::string why = preload::changeable_by_others(gather_path_facts(path), "file");
            !why.empty()) {
            warnings->push_back(path + ": " + why + "; ignored");
            continue;
        }
        // Follows a symlink to a regular file, unlike read_regular_file.
        const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) {
            if (errno == ENOENT)
                continue;
            return fail(error, path, errno);
        }
        // Reads one byte past the limit, so collect_entries sees it is too big.
        std::string text;
        const int err = read_up_to(fd, preload::kMaxDropInBytes, &text);
        close(fd);
        if (err != 0)
            return fail(error, path, err);
        drop_ins->push_back({name, std::move(text)});
    }
    return true;
}

bool replace_file(const std::string& path, const std::string& text, FileError* error)
{
    struct stat st {};
    if (lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
        return fail(error, path + " is not a regular file (a symbolic link?); not replacing it",
                    EINVAL);
    const std::string dir = parent_dir(path);
    // A hidden name: path units and drop-in readers ignore dot files.
    std::string tmp = dir + "/." + path.substr(path.rfind('/') + 1) + ".XXXXXX";
    const int fd = mkostemp(tmp.data(), O_CLOEXEC);
    if (fd < 0)
        return fail(error, "cannot create a temporary file in " + dir, errno);
    auto abandon = [&](const std::string& what, int err) {
        close(fd);
        unlink(tmp.c_str());
        return fail(error, what, err);
    };
    if (!write_all(fd, text))
        return abandon("write " + tmp, errno);
    if (fchmod(fd, 0644) != 0)
        return abandon("chmod " + tmp, errno);
    // glibc skips a file the starting process cannot read: 0644 root:root.
    // Only when it is not root's already: nvshare-preload.service's system
    // call filter (~@privileged) refuses fchown, and root's file needs none.
    struct stat made {};
    if (fstat(fd, &made) != 0)
        return abandon("stat " + tmp, errno);
    if (geteuid() == 0 && (made.st_uid != 0 || made.st_gid != 0) && fchown(fd, 0, 0) != 0)
        return abandon("chown " + tmp, errno);
    if (fsync(fd) != 0)
        return abandon("fsync " + tmp, errno);
    if (close(fd) != 0) {
        const int err = errno;
        unlink(tmp.c_str());
        return fail(error, "close " + tmp, err);
    }
    if (rename(tmp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        unlink(tmp.c_str());
        return fail(error, "rename to " + path, err);
    }
    return sync_dir(dir, error);
}

bool remove_file(const std::string& path, FileError* error)
{
    if (unlink(path.c_str()) != 0) {
        if (errno == ENOENT)
            return true;
        return fail(error, "cannot remove " + path, errno);
    }
    return sync_dir(parent_dir(path), error);
}

bool update_file(const std::string& path, const std::string& text, size_t max_bytes,
                 FileError* error)
{
    const std::string dir = parent_dir(path);
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
        return fail(error, "cannot create " + dir, errno);
    std::string current;
    bool exists = false;
    if (!read_regular_file(path, max_bytes, &current, &exists, error))
        return false;
    return (exists && current == text) || replace_file(path, text, error);
}

}  // namespace nvshare::cli
