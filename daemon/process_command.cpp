#include "daemon/process_command.h"

#include <fcntl.h>
#include <unistd.h>

namespace nvshare::daemon {

std::string command_line_text(std::string_view proc_cmdline)
{
    while (!proc_cmdline.empty() && proc_cmdline.back() == '\0')
        proc_cmdline.remove_suffix(1);
    const bool cut = proc_cmdline.size() > kCommandLineMax;
    std::string line(proc_cmdline.substr(0, cut ? kCommandLineMax - 3 : proc_cmdline.size()));
    for (char& ch : line)
        if (ch == '\0')
            ch = ' ';
    if (cut)
        line += "...";
    return line;
}

std::string process_command_line(pid_t pid)
{
    const std::string path = "/proc/" + std::to_string(pid) + "/cmdline";
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return {};
    // One byte more than is kept, so that a longer line is seen to be cut.
    char buf[kCommandLineMax + 1];
    size_t used = 0;
    while (used < sizeof buf) {
        const ssize_t n = read(fd, buf + used, sizeof buf - used);
        if (n <= 0)
            break;
        used += static_cast<size_t>(n);
    }
    close(fd);
    return command_line_text(std::string_view(buf, used));
}

}  // namespace nvshare::daemon
