#include "tests/support/private_bus.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

#include "tests/support/files.h"
#include "tests/support/programs.h"

namespace nvshare::test {

PrivateBus::PrivateBus()
{
    const std::string config = required_env("NVSHARE_TEST_BUS_CONFIG");
    process_ = Process(
        {.argv = {"dbus-daemon", "--config-file=" + config, "--nofork", "--print-address=1"},
         .pipe_stdout = true,
         // "Failed to set fd limit" when not root
         .stderr_path = "/dev/null",
         .append_output = true});
    // The address is the first line dbus-daemon prints, once it listens.
    std::string line;
    pollfd p{process_.stdout_fd(), POLLIN, 0};
    while (line.find('\n') == std::string::npos && poll(&p, 1, 10000) > 0) {
        char buf[512];
        const ssize_t n = read(process_.stdout_fd(), buf, sizeof buf);
        if (n <= 0)
            break;
        line.append(buf, static_cast<size_t>(n));
    }
    if (line.find('\n') == std::string::npos)
        throw std::runtime_error("dbus-daemon did not start with " + config);
    address_ = line.substr(0, line.find('\n'));
    setenv("DBUS_SYSTEM_BUS_ADDRESS", address_.c_str(), 1);
}

PrivateBus::~PrivateBus()
{
    unsetenv("DBUS_SYSTEM_BUS_ADDRESS");
    process_.stop(SIGTERM);
}

bool PrivateBus::has_owner(const std::string& name) const
{
    const auto r =
        run({"busctl", "--system", "call", "org.freedesktop.DBus", "/org/freedesktop/DBus",
             "org.freedesktop.DBus", "NameHasOwner", "s", name});
    return r.status == 0 && r.out == "b true\n";
}

std::unique_ptr<Daemon> start_nvshared(const TempDir& dir, const PrivateBus& bus,
                                       const std::vector<std::string>& extra)
{
    if (!file_exists(dir / "nvshare.conf"))
        write_text(dir / "nvshare.conf", "");
    auto daemon = std::make_unique<Daemon>(dir);
    Daemon::Config config;
    config.args = {"--state-dir", dir / "state", "--config", dir / "nvshare.conf"};
    config.args.insert(config.args.end(), extra.begin(), extra.end());
    config.env["DBUS_SYSTEM_BUS_ADDRESS"] = bus.address();
    daemon->start(config);
    return daemon;
}

}  // namespace nvshare::test
