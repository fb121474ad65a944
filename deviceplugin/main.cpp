// nvshare-device-plugin: advertises shares of the GPUs nvshared schedules to
// the local kubelet as nvshare.com/gpu (the kubelet's device-plugin API
// v1beta1), and tells it how to give a container its shares. One loop: every
// poll interval it asks nvshared for its GPUs (health) and checks the
// kubelet's socket (a new one: the kubelet restarted, register again).
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "deviceplugin/device_board.h"
#include "deviceplugin/gpu_inventory.h"
#include "deviceplugin/kubelet.h"
#include "deviceplugin/node_features.h"
#include "deviceplugin/options.h"
#include "deviceplugin/plugin_server.h"
#include "deviceplugin/preload_file.h"

namespace {

using namespace nvshare::deviceplugin;

void log(const std::string& line)
{
    fprintf(stderr, "nvshare-device-plugin: %s\n", line.c_str());
}

// Asks nvshared (else the driver) and publishes the result; logs when
// nvshared stops or starts answering.
void refresh(const Options& o, GpuInventory& inventory, DeviceBoard& board, bool& daemon_up)
{
    std::string error;
    const auto from_daemon = daemon_gpus(o.nvshare_socket, &error);
    if (from_daemon.has_value() != daemon_up) {
        daemon_up = from_daemon.has_value();
        log(daemon_up ? "nvshared answers at " + o.nvshare_socket + ": GPUs healthy"
                      : "nvshared does not answer at " + o.nvshare_socket + " (" + error +
                            "): every GPU unhealthy");
    }
    const auto gpus = inventory.update(from_daemon, driver_gpu_uuids(o.gpu_info_dir));
    if (board.publish(gpus)) {
        size_t healthy = 0;
        for (const auto& g : gpus)
            healthy += g.healthy ? 1 : 0;
        log(std::to_string(gpus.size()) + " GPUs, " + std::to_string(healthy) + " healthy, " +
            std::to_string(o.shares) + " shares each");
    }
}

// Blocked in every thread (gRPC's too, which inherit the mask): the loop
// takes them with sigtimedwait.
sigset_t stop_signals()
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    return set;
}

}  // namespace

int main(int argc, char** argv)
{
    const ParsedOptions parsed = parse_options(argc, argv);
    if (!parsed.run) {
        fputs(parsed.output.c_str(), stdout);
        if (!parsed.error.empty())
            log(parsed.error);
        return parsed.exit_code;
    }
    const Options& o = parsed.options;
    // Before any container can be given a mount of it.
    std::string file_error;
    if (o.write_preload_file && !write_preload_file(o.preload_file, o.library, &file_error)) {
        log("cannot write " + o.preload_file + ": " + file_error);
        return 1;
    }
    if (!o.node_features.empty() && !write_node_features(o.node_features, o.shares, &file_error)) {
        log("cannot write " + o.node_features + ": " + file_error);
        return 1;
    }
    const sigset_t signals = stop_signals();
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    const std::string endpoint_path =
        (std::filesystem::path(o.kubelet_socket).parent_path() / kEndpoint).string();
    DeviceBoard board;
    GpuInventory inventory;
    PluginServer server(board, o);
    bool daemon_up = true;  // so that a first failure is logged
    bool registered = false;
    FileIdentity kubelet_at_registration, endpoint_at_registration;
    std::string last_error;
    const timespec interval{static_cast<time_t>(o.poll_interval.count() / 1000),
                            static_cast<long>(o.poll_interval.count() % 1000) * 1000000};
    for (;;) {
        refresh(o, inventory, board, daemon_up);
        const FileIdentity kubelet = file_identity(o.kubelet_socket);
        const bool current = registered && kubelet == kubelet_at_registration &&
                             file_identity(endpoint_path) == endpoint_at_registration;
        if (!current) {
            std::string error;
            if (!kubelet.exists)
                error = "no socket there (yet)";
            else if (!server.start(endpoint_path))
                error = "cannot serve on " + endpoint_path;
            else
                register_with_kubelet(o.kubelet_socket, kEndpoint, &error);
            registered = error.empty();
            if (registered) {
                kubelet_at_registration = kubelet;
                endpoint_at_registration = file_identity(endpoint_path);
                log("registered " + std::string(kResourceName) + " with the kubelet at " +
                    o.kubelet_socket + ", serving " + endpoint_path);
            } else {
                server.stop();
                if (error != last_error)
                    log("not registered with the kubelet at " + o.kubelet_socket + ": " + error +
                        "; trying again every poll interval");
            }
            last_error = error;
        }
        const int sig = sigtimedwait(&signals, nullptr, &interval);
        if (sig == SIGTERM || sig == SIGINT)
            break;
    }
    server.stop();
    if (!o.node_features.empty() && !remove_node_features(o.node_features, &file_error))
        log("cannot remove " + o.node_features + ": " + file_error);
    log("stopped");
    return 0;
}
