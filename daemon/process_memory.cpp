#include "daemon/process_memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace nvshare::daemon {

std::optional<uint64_t> rss_anon_of(std::string_view proc_status)
{
    constexpr std::string_view key = "\nRssAnon:";
    const size_t at = proc_status.find(key);
    if (at == std::string_view::npos)
        return std::nullopt;
    size_t i = at + key.size();
    while (i < proc_status.size() && (proc_status[i] == ' ' || proc_status[i] == '\t'))
        ++i;
    uint64_t kib = 0;
    bool digits = false;
    for (; i < proc_status.size() && proc_status[i] >= '0' && proc_status[i] <= '9'; ++i) {
        if (kib > (UINT64_MAX >> 10) / 10)
            return std::nullopt;
        kib = kib * 10 + static_cast<uint64_t>(proc_status[i] - '0');
        digits = true;
    }
    if (!digits || proc_status.substr(i, 3) != " kB")
        return std::nullopt;
    return kib << 10;
}

std::optional<uint64_t> process_anon_memory(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", static_cast<int>(pid));
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return std::nullopt;
    char text[4096];  // the whole file: about 1.5 KiB
    size_t length = 0;
    for (ssize_t n;
         length < sizeof text && (n = read(fd, text + length, sizeof text - length)) > 0;)
        length += static_cast<size_t>(n);
    close(fd);
    return rss_anon_of(std::string_view(text, length));
}

}  // namespace nvshare::daemon
