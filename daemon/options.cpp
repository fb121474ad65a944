#include "daemon/options.h"

#include <getopt.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "build-config.h"
#include "common/mode.h"
#include "common/units.h"

namespace nvshare::daemon {

namespace {

constexpr const char* kUsage =
    "Usage: nvshared [OPTIONS]\n"
    "\n"
    "Arbitrates the GPU lock for processes running under libnvshare.so.\n"
    "Started by systemd through nvshare.socket, or by hand.\n"
    "\n"
    "Options:\n"
    "  -s, --socket PATH           socket to bind when not socket-activated\n"
    "                              (default " NVSHARE_DEFAULT_SOCKET
    ")\n"
    "  -q, --time-quantum DURATION longest hold while others wait, 1ms to 24h\n"
    "                              (default 30s)\n"
    "  -g, --grace DURATION        time to release after a drop request before\n"
    "                              the lock is revoked, 1ms to 24h (default 10s)\n"
    "  -m, --anti-thrashing MODE   on: GPU work always takes turns;\n"
    "                              off: everybody runs at once;\n"
    "                              auto: take turns only while the memory clients\n"
    "                              report exceeds the GPU's capacity (default)\n"
    "  -c, --capacity [UUID=]SIZE  memory the clients of a GPU may use together\n"
    "                              (default: its physical memory); repeatable\n"
    "      --idle-exit DURATION    exit after this long with no clients\n"
    "                              (socket activation starts it again)\n"
    "      --max-clients N         connections served at once (default 4096;\n"
    "                              root is served beyond it)\n"
    "      --max-clients-per-user N\n"
    "                              connections of one user other than root\n"
    "                              (default 64)\n"
    "      --quantum-ceiling DURATION\n"
    "                              the longest a client's own swap-in reports\n"
    "                              may stretch its quantum to (default 60s)\n"
    "      --gpu-info-dir DIR      where the driver lists the host's GPUs\n"
    "                              (default /proc/driver/nvidia/gpus)\n"
    "      --config FILE           settings file, see nvshare.conf(5) (default\n"
    "                              " NVSHARE_SYSCONFDIR
    "/nvshare/nvshare.conf)\n"
    "      --state-dir DIR         where changes made at run time are kept\n"
    "                              (default $STATE_DIRECTORY, else\n"
    "                              " NVSHARE_LOCALSTATEDIR
    "/lib/nvshare)\n"
    "      --no-bus                do not offer the D-Bus interface\n"
    "  -v, --verbose               log debug messages\n"
    "  -h, --help                  show this help\n"
    "      --version               show the version\n"
    "\n"
    "DURATION: 30s, 500ms, 2min or plain seconds. SIZE: 16G, 512M, or bytes.\n"
    "Settings: built-in defaults < config file < these options < changes made\n"
    "at run time over D-Bus (kept in the state directory until nvsharectl reset).\n"
    "See nvshared(8).\n";

enum LongOnly {
    kIdleExit = 256,
    kMaxClients,
    kMaxClientsPerUser,
    kQuantumCeiling,
    kVersion,
    kConfig,
    kStateDir,
    kNoBus,
    kGpuInfoDir
};

constexpr option kLongOptions[] = {
    {"socket", required_argument, nullptr, 's'},
    {"time-quantum", required_argument, nullptr, 'q'},
    {"grace", required_argument, nullptr, 'g'},
    {"anti-thrashing", required_argument, nullptr, 'm'},
    {"capacity", required_argument, nullptr, 'c'},
    {"idle-exit", required_argument, nullptr, kIdleExit},
    {"max-clients", required_argument, nullptr, kMaxClients},
    {"max-clients-per-user", required_argument, nullptr, kMaxClientsPerUser},
    {"quantum-ceiling", required_argument, nullptr, kQuantumCeiling},
    {"gpu-info-dir", required_argument, nullptr, kGpuInfoDir},
    {"config", required_argument, nullptr, kConfig},
    {"state-dir", required_argument, nullptr, kStateDir},
    {"no-bus", no_argument, nullptr, kNoBus},
    {"verbose", no_argument, nullptr, 'v'},
    {"help", no_argument, nullptr, 'h'},
    {"version", no_argument, nullptr, kVersion},
    {nullptr, 0, nullptr, 0},
};

ParsedOptions fail(const char* what, const char* value)
{
    // At error priority, so that `journalctl -p err` shows why it did not start.
    NVS_ERROR("invalid %s: '%s' (see nvshared --help)", what, value);
    return {false, 2, {}};
}

// systemd's StateDirectory= passes the directory it made (the first of a
// colon-separated list).
std::string default_state_dir()
{
    const char* env = getenv("STATE_DIRECTORY");
    if (env != nullptr && env[0] == '/') {
        const std::string_view dirs(env);
        return std::string(dirs.substr(0, dirs.find(':')));
    }
    return NVSHARE_LOCALSTATEDIR "/lib/nvshare";
}

}  // namespace

ParsedOptions parse_options(int argc, char** argv)
{
    ParsedOptions r;
    r.options.socket_path = NVSHARE_DEFAULT_SOCKET;
    r.options.config_path = NVSHARE_SYSCONFDIR "/nvshare/nvshare.conf";
    r.options.state_dir = default_state_dir();
    SettingsLayer& cli = r.options.command_line;
    optind = 1;
    opterr = 0;  // getopt's own messages carry no priority: ours do
    int opt;
    while ((opt = getopt_long(argc, argv, "s:q:g:m:c:vh", kLongOptions, nullptr)) != -1) {
        switch (opt) {
            case 's':
                if (optarg[0] != '/')
                    return fail("socket path (must be absolute)", optarg);
                r.options.socket_path = optarg;
                break;
            case 'q': {
                auto d = parse_duration(optarg);
                if (!d || !valid_time_quantum(*d))
                    return fail("time quantum (1ms to 24h)", optarg);
                cli.time_quantum = *d;
                break;
            }
            case 'g': {
                auto d = parse_duration(optarg);
                if (!d || !valid_time_quantum(*d))
                    return fail("grace period (1ms to 24h)", optarg);
                cli.grace = *d;
                break;
            }
            case 'm': {
                auto m = parse_mode(optarg);
                if (!m)
                    return fail("anti-thrashing mode (on, off or auto)", optarg);
                cli.mode = *m;
                break;
            }
            case 'c': {
                std::string_view arg(optarg);
                const auto eq = arg.find('=');
                auto size = parse_size(eq == std::string_view::npos ? arg : arg.substr(eq + 1));
                if (!size || *size == 0)
                    return fail("capacity", optarg);
                if (eq == std::string_view::npos)
                    cli.default_capacity = *size;
                else
                    cli.capacities[std::string(arg.substr(0, eq))] = *size;
                break;
            }
            case kIdleExit: {
                auto d = parse_duration(optarg);
                if (!d)
                    return fail("idle exit time", optarg);
                if (d->count() > 0)
                    r.options.idle_exit = *d;
                break;
            }
            case kMaxClients:
            case kMaxClientsPerUser: {
                char* end = nullptr;
                const long n = strtol(optarg, &end, 10);
                if (*end != '\0' || n < 1 || n > static_cast<long>(kMaxClientsLimit))
                    return fail("client limit (1 to 1000000)", optarg);
                (opt == kMaxClients ? r.options.max_clients : r.options.max_clients_per_user) =
                    static_cast<size_t>(n);
                break;
            }
            case kQuantumCeiling: {
                auto d = parse_duration(optarg);
                if (!d || !valid_time_quantum(*d))
                    return fail("quantum ceiling (1ms to 24h)", optarg);
                r.options.scheduler.quantum_ceiling = *d;
                break;
            }
            case kConfig:
                r.options.config_path = optarg;
                r.options.config_given = true;
                break;
            case kStateDir:
                if (optarg[0] != '/')
                    return fail("state directory (must be absolute)", optarg);
                r.options.state_dir = optarg;
                break;
            case kNoBus:
                r.options.bus = false;
                break;
            case kGpuInfoDir:
                r.options.gpu_info_dir = optarg;
                break;
            case 'v':
                r.options.log_level = LogLevel::Debug;
                break;
            case 'h':
                fputs(kUsage, stdout);
                return {false, 0, {}};
            case kVersion:
                puts("nvshared " NVSHARE_VERSION);
                return {false, 0, {}};
            default:
                NVS_ERROR("unknown option or missing argument: '%s' (see nvshared --help)",
                          argv[optind - 1]);
                return {false, 2, {}};
        }
    }
    if (optind < argc)
        return fail("argument", argv[optind]);
    r.run = true;
    return r;
}

}  // namespace nvshare::daemon
