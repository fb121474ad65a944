// nvshared's command line, parsed without running anything.
#include "daemon/options.h"

#include <gtest/gtest.h>

#include "build-config.h"

using namespace nvshare::daemon;
using namespace std::chrono_literals;

namespace {

ParsedOptions parse(std::vector<std::string> args)
{
    args.insert(args.begin(), "nvshared");
    std::vector<const char*> argv;
    for (const std::string& arg : args)
        argv.push_back(arg.c_str());
    return parse_options(static_cast<int>(argv.size()), argv.data(), default_options(nullptr));
}

// An invalid command line: exit status 2, nothing for stdout, the error.
std::string error_of(const std::vector<std::string>& args)
{
    const ParsedOptions r = parse(args);
    EXPECT_FALSE(r.run) << args.front();
    EXPECT_EQ(r.exit_code, 2) << args.front();
    EXPECT_TRUE(r.output.empty()) << args.front();
    EXPECT_NE(r.error.find("(see nvshared --help)"), std::string::npos) << r.error;
    return r.error;
}

TEST(Options, HelpAndVersionPrintAndExitZero)
{
    for (const char* help : {"--help", "-h"}) {
        const ParsedOptions r = parse({"--verbose", help});
        EXPECT_FALSE(r.run);
        EXPECT_EQ(r.exit_code, 0);
        EXPECT_EQ(r.output.rfind("Usage: nvshared [OPTIONS]\n", 0), 0u) << r.output;
        EXPECT_NE(r.output.find("--log-waits-after DURATION"), std::string::npos);
        EXPECT_TRUE(r.error.empty()) << r.error;
    }
    const ParsedOptions r = parse({"--version"});
    EXPECT_FALSE(r.run);
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.output, "nvshared " NVSHARE_VERSION "\n");
}

TEST(Options, NoneGiveTheDefaults)
{
    const ParsedOptions r = parse({});
    ASSERT_TRUE(r.run) << r.error;
    const Options& o = r.options;
    EXPECT_EQ(o.socket_path, NVSHARE_DEFAULT_SOCKET);
    EXPECT_EQ(o.config_path, NVSHARE_SYSCONFDIR "/nvshare/nvshare.conf");
    EXPECT_FALSE(o.config_given);
    EXPECT_EQ(o.state_dir, NVSHARE_LOCALSTATEDIR "/lib/nvshare");
    EXPECT_TRUE(o.bus);
    EXPECT_TRUE(o.command_line.empty());
    EXPECT_FALSE(o.idle_exit);
    EXPECT_EQ(o.max_clients, 4096u);
    EXPECT_EQ(o.max_clients_per_user, 64u);
    EXPECT_EQ(o.log_waits_after, Duration(1s));
    EXPECT_EQ(o.gpu_info_dir, "/proc/driver/nvidia/gpus");
    EXPECT_EQ(o.log_level, nvshare::LogLevel::Info);
}

TEST(Options, StateDirectoryFromTheEnvironment)
{
    EXPECT_EQ(default_options("/var/lib/a:/var/lib/b").state_dir, "/var/lib/a");
    EXPECT_EQ(default_options("relative").state_dir, NVSHARE_LOCALSTATEDIR "/lib/nvshare");
    EXPECT_EQ(default_options("").state_dir, NVSHARE_LOCALSTATEDIR "/lib/nvshare");
}

