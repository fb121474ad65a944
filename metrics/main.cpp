// nvshare-metrics: nvshared's per-user, per-GPU usage and per-GPU state in
// the Prometheus text format. With --http it answers one HTTP request on
// stdin/stdout, as nvshare-metrics@.service does for each connection
// nvshare-metrics.socket accepts; without, it prints the metrics (for
// node_exporter's textfile collector, or a look by hand).
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "build-config.h"
#include "common/lock_client.h"
#include "common/user_name.h"
#include "common/write_all.h"
#include "metrics/gpu_labels.h"
#include "metrics/render.h"
#include "metrics/status_cache.h"

namespace {

constexpr size_t kMaxRequestHead = 8192;
constexpr int kRequestTimeoutMs = 5000;

const char kUsage[] =
    "Usage: nvshare-metrics [--socket PATH] [--http] [--cache-dir DIR]\n"
    "Print nvshared's per-user, per-GPU usage and per-GPU state as Prometheus\n"
    "metrics.\n"
    "\n"
    "  --socket PATH  nvshared's lock socket (default " NVSHARE_DEFAULT_SOCKET
    ")\n"
    "  --http         answer one HTTP request read from stdin, on stdout\n"
    "  --cache-dir DIR  share nvshared's status with the scrapes that come\n"
    "                 together, through DIR (at most 1 s old)\n"
    "  --help         show this help\n";

// The request's head (up to the blank line), bounded in size and time.
std::string read_head()
{
    std::string head;
    while (head.size() < kMaxRequestHead && head.find("\r\n\r\n") == std::string::npos &&
           head.find("\n\n") == std::string::npos) {
        pollfd p{STDIN_FILENO, POLLIN, 0};
        if (poll(&p, 1, kRequestTimeoutMs) <= 0)
            break;
        char buf[1024];
        const ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        head.append(buf, static_cast<size_t>(n));
    }
    return head;
}

}  // namespace

int main(int argc, char** argv)
{
    std::string socket = NVSHARE_DEFAULT_SOCKET;
    bool http = false;
    std::string cache_dir;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--http") {
            http = true;
        } else if (arg == "--socket" && i + 1 < argc) {
            socket = argv[++i];
        } else if (arg.rfind("--socket=", 0) == 0) {
            socket = arg.substr(9);
        } else if (arg == "--cache-dir" && i + 1 < argc) {
            cache_dir = argv[++i];
        } else if (arg.rfind("--cache-dir=", 0) == 0) {
            cache_dir = arg.substr(12);
        } else if (arg == "--help" || arg == "-h") {
            fputs(kUsage, stdout);
            return 0;
        } else {
            fprintf(stderr, "nvshare-metrics: unknown argument '%s'\n%s", arg.c_str(), kUsage);
            return 2;
        }
    }
    const std::string head = http ? read_head() : "";
    std::string error;
    const std::string text = nvshare::metrics::shared_status(cache_dir, socket, &error);
    nlohmann::json status;
    if (text.empty())
        fprintf(stderr, "nvshare-metrics: cannot reach nvshared at %s: %s\n", socket.c_str(),
                error.c_str());
    else
        status = nlohmann::json::parse(text, nullptr, false);
    std::string body;
    try {
        body = nvshare::metrics::render(status.is_discarded() ? nlohmann::json() : status,
                                        nvshare::user_name, nvshare::metrics::host_name());
    } catch (const std::exception& e) {
        fprintf(stderr, "nvshare-metrics: unexpected status from nvshared: %s\n", e.what());
        body = nvshare::metrics::render(nlohmann::json(), nvshare::user_name, "");
    }
    if (!nvshare::write_all(STDOUT_FILENO,
                            http ? nvshare::metrics::http_response(head, body) : body))
        return 1;
    return 0;
}
