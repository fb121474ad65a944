#include "daemon/process_exit.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <charconv>
#include <string>

namespace nvshare::daemon {

namespace {

constexpr unsigned long kPfExiting = 0x4;  // include/linux/sched.h

}  // namespace

bool stat_says_exiting(std::string_view text)
{
    // "pid (comm) state ppid pgrp session tty_nr tpgid flags ...": comm may
    // hold spaces and parentheses, so count from the last ')'.
    const size_t close = text.rfind(')');
    if (close == std::string_view::npos)
        return false;
    std::string_view rest = text.substr(close + 1);
    for (int field = 3; field <= 9; ++field) {
        const size_t start = rest.find_first_not_of(' ');
        if (start == std::string_view::npos)
            return false;
        rest = rest.substr(start);
        const size_t end = rest.find(' ');
        const std::string_view value = rest.substr(0, end);
        if (field == 9) {
            unsigned long flags = 0;
            const auto [ptr, ec] =
                std::from_chars(value.data(), value.data() + value.size(), flags);
            return ec == std::errc{} && ptr == value.data() + value.size() &&
                   (flags & kPfExiting) != 0;
        }
        if (end == std::string_view::npos)
            return false;
        rest = rest.substr(end);
    }
    return false;
}

int exiting_process_fd(pid_t pid)
{
    if (pid <= 0)
        return -1;
    // The pidfd first: if the stat read after it says exiting, the pidfd
    // names that process, not one that reused its pid.
    // syscall(): Debian 12's <sys/pidfd.h> declares pidfd_open without C
    // linkage (glibc 2.36).
    const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0)
        return -1;
    char text[1024];
    const std::string path = "/proc/" + std::to_string(pid) + "/stat";
    const int stat_fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ssize_t n = stat_fd < 0 ? -1 : read(stat_fd, text, sizeof text);
    if (stat_fd >= 0)
        close(stat_fd);
    if (n <= 0 || !stat_says_exiting(std::string_view(text, static_cast<size_t>(n)))) {
        close(fd);
        return -1;
    }
    return fd;
}

}  // namespace nvshare::daemon
