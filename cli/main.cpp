// nvsharectl: look at and adjust nvshare.
#include <getopt.h>

#include <cstdio>
#include <cstring>

#include "build-config.h"
#include "cli/command.h"
#include "cli/exit_codes.h"

namespace {

void usage(FILE* out)
{
    fputs("Usage: nvsharectl [OPTIONS] COMMAND [ARGS]\n\nCommands:\n", out);
    for (const auto& c : nvshare::cli::commands()) {
        std::string left = std::string(c.name) + (c.synopsis[0] ? " " : "") + c.synopsis;
        fprintf(out, "  %-28s %s\n", left.c_str(), c.summary);
    }
    fputs(
        "\nOptions:\n"
        "      --json         machine-readable output\n"
        "  -s, --socket PATH  lock socket (default " NVSHARE_DEFAULT_SOCKET
        ")\n"
        "  -h, --help         show this help\n"
        "      --version      show the version\n"
        "\nSee nvsharectl(1).\n",
        out);
}

}  // namespace

int main(int argc, char** argv)
{
    using namespace nvshare::cli;
    GlobalOptions options;
    options.socket_path = NVSHARE_DEFAULT_SOCKET;
    enum { kJson = 256, kVersion };
    static const option long_options[] = {
        {"json", no_argument, nullptr, kJson},
        {"socket", required_argument, nullptr, 's'},
        {"help", no_argument, nullptr, 'h'},
        {"version", no_argument, nullptr, kVersion},
        {nullptr, 0, nullptr, 0},
    };
    int opt;
    // '+': stop at the command name; its own arguments follow.
    while ((opt = getopt_long(argc, argv, "+s:h", long_options, nullptr)) != -1) {
        switch (opt) {
            case kJson:
                options.json = true;
                break;
            case 's':
                options.socket_path = optarg;
                break;
            case 'h':
                usage(stdout);
                return kOk;
            case kVersion:
                puts("nvsharectl " NVSHARE_VERSION);
                return kOk;
            default:
                usage(stderr);
                return kUsage;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return kUsage;
    }
    const char* name = argv[optind];
    // --json may also follow the command ("nvsharectl status --json").
    std::vector<std::string> args;
    for (int i = optind + 1; i < argc; ++i) {
        if (strcmp(argv[i], "--json") == 0)
            options.json = true;
        else
            args.emplace_back(argv[i]);
    }
    for (const auto& c : commands()) {
        if (strcmp(c.name, name) == 0)
            return c.run(options, args);
    }
    fprintf(stderr, "nvsharectl: unknown command '%s' (see nvsharectl --help)\n", name);
    return kUsage;
}
