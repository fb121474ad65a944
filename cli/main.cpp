// nvsharectl: look at and adjust nvshare. The command line is CLI11's: every
// command has --help, `nvsharectl help [COMMAND]` shows the same, and a bare
// `nvsharectl` shows the status, as timedatectl does.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "build-config.h"
#include "cli/bus_commands.h"
#include "cli/command.h"
#include "cli/exit_codes.h"

namespace {

using nvshare::cli::Command;

// The top-level help: the commands first, each with its synopsis (CLI11's own
// layout would list the options first and no synopsis).
std::string top_help(const CLI::App& app)
{
    std::string out = "Usage: nvsharectl [OPTIONS] [COMMAND [ARGS]]\n\n" + app.get_description() +
                      "\n\nCommands:\n";
    const auto line = [&out](const std::string& left, const std::string& summary) {
        char buf[256];
        snprintf(buf, sizeof buf, "  %-28s %s\n", left.c_str(), summary.c_str());
        out += buf;
    };
    for (const Command& c : nvshare::cli::commands())
        line(std::string(c.name) + (c.synopsis[0] ? " " : "") + c.synopsis, c.summary);
    line("help [COMMAND]", "show this help, or that of COMMAND");
    out +=
        "\nOptions:\n"
        "      --json         machine-readable output\n"
        "  -s, --socket PATH  lock socket (default " NVSHARE_DEFAULT_SOCKET
        ")\n"
        "  -h, --help         show this help; COMMAND --help shows a command's\n"
        "      --version      show the version\n"
        "\nWithout a command, nvsharectl shows the status. See nvsharectl(1).\n";
    return out;
}

void add_status_options(CLI::App& sub, nvshare::cli::GlobalOptions& o)
{
    sub.add_flag("-l,--full", o.full, "show whole commands, however long");
    sub.add_option("--query", o.query,
                   "one line per client with these comma-separated fields (see nvsharectl(1))")
        ->type_name("FIELDS");
    sub.add_option("--format", o.format, "csv or csv,noheader (with --query)")->type_name("FORMAT");
}

// For the commands that set (or reset) either the host-wide value or a GPU's own.
void add_gpu_option(CLI::App& sub, std::string& gpu, const char* help)
{
    sub.add_option("--gpu", gpu, help)->type_name("GPU");
}

void add_cdi_options(CLI::App& sub, nvshare::cli::CdiOptions& o)
{
    sub.add_option("-o,--output", o.output, "the spec (default " + o.output + ")")
        ->type_name("PATH");
    sub.add_option("--socket-dir", o.socket_dir,
                   "the host directory to mount as the socket's (default: that of --socket)")
        ->type_name("DIR");
    sub.add_option("--library", o.library, "libnvshare.so (default " + o.library + ")")
        ->type_name("PATH");
    sub.add_option(
           "--preload-file", o.preload_file,
           "written for the container's /etc/ld.so.preload (default " + o.preload_file + ")")
        ->type_name("PATH");
    sub.add_flag("-q,--quiet", o.quiet, "generate: print nothing but errors");
}

}  // namespace

int main(int argc, char** argv)
{
    using namespace nvshare::cli;
    GlobalOptions options;
    options.socket_path = NVSHARE_DEFAULT_SOCKET;
    options.cdi.output = "/etc/cdi/nvshare.json";
    options.cdi.library = NVSHARE_PRELOAD_LIBRARY;
    options.cdi.preload_file = NVSHARE_LOCALSTATEDIR "/lib/nvshare/container-ld.so.preload";

    CLI::App app{"Look at and adjust nvshare, which shares NVIDIA GPUs among processes.",
                 "nvsharectl"};
    app.set_version_flag("--version", "nvsharectl " NVSHARE_VERSION);
    app.add_flag("--json", options.json, "machine-readable output");
    app.add_option("-s,--socket", options.socket_path, "lock socket");
    app.require_subcommand(0, 1);
    app.footer("See nvsharectl(1).");

    // Each command's arguments, in the order of its table entry.
    const auto& table = commands();
    std::vector<std::vector<std::string>> values(table.size());
    std::vector<CLI::App*> subs;
    for (size_t i = 0; i < table.size(); ++i) {
        const Command& c = table[i];
        CLI::App* sub = app.add_subcommand(c.name, c.summary);
        sub->fallthrough();  // --json and --socket may follow the command
        sub->footer(
            "Options of nvsharectl (--json, -s/--socket) may follow the command. "
            "See nvsharectl(1).");
        values[i].resize(c.arguments.size());
        for (size_t a = 0; a < c.arguments.size(); ++a) {
            auto* opt = sub->add_option(c.arguments[a].name, values[i][a], c.arguments[a].help)
                            ->type_name("");
            if (c.arguments[a].required)
                opt->required();
        }
        if (std::string(c.name) == "status")
            add_status_options(*sub, options);
        if (std::string(c.name) == "cdi")
            add_cdi_options(*sub, options.cdi);
        if (std::string(c.name) == "set-tq" || std::string(c.name) == "anti-thrashing")
            add_gpu_option(*sub, options.gpu,
                           "this GPU's own value (index or UUID, as nvsharectl status shows), "
                           "kept whatever the host-wide one becomes");
        if (std::string(c.name) == "reset")
            add_gpu_option(*sub, options.gpu,
                           "forget only this GPU's changes (index or UUID): capacity, time "
                           "quantum and mode");
        subs.push_back(sub);
    }
    std::string topic;
    CLI::App* help = app.add_subcommand("help", "show this help, or that of COMMAND");
    help->add_option("COMMAND", topic, "a command")->type_name("");
    // After the commands exist: they keep CLI11's formatter.
    app.formatter_fn(
        [](const CLI::App* a, std::string, CLI::AppFormatMode) { return top_help(*a); });

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e, std::cout, std::cerr);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e, std::cout, std::cerr);
    } catch (const CLI::ParseError& e) {
        if (app.get_subcommands().empty() && dynamic_cast<const CLI::ExtrasError*>(&e) &&
            !app.remaining().empty())
            fprintf(stderr, "nvsharectl: unknown command '%s' (see nvsharectl --help)\n",
                    app.remaining().front().c_str());
        else
            fprintf(stderr, "nvsharectl: %s (see nvsharectl%s%s --help)\n", e.what(),
                    app.get_subcommands().empty() ? "" : " ",
                    app.get_subcommands().empty()
                        ? ""
                        : app.get_subcommands().front()->get_name().c_str());
        return kUsage;
    }

    if (help->parsed()) {
        if (topic.empty()) {
            fputs(top_help(app).c_str(), stdout);
            return kOk;
        }
        for (CLI::App* sub : subs)
            if (sub->get_name() == topic) {
                fputs(sub->help("nvsharectl").c_str(), stdout);
                return kOk;
            }
        fprintf(stderr, "nvsharectl: unknown command '%s' (see nvsharectl --help)\n",
                topic.c_str());
        return kUsage;
    }
    for (size_t i = 0; i < table.size(); ++i) {
        if (!subs[i]->parsed())
            continue;
        // Optional arguments left out are not passed on.
        std::vector<std::string> args;
        for (size_t a = 0; a < table[i].arguments.size(); ++a)
            if (subs[i]->get_option(table[i].arguments[a].name)->count() > 0)
                args.push_back(values[i][a]);
        return table[i].run(options, args);
    }
    return run_status(options, {});  // bare nvsharectl
}