TEST(Options, EveryOption)
{
    const ParsedOptions r = parse({"--socket",
                                   "/tmp/s.sock",
                                   "--time-quantum",
                                   "2min",
                                   "--grace",
                                   "500ms",
                                   "--anti-thrashing",
                                   "on",
                                   "--capacity",
                                   "16G",
                                   "--capacity",
                                   "GPU-aa=8G",
                                   "--idle-exit",
                                   "5min",
                                   "--max-clients",
                                   "10",
                                   "--max-clients-per-user",
                                   "3",
                                   "--quantum-ceiling",
                                   "90s",
                                   "--log-waits-after",
                                   "250ms",
                                   "--gpu-info-dir",
                                   "gpus",
                                   "--config",
                                   "/etc/x.conf",
                                   "--state-dir",
                                   "/var/x",
                                   "--no-bus",
                                   "--verbose"});
    ASSERT_TRUE(r.run) << r.error;
    const Options& o = r.options;
    EXPECT_EQ(o.socket_path, "/tmp/s.sock");
    EXPECT_EQ(o.command_line.time_quantum, Duration(2min));
    EXPECT_EQ(o.command_line.grace, Duration(500ms));
    EXPECT_EQ(o.command_line.mode, Mode::On);
    EXPECT_EQ(o.command_line.default_capacity, 16ull << 30);
    EXPECT_EQ(o.command_line.capacities.at("GPU-aa"), 8ull << 30);
    EXPECT_EQ(o.idle_exit, std::chrono::microseconds(5min));
    EXPECT_EQ(o.max_clients, 10u);
    EXPECT_EQ(o.max_clients_per_user, 3u);
    EXPECT_EQ(o.scheduler.quantum_ceiling, Duration(90s));
    EXPECT_EQ(o.command_line.log_waits_after, Duration(250ms));
    EXPECT_EQ(o.gpu_info_dir, "gpus");
    EXPECT_EQ(o.config_path, "/etc/x.conf");
    EXPECT_TRUE(o.config_given);
    EXPECT_EQ(o.state_dir, "/var/x");
    EXPECT_FALSE(o.bus);
    EXPECT_EQ(o.log_level, nvshare::LogLevel::Debug);
    // Settings reach the effective ones only through the layers (main).
    EXPECT_EQ(o.log_waits_after, Duration(1s));
    EXPECT_EQ(o.scheduler.time_quantum, SchedulerSettings{}.time_quantum);
}

TEST(Options, ShortFormsAttachedValuesAndRepeats)
{
    const ParsedOptions r = parse({"-s/tmp/a", "-q", "1s", "-q=", "-g2s", "-mauto", "-c", "1G",
                                   "-c", "2G", "-v", "--log-waits-after=0", "--idle-exit=0"});
    // "-q=" is the value "=": an invalid duration, as getopt had it.
    EXPECT_EQ(r.error, "invalid time quantum (1ms to 24h): '=' (see nvshared --help)");

    const ParsedOptions ok =
        parse({"-s/tmp/a", "-q", "1s", "-q", "3s", "-g2s", "-mauto", "-c", "1G", "-c", "2G", "-vc",
               "GPU-bb=1G", "--log-waits-after=0", "--idle-exit=1h", "--idle-exit=0"});
    ASSERT_TRUE(ok.run) << ok.error;
    EXPECT_EQ(ok.options.socket_path, "/tmp/a");
    EXPECT_EQ(ok.options.command_line.time_quantum, Duration(3s));  // the last one
    EXPECT_EQ(ok.options.command_line.grace, Duration(2s));
    EXPECT_EQ(ok.options.command_line.mode, Mode::Auto);
    EXPECT_EQ(ok.options.command_line.default_capacity, 2ull << 30);
    EXPECT_EQ(ok.options.command_line.capacities.at("GPU-bb"), 1ull << 30);
    EXPECT_EQ(ok.options.log_level, nvshare::LogLevel::Debug);
    EXPECT_EQ(ok.options.command_line.log_waits_after, Duration(0));
    EXPECT_FALSE(ok.options.idle_exit);  // 0: never exit
}

TEST(Options, GpusOwnTimeQuantumAndMode)
{
    const ParsedOptions r = parse({"-q", "2min", "--time-quantum", "GPU-aa=500ms", "-q",
                                   "GPU-aa=1s", "-m", "GPU-bb=on", "--anti-thrashing", "off"});
    ASSERT_TRUE(r.run) << r.error;
    const SettingsLayer& cli = r.options.command_line;
    EXPECT_EQ(cli.time_quantum, Duration(2min));
    EXPECT_EQ(cli.mode, Mode::Off);
    EXPECT_EQ(cli.gpu_time_quanta, (std::map<std::string, Duration>{{"GPU-aa", 1s}}));
    EXPECT_EQ(cli.gpu_modes, (std::map<std::string, Mode>{{"GPU-bb", Mode::On}}));
}

