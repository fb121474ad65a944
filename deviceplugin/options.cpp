#include "deviceplugin/options.h"

#include <CLI/CLI.hpp>

#include "build-config.h"
#include "common/units.h"

namespace nvshare::deviceplugin {

namespace {

constexpr const char* kUsage =
    "Usage: nvshare-device-plugin [OPTIONS]\n"
    "\n"
    "Advertises nvshare.com/gpu to the local kubelet: a number of shares of\n"
    "each GPU nvshared schedules. See nvshare-device-plugin(8).\n"
    "\n"
    "Options:\n"
    "      --kubelet-socket PATH   the kubelet's registration socket; the plugin\n"
    "                              serves nvshare-gpu.sock in its directory\n"
    "                              (default /var/lib/kubelet/device-plugins/kubelet.sock)\n"
    "      --shares N              devices advertised per GPU, 1 to 1000 (default 10)\n"
    "      --allocation POLICY     spread: a container's shares on different GPUs;\n"
    "                              pack: on as few GPUs as possible (default spread)\n"
    "      --socket PATH           nvshared's lock socket, also given to containers\n"
    "                              (default " NVSHARE_DEFAULT_SOCKET
    ")\n"
    "      --library PATH          libnvshare.so, mounted into containers\n"
    "                              (default " NVSHARE_PRELOAD_LIBRARY
    ")\n"
    "      --preload-file PATH     the one-line file naming the library, written\n"
    "                              here and mounted at containers' /etc/ld.so.preload\n"
    "                              (default " NVSHARE_LOCALSTATEDIR
    "/lib/nvshare/container-ld.so.preload)\n"
    "      --no-write-preload-file name the preload file without writing it: the\n"
    "                              host's, which nvsharectl cdi generate writes\n"
    "                              (in a container without the host's /var/lib/nvshare)\n"
    "      --node-features PATH    write node-feature-discovery's features file here\n"
    "                              (labels nvshare.com/gpu.shared, .shares-per-gpu),\n"
    "                              removed when the plugin stops\n"
    "      --gpu-info-dir DIR      where the driver lists the host's GPUs: the\n"
    "                              ones advertised (healthy while nvshared\n"
    "                              answers and lists them)\n"
    "                              (default /proc/driver/nvidia/gpus)\n"
    "      --poll-interval DURATION\n"
    "                              how often to check GPU health and the kubelet\n"
    "                              socket (default 5s)\n"
    "      --no-cdi                answer Allocate without CDI device names (for\n"
    "                              nodes without nvshare's CDI spec)\n"
    "  -h, --help                  show this help\n"
    "      --version               show the version\n"
    "\n"
    "DURATION: 5s, 500ms, 1min or plain seconds.\n";

ParsedOptions stop(int exit_code, std::string output, std::string error)
{
    ParsedOptions r;
    r.exit_code = exit_code;
    r.output = std::move(output);
    r.error = std::move(error);
    return r;
}

std::string invalid(const char* what, const std::string& value)
{
    return std::string("invalid ") + what + ": '" + value + "' (see nvshare-device-plugin --help)";
}

}  // namespace

ParsedOptions parse_options(int argc, const char* const* argv)
{
    Options o;
    o.nvshare_socket = NVSHARE_DEFAULT_SOCKET;
    o.library = NVSHARE_PRELOAD_LIBRARY;
    // The file `nvsharectl cdi generate` writes too, with the same line.
    o.preload_file = NVSHARE_LOCALSTATEDIR "/lib/nvshare/container-ld.so.preload";
    std::string shares, policy, poll;
    bool no_cdi = false;
    bool no_write_preload_file = false;

    CLI::App app{"", "nvshare-device-plugin"};
    app.set_help_flag();  // our own text, below
    bool help = false;
    app.add_flag("-h,--help", help);
    app.set_version_flag("--version", "nvshare-device-plugin " NVSHARE_VERSION);
    app.add_option("--kubelet-socket", o.kubelet_socket);
    app.add_option("--shares", shares);
    app.add_option("--allocation", policy);
    app.add_option("--socket", o.nvshare_socket);
    app.add_option("--library", o.library);
    app.add_option("--preload-file", o.preload_file);
    app.add_flag("--no-write-preload-file", no_write_preload_file);
    app.add_option("--node-features", o.node_features);
    app.add_option("--gpu-info-dir", o.gpu_info_dir);
    app.add_option("--poll-interval", poll);
    app.add_flag("--no-cdi", no_cdi);
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForVersion& e) {
        return stop(0, e.what() + std::string("\n"), "");
    } catch (const CLI::ParseError& e) {
        return stop(2, "", std::string(e.what()) + " (see nvshare-device-plugin --help)");
    }
    if (help)
        return stop(0, kUsage, "");

    if (!shares.empty()) {
        char* end = nullptr;
        const unsigned long n = strtoul(shares.c_str(), &end, 10);
        if (*end != '\0' || shares[0] == '-' || n < 1 || n > kMaxShares)
            return stop(2, "", invalid("number of shares (1 to 1000)", shares));
        o.shares = static_cast<unsigned>(n);
    }
    if (!policy.empty()) {
        const auto p = parse_policy(policy);
        if (!p)
            return stop(2, "", invalid("allocation policy (spread or pack)", policy));
        o.policy = *p;
    }
    if (!poll.empty()) {
        const auto d = parse_duration(poll);
        if (!d || *d < kMinPollInterval || *d > kMaxPollInterval)
            return stop(
                2, "",
                invalid((std::string("poll interval (") + kPollIntervalRange + ")").c_str(), poll));
        o.poll_interval = std::chrono::duration_cast<std::chrono::milliseconds>(*d);
    }
    for (const auto& [name, path] :
         {std::pair{"kubelet socket", &o.kubelet_socket}, std::pair{"socket", &o.nvshare_socket},
          std::pair{"library", &o.library}, std::pair{"preload file", &o.preload_file}})
        if (!path->starts_with('/'))
            return stop(2, "",
                        invalid((std::string(name) + " path (must be absolute)").c_str(), *path));
    if (!o.node_features.empty() && !o.node_features.starts_with('/'))
        return stop(2, "", invalid("node features path (must be absolute)", o.node_features));
    o.cdi = !no_cdi;
    o.write_preload_file = !no_write_preload_file;
    ParsedOptions r;
    r.run = true;
    r.options = std::move(o);
    return r;
}

}  // namespace nvshare::deviceplugin
