#include "preload/exclusion.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "build-config.h"

const char* const nvshare_exclusion_list_path = NVSHARE_SYSCONFDIR "/nvshare/preload-exclude.conf";
const char* const nvshare_plain_list_path = NVSHARE_SYSCONFDIR "/nvshare/preload-plain.conf";

namespace {

// The kernel keeps 15 characters of a process name (TASK_COMM_LEN - 1).
constexpr size_t kCommChars = 15;

bool is_blank(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r';
}

bool equals(const char* s, size_t s_len, const char* entry, size_t entry_len)
{
    return s_len == entry_len && memcmp(s, entry, entry_len) == 0;
}

bool matches(const char* exe_path, const char* comm, const char* entry, size_t len)
{
    if (entry[0] == '/')
        return exe_path != nullptr && equals(exe_path, strlen(exe_path), entry, len);
    if (exe_path != nullptr) {
        const char* slash = strrchr(exe_path, '/');
        const char* base = slash != nullptr ? slash + 1 : exe_path;
        if (equals(base, strlen(base), entry, len))
            return true;
    }
    if (comm != nullptr) {
        const size_t comm_len = strlen(comm);
        if (len <= kCommChars)
            return equals(comm, comm_len, entry, len);
        return comm_len == kCommChars && memcmp(comm, entry, kCommChars) == 0;
    }
    return false;
}

}  // namespace

bool nvshare_is_excluded(const char* exe_path, const char* comm, const char* list_text)
{
    static constexpr char kDaemon[] = "nvshared";
    return matches(exe_path, comm, kDaemon, sizeof kDaemon - 1) ||
           nvshare_is_listed(exe_path, comm, list_text);
}

bool nvshare_is_listed(const char* exe_path, const char* comm, const char* list_text)
{
    if (list_text == nullptr)
        return false;
    const char* line = list_text;
    while (*line != '\0') {
        const char* end = strchr(line, '\n');
        if (end == nullptr)
            end = line + strlen(line);
        const char* stop =
            static_cast<const char*>(memchr(line, '#', static_cast<size_t>(end - line)));
        if (stop == nullptr)
            stop = end;
        const char* start = line;
        while (start < stop && is_blank(*start))
            ++start;
        while (stop > start && is_blank(stop[-1]))
            --stop;
        if (stop > start && matches(exe_path, comm, start, static_cast<size_t>(stop - start)))
            return true;
        line = *end == '\n' ? end + 1 : end;
    }
    return false;
}

size_t nvshare_load_exclusion_list(const char* path, char* buf, size_t size)
{
    if (buf == nullptr || size == 0)
        return 0;
    buf[0] = '\0';
    // O_NONBLOCK: a FIFO put there must not hang the host process.
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return 0;
    struct stat st;
    // The system call, not fstat(): glibc exports fstat only since 2.33, and
    // libnvshare.so asks no newer glibc than its base version (base_glibc.h).
    if (syscall(SYS_fstat, fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return 0;
    }
    size_t used = 0;
    bool truncated = false;
    for (;;) {
        if (used == size - 1) {
            char probe;
            ssize_t n;
            do
                n = read(fd, &probe, 1);
            while (n < 0 && errno == EINTR);
            truncated = n > 0;
            break;
        }
        const ssize_t n = read(fd, buf + used, size - 1 - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        used += static_cast<size_t>(n);
    }
    close(fd);
    if (truncated) {
        while (used > 0 && buf[used - 1] != '\n')
            --used;
    }
    buf[used] = '\0';
    return used;
}