TEST(Options, BadValuesSayWhatAndWhy)
{
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--socket", "relative.sock"}, "invalid socket path (must be absolute): 'relative.sock'"},
        {{"--time-quantum", "0"}, "invalid time quantum (1ms to 24h): '0'"},
        {{"-q", "25h"}, "invalid time quantum (1ms to 24h): '25h'"},
        {{"--grace", "soon"}, "invalid grace period (1ms to 24h): 'soon'"},
        {{"--anti-thrashing", "sometimes"},
         "invalid anti-thrashing mode (on, off or auto): 'sometimes'"},
        {{"--capacity", "0"}, "invalid capacity (1 byte to 8 TiB): '0'"},
        {{"--capacity", "GPU-aa=lots"}, "invalid capacity (1 byte to 8 TiB): 'GPU-aa=lots'"},
        {{"--capacity", "=8G"}, "invalid capacity (1 byte to 8 TiB): '=8G'"},
        {{"--capacity", "9T"}, "invalid capacity (1 byte to 8 TiB): '9T'"},
        {{"--capacity", "10000000000000000000"},
         "invalid capacity (1 byte to 8 TiB): '10000000000000000000'"},
        {{"--time-quantum", "GPU-aa=0"}, "invalid time quantum (1ms to 24h): 'GPU-aa=0'"},
        {{"-q", "=1s"}, "invalid time quantum (1ms to 24h): '=1s'"},
        {{"--anti-thrashing", "GPU-aa=sometimes"},
         "invalid anti-thrashing mode (on, off or auto): 'GPU-aa=sometimes'"},
        {{"--idle-exit=bogus"}, "invalid idle exit time: 'bogus'"},
        {{"--idle-exit="}, "invalid idle exit time: ''"},
        {{"--max-clients", "0"}, "invalid client limit (1 to 1000000): '0'"},
        {{"--max-clients-per-user", "1000001"}, "invalid client limit (1 to 1000000): '1000001'"},
        {{"--max-clients", "12x"}, "invalid client limit (1 to 1000000): '12x'"},
        {{"--quantum-ceiling", "0"}, "invalid quantum ceiling (1ms to 24h): '0'"},
        {{"--log-waits-after", "25h"}, "invalid wait logging threshold (0 to 24h): '25h'"},
        {{"--log-waits-after", "-1s"}, "invalid wait logging threshold (0 to 24h): '-1s'"},
        {{"--state-dir", "var/lib"}, "invalid state directory (must be absolute): 'var/lib'"},
    };
    for (const auto& [args, message] : cases)
        EXPECT_EQ(error_of(args), message + " (see nvshared --help)");
}

TEST(Options, CommandLineMistakes)
{
    EXPECT_EQ(error_of({"--no-such-option"}),
              "unknown option: '--no-such-option' (see nvshared --help)");
    EXPECT_EQ(error_of({"-x"}), "unknown option: '-x' (see nvshared --help)");
    // Abbreviations are not options (getopt_long took unambiguous ones).
    EXPECT_EQ(error_of({"--time", "30s"}), "unknown option: '--time' (see nvshared --help)");
    EXPECT_EQ(error_of({"stray"}), "invalid argument: 'stray' (see nvshared --help)");
    EXPECT_EQ(error_of({"--", "-q"}), "invalid argument: '-q' (see nvshared --help)");
    EXPECT_EQ(error_of({"--capacity"}), "missing value for '--capacity' (see nvshared --help)");
    // An option where a value belongs: the value was left out.
    EXPECT_EQ(error_of({"--time-quantum", "--help"}),
              "missing value for '--time-quantum' before '--help' (see nvshared --help)");
    EXPECT_EQ(error_of({"-c", "-v"}),
              "missing value for '--capacity' before '-v' (see nvshared --help)");
    EXPECT_EQ(error_of({"--verbose=no"}),
              "option '--verbose' takes no value (see nvshared --help)");
    // The first mistake on the line is the one reported.
    EXPECT_EQ(error_of({"--grace", "x", "--time-quantum", "y"}),
              "invalid grace period (1ms to 24h): 'x' (see nvshared --help)");
    // A trailing "--" is no argument.
    EXPECT_TRUE(parse({"--no-bus", "--"}).run);
}

}  // namespace
