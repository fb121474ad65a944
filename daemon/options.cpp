#include "daemon/options.h"

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <string_view>

#include "build-config.h"
#include "common/mode.h"
#include "common/units.h"

namespace nvshare::daemon {

namespace {

// Built once: the ranges come from their constants (common/time_quantum.h,
// daemon/settings.h).
const std::string& usage()
{
    static const std::string text =
        std::string(
            "Usage: nvshared [OPTIONS]\n"
            "\n"
            "Arbitrates the GPU lock for processes running under libnvshare.so.\n"
            "Started by systemd through nvshare.socket, or by hand.\n"
            "\n"
            "Options:\n"
            "  -s, --socket PATH           socket to bind when not socket-activated\n"
            "                              (default " NVSHARE_DEFAULT_SOCKET
            ")\n"
            "  -q, --time-quantum [UUID=]DURATION\n"
            "                              longest hold while others wait, ") +
        kTimeQuantumRange +
        "\n"
        "                              (default 30s); UUID=: one GPU's own; repeatable\n"
        "  -g, --grace DURATION        time to release after a drop request before\n"
        "                              the lock is revoked, " +
        kTimeQuantumRange +
        " (default 10s)\n"
        "  -m, --anti-thrashing [UUID=]MODE\n"
        "                              on: GPU work always takes turns;\n"
        "                              off: everybody runs at once;\n"
        "                              auto: take turns only while the memory clients\n"
        "                              report exceeds the GPU's capacity (default);\n"
        "                              UUID=: one GPU's own; repeatable\n"
        "  -c, --capacity [UUID=]SIZE  memory the clients of a GPU may use together\n"
        "                              (1 byte to 8 TiB; default: its physical memory);\n"
        "                              repeatable\n"
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
        "      --log-waits-after DURATION\n"
        "                              log a client's wait once it has lasted this\n"
        "                              long, " +
        kWaitLogRange +
        "; 0 logs every wait (default 1s)\n"
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
    return text;
}

constexpr const char* kSeeHelp = " (see nvshared --help)";

// Takes one value of an option; the error message, or "" if it is valid.
using Setter = std::function<std::string(const std::string& value)>;

std::string invalid(const char* what, const std::string& value)
{
    return std::string("invalid ") + what + ": '" + value + "'" + kSeeHelp;
}

ParsedOptions stop(int exit_code, std::string output, std::string error)
{
    ParsedOptions r;
    r.exit_code = exit_code;
    r.output = std::move(output);
    r.error = std::move(error);
    return r;
}

// "time quantum (1ms to 24h)": what an error message calls a ranged value.
std::string in_range(const char* what, const char* range)
{
    return std::string(what) + " (" + range + ")";
}

// A DURATION option: parsed, checked by `valid`, handed to `set`.
Setter duration(std::string what, std::function<bool(std::chrono::microseconds)> valid,
                std::function<void(std::chrono::microseconds)> set)
{
    return [=](const std::string& value) {
        const auto d = parse_duration(value);
        if (!d || !valid(*d))
            return invalid(what.c_str(), value);
        set(*d);
        return std::string();
    };
}

Setter client_limit(size_t& limit)
{
    return [&limit](const std::string& value) {
        char* end = nullptr;
        const long n = strtol(value.c_str(), &end, 10);
        if (value.empty() || *end != '\0' || n < 1 || n > static_cast<long>(kMaxClientsLimit))
            return invalid("client limit (1 to 1000000)", value);
        limit = static_cast<size_t>(n);
        return std::string();
    };
}

// An option of the form [UUID=]VALUE: the host-wide value, or a GPU's own.
// `parse` gives VALUE's meaning, nullopt when it is invalid (`what`).
template <typename T>
Setter host_or_gpu(std::string what, std::function<std::optional<T>(std::string_view)> parse,
                   std::optional<T>& host, std::map<std::string, T>& by_gpu)
{
    return [=, &host, &by_gpu](const std::string& value) {
        const GpuSetting setting = split_gpu_setting(value);
        const std::optional<T> parsed = parse(setting.value);
        if (!parsed || (setting.uuid && setting.uuid->empty()))
            return invalid(what.c_str(), value);
        if (setting.uuid)
            by_gpu[*setting.uuid] = *parsed;
        else
            host = *parsed;
        return std::string();
    };
}

Setter absolute_path(const char* what, std::string& path)
{
    return [what, &path](const std::string& value) {
        if (!value.starts_with('/'))
            return invalid(what, value);
        path = value;
        return std::string();
    };
}

// getopt read "--name=" as an empty value, CLI11 as "--name" followed by the
// next argument: split it so that CLI11 sees the empty value too.
std::vector<std::string> with_empty_values_split(int argc, const char* const* argv)
{
    std::vector<std::string> args;
    for (int i = 0; i < argc; ++i) {
        const std::string_view arg(argv[i]);
        if (arg == "--") {
            args.insert(args.end(), argv + i, argv + argc);
            break;
        }
        if (i > 0 && arg.size() > 3 && arg.starts_with("--") && arg.ends_with('=') &&
            arg.find('=') == arg.size() - 1) {
            args.emplace_back(arg.substr(0, arg.size() - 1));
            args.emplace_back();
        } else {
            args.emplace_back(arg);
        }
    }
    return args;
}

// What CLI11 left over: an unknown option, or an argument (nvshared takes none).
std::string leftover_error(const std::vector<std::string>& leftover)
{
    bool after_separator = false;
    for (const std::string& arg : leftover) {
        if (arg == "--" && !after_separator) {
            after_separator = true;
            continue;
        }
        if (!after_separator && arg.size() > 1 && arg[0] == '-')
            return "unknown option: '" + arg + "'" + kSeeHelp;
        return invalid("argument", arg);
    }
    return "";
}

}  // namespace

Options default_options(const char* state_directory)
{
    Options o;
    o.socket_path = NVSHARE_DEFAULT_SOCKET;
    o.config_path = NVSHARE_SYSCONFDIR "/nvshare/nvshare.conf";
    o.state_dir = NVSHARE_LOCALSTATEDIR "/lib/nvshare";
    // StateDirectory= passes the directory it made, the first of a
    // colon-separated list.
    if (state_directory != nullptr && state_directory[0] == '/') {
        const std::string_view dirs(state_directory);
        o.state_dir = std::string(dirs.substr(0, dirs.find(':')));
    }
    return o;
}

ParsedOptions parse_options(int argc, const char* const* argv, Options defaults)
{
    ParsedOptions r;
    r.options = std::move(defaults);
    Options& o = r.options;
    SettingsLayer& cli = o.command_line;

    CLI::App app{"", "nvshared"};
    app.allow_extras();  // reported below, in the words of the other errors
    // Every value given is checked; the last one counts, as getopt had it.
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app.set_version_flag("--version", "nvshared " NVSHARE_VERSION);
    std::map<const CLI::Option*, Setter> setters;
    const auto option = [&](const char* names, Setter set) {
        setters[app.add_option(names)] = std::move(set);
    };
    const auto flag = [&](const char* names, std::function<void()> set) {
        CLI::Option* opt = app.add_flag(names);
        setters[opt] = [opt, set](const std::string& value) {
            if (value != "true")  // --verbose=no
                return "option '" + opt->get_name() + "' takes no value" + kSeeHelp;
            set();
            return std::string();
        };
    };

    option("-s,--socket", absolute_path("socket path (must be absolute)", o.socket_path));
    option("-q,--time-quantum",
           host_or_gpu<Duration>(
               in_range("time quantum", kTimeQuantumRange),
               [](std::string_view v) -> std::optional<Duration> {
                   const auto d = parse_duration(v);
                   return d && valid_time_quantum(*d) ? std::optional<Duration>(*d) : std::nullopt;
               },
               cli.time_quantum, cli.gpu_time_quanta));
    option("-g,--grace", duration(in_range("grace period", kTimeQuantumRange), valid_time_quantum,
                                  [&cli](auto d) { cli.grace = d; }));
    option("-m,--anti-thrashing", host_or_gpu<Mode>("anti-thrashing mode (on, off or auto)",
                                                    parse_mode, cli.mode, cli.gpu_modes));
    option("-c,--capacity", host_or_gpu<uint64_t>(
                                in_range("capacity", kCapacityRange),
                                [](std::string_view v) {
                                    const auto size = parse_size(v);
                                    return size && valid_capacity(*size) ? size : std::nullopt;
                                },
                                cli.default_capacity, cli.capacities));
    const auto any_length = [](std::chrono::microseconds) { return true; };
    option("--idle-exit", duration("idle exit time", any_length, [&o](auto d) {
               o.idle_exit = d.count() > 0 ? std::optional(d) : std::nullopt;  // 0: never
           }));
    option("--max-clients", client_limit(o.max_clients));
    option("--max-clients-per-user", client_limit(o.max_clients_per_user));
    option("--quantum-ceiling",
           duration(in_range("quantum ceiling", kTimeQuantumRange), valid_time_quantum,
                    [&o](auto d) { o.scheduler.quantum_ceiling = d; }));
    option("--log-waits-after",
           duration(in_range("wait logging threshold", kWaitLogRange), valid_wait_log_threshold,
                    [&cli](auto d) { cli.log_waits_after = d; }));
    option("--gpu-info-dir", [&o](const std::string& value) {
        o.gpu_info_dir = value;
        return std::string();
    });
    option("--config", [&o](const std::string& value) {
        o.config_path = value;
        o.config_given = true;
        return std::string();
    });
    option("--state-dir", absolute_path("state directory (must be absolute)", o.state_dir));
    flag("--no-bus", [&o] { o.bus = false; });
    flag("-v,--verbose", [&o] { o.log_level = LogLevel::Debug; });

    const std::vector<std::string> args = with_empty_values_split(argc, argv);
    std::vector<const char*> split_argv;
    for (const std::string& arg : args)
        split_argv.push_back(arg.c_str());
    try {
        app.parse(static_cast<int>(split_argv.size()), split_argv.data());
    } catch (const CLI::CallForHelp&) {
        return stop(0, usage(), "");
    } catch (const CLI::CallForVersion& e) {
        return stop(0, std::string(e.what()) + "\n", "");
    } catch (const CLI::ArgumentMismatch&) {
        // Values are taken whatever they look like: only the last argument
        // can be left without one.
        return stop(2, "", "missing value for '" + args.back() + "'" + kSeeHelp);
    } catch (const CLI::ParseError& e) {
        return stop(2, "", std::string(e.what()) + kSeeHelp);
    }
    if (std::string error = leftover_error(app.remaining()); !error.empty())
        return stop(2, "", error);
    // In the order given, so that the first mistake is the one reported.
    std::map<const CLI::Option*, size_t> taken;
    for (const CLI::Option* opt : app.parse_order()) {
        const std::string& value = opt->results().at(taken[opt]++);
        // Values are taken whatever they look like: "-q --help" lacks one.
        if (opt->get_expected_min() > 0 && value.starts_with('-') &&
            app.get_option_no_throw(value) != nullptr)
            return stop(
                2, "",
                "missing value for '" + opt->get_name() + "' before '" + value + "'" + kSeeHelp);
        if (std::string error = setters.at(opt)(value); !error.empty())
            return stop(2, "", error);
    }
    r.run = true;
    return r;
}

void apply_layer(const SettingsLayer& layer, Options& options)
{
    if (layer.mode)
        options.scheduler.mode = *layer.mode;
    if (layer.time_quantum)
        options.scheduler.time_quantum = *layer.time_quantum;
    if (layer.grace)
        options.scheduler.grace = *layer.grace;
    if (layer.log_waits_after)
        options.log_waits_after = *layer.log_waits_after;
    if (layer.default_capacity)
        options.default_capacity = layer.default_capacity;
    for (const auto& [uuid, bytes] : layer.capacities)
        options.capacities[uuid] = bytes;
    if (!layer.priority_rules.empty())
        options.priority_rules = layer.priority_rules;
    for (const auto& [uuid, mode] : layer.gpu_modes)
        options.gpu_modes[uuid] = mode;
    for (const auto& [uuid, tq] : layer.gpu_time_quanta)
        options.gpu_time_quanta[uuid] = tq;
}

uint64_t configured_capacity(const Options& options, const GpuDescription& gpu)
{
    if (const auto it = options.capacities.find(gpu.uuid); it != options.capacities.end())
        return it->second;
    return options.default_capacity.value_or(gpu.physical_memory);
}

}  // namespace nvshare::daemon
