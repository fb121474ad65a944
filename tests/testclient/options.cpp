#include "tests/testclient/options.h"

#include <getopt.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "common/units.h"
#include "tests/support/test_gpu.h"

namespace nvshare::testclient {

namespace {

constexpr const char* kUsage =
    "Usage: nvshare-testclient --socket PATH [OPTIONS]\n"
    "\n"
    "A scripted client of nvshared's lock socket, for the integration tests.\n"
    "Prints one line per event: '<CLOCK_MONOTONIC ns> <event> key=value...';\n"
    "events: welcome, settings, memory, request, grant, contended, drop,\n"
    "revoked, released, closing, error, eof, timeout, done.\n"
    "\n"
    "Options:\n"
    "  --socket PATH         the daemon's socket (required)\n"
    "  --gpu N[:SIZE]        register test GPU number N (0-255) with SIZE bytes\n"
    "                        of memory (default 16G); repeatable, in Hello order;\n"
    "                        default: one GPU, number 0\n"
    "  --mem GPU=SIZE        report SIZE bytes in use on local GPU index GPU\n"
    "                        after the Welcome; repeatable\n"
    "  --mask M              GPUs to request, as a client-local bit mask\n"
    "                        (default: all registered GPUs)\n"
    "  --cycles K            request/hold/release K times (default 1; 0: only\n"
    "                        register, then wait for EOF on stdin)\n"
    "  --hold DURATION       how long to hold each grant (default 0)\n"
    "  --hold-until-stdin    hold until a line or EOF arrives on stdin\n"
    "  --ignore-drop         keep holding after a Drop (until revoked)\n"
    "  --exit-slowly DURATION  at the end of the first hold, exit without a\n"
    "                        Release: the main thread ends, then the connection\n"
    "                        closes, and the process ends DURATION later (as one\n"
    "                        whose driver frees its GPU memory)\n"
    "  --comm NAME           process name claimed in the Hello (default testclient)\n"
    "  --timeout DURATION    give up waiting for the daemon after this (default 20s)\n"
    "\n"
    "Exit status: 0 done, 1 error/disconnect/timeout, 2 usage, 3 cannot connect,\n"
    "4 done but the lock was revoked at least once.\n";

enum Opt {
    kSocket = 256,
    kGpu,
    kMem,
    kMask,
    kCycles,
    kHold,
    kHoldUntilStdin,
    kIgnoreDrop,
    kExitSlowly,
    kComm,
    kTimeout,
    kHelp,
};

constexpr option kLongOptions[] = {
    {"socket", required_argument, nullptr, kSocket},
    {"gpu", required_argument, nullptr, kGpu},
    {"mem", required_argument, nullptr, kMem},
    {"mask", required_argument, nullptr, kMask},
    {"cycles", required_argument, nullptr, kCycles},
    {"hold", required_argument, nullptr, kHold},
    {"hold-until-stdin", no_argument, nullptr, kHoldUntilStdin},
    {"ignore-drop", no_argument, nullptr, kIgnoreDrop},
    {"exit-slowly", required_argument, nullptr, kExitSlowly},
    {"comm", required_argument, nullptr, kComm},
    {"timeout", required_argument, nullptr, kTimeout},
    {"help", no_argument, nullptr, kHelp},
    {nullptr, 0, nullptr, 0},
};

ParsedOptions usage_error(const char* what, const char* value)
{
    fprintf(stderr, "nvshare-testclient: invalid %s: '%s'\n", what, value);
    return {false, 2, {}};
}

std::optional<unsigned long long> parse_number(std::string_view text, unsigned long long max)
{
    if (text.empty())
        return std::nullopt;
    const std::string s(text);
    char* end = nullptr;
    const unsigned long long n = strtoull(s.c_str(), &end, 0);
    if (*end != '\0' || n > max || s[0] == '-')
        return std::nullopt;
    return n;
}

std::optional<std::chrono::milliseconds> parse_ms(const char* text)
{
    const auto d = parse_duration(text);
    if (!d)
        return std::nullopt;
    return std::chrono::duration_cast<std::chrono::milliseconds>(*d);
}

}  // namespace

ParsedOptions parse_options(int argc, char** argv)
{
    ParsedOptions r;
    Options& o = r.options;
    optind = 1;
    int opt;
    while ((opt = getopt_long(argc, argv, "", kLongOptions, nullptr)) != -1) {
        switch (opt) {
            case kSocket:
                o.socket_path = optarg;
                break;
            case kGpu: {
                const std::string_view arg(optarg);
                const auto colon = arg.find(':');
                const auto number = parse_number(arg.substr(0, colon), 255);
                std::optional<uint64_t> size = uint64_t{16} << 30;
                if (colon != std::string_view::npos)
                    size = parse_size(arg.substr(colon + 1));
                if (!number || !size)
                    return usage_error("GPU", optarg);
                o.gpus.push_back(test::test_gpu(static_cast<uint8_t>(*number), *size));
                break;
            }
            case kMem: {
                const std::string_view arg(optarg);
                const auto eq = arg.find('=');
                if (eq == std::string_view::npos)
                    return usage_error("memory report", optarg);
                const auto gpu = parse_number(arg.substr(0, eq), 63);
                const auto size = parse_size(arg.substr(eq + 1));
                if (!gpu || !size)
                    return usage_error("memory report", optarg);
                o.memory.emplace_back(static_cast<uint32_t>(*gpu), *size);
                break;
            }
            case kMask: {
                const auto mask = parse_number(optarg, UINT64_MAX);
                if (!mask)
                    return usage_error("mask", optarg);
                o.mask = *mask;
                break;
            }
            case kCycles: {
                const auto n = parse_number(optarg, 10000000);
                if (!n)
                    return usage_error("cycle count", optarg);
                o.cycles = static_cast<unsigned>(*n);
                break;
            }
            case kHold: {
                const auto d = parse_ms(optarg);
                if (!d)
                    return usage_error("hold time", optarg);
                o.hold = *d;
                break;
            }
            case kHoldUntilStdin:
                o.hold_until_stdin = true;
                break;
            case kIgnoreDrop:
                o.ignore_drop = true;
                break;
            case kExitSlowly: {
                const auto d = parse_ms(optarg);
                if (!d)
                    return usage_error("exit time", optarg);
                o.exit_slowly = *d;
                break;
            }
            case kComm:
                o.comm = optarg;
                break;
            case kTimeout: {
                const auto d = parse_ms(optarg);
                if (!d || d->count() <= 0)
                    return usage_error("timeout", optarg);
                o.timeout = *d;
                break;
            }
            case kHelp:
                fputs(kUsage, stdout);
                return {false, 0, {}};
            default:
                fputs(kUsage, stderr);
                return {false, 2, {}};
        }
    }
    if (optind < argc)
        return usage_error("argument", argv[optind]);
    if (o.socket_path.empty()) {
        fputs("nvshare-testclient: --socket is required\n", stderr);
        return {false, 2, {}};
    }
    if (o.gpus.empty())
        o.gpus.push_back(test::test_gpu(0, uint64_t{16} << 30));
    r.run = true;
    return r;
}

}  // namespace nvshare::testclient
