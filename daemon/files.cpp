#include "daemon/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace nvshare::daemon {

namespace {

std::string describe(const std::string& what, const std::string& path)
{
    return what + " " + path + ": " + strerror(errno);
}

bool write_all(int fd, std::string_view data)
{
    while (!data.empty()) {
        const ssize_t n = write(fd, data.data(), data.size());
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
}

}  // namespace

std::optional<std::string> read_file(const std::string& path, std::string* error)
{
    error->clear();
    // O_NONBLOCK: opening a FIFO must not wait for a writer; a FIFO or a
    // device (a link to /dev/zero) is then refused before any read.
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        if (errno != ENOENT)
            *error = describe("cannot open", path);
        return std::nullopt;
    }
    struct stat st {};
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        *error = "cannot read " + path + ": not a regular file";
        close(fd);
        return std::nullopt;
    }
    std::string contents;
    char buf[4096];
    for (;;) {
        const ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            *error = describe("cannot read", path);
            close(fd);
            return std::nullopt;
        }
        if (n == 0)
            break;
        if (contents.size() + static_cast<size_t>(n) > kMaxFileSize) {
            *error = "cannot read " + path + ": larger than " + std::to_string(kMaxFileSize >> 20) +
                     " MiB";
            close(fd);
            return std::nullopt;
        }
        contents.append(buf, static_cast<size_t>(n));
    }
    close(fd);
    return contents;
}

bool write_file_atomically(const std::string& path, std::string_view contents, std::string* error)
{
    const auto slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "."
                            : slash == 0               ? "/"
                                                       : path.substr(0, slash);
    std::string temp = path + ".XXXXXX";
    const int fd = mkostemp(temp.data(), O_CLOEXEC);
    if (fd < 0) {
        *error = describe("cannot create a temporary file for", path);
        return false;
    }
    const bool written = write_all(fd, contents) && fchmod(fd, 0644) == 0 && fsync(fd) == 0;
    if (!written) {
        *error = describe("cannot write", temp);
        close(fd);
        unlink(temp.c_str());
        return false;
    }
    close(fd);
    if (rename(temp.c_str(), path.c_str()) < 0) {
        *error = describe("cannot rename " + temp + " to", path);
        unlink(temp.c_str());
        return false;
    }
    // Makes the rename itself durable.
    const int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
        fsync(dir_fd);
        close(dir_fd);
    }
    return true;
}

}  // namespace nvshare::daemon
