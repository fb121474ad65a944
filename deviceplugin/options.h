// nvshare-device-plugin's command line.
#pragma once

#include <chrono>
#include <string>

#include "common/driver_gpus.h"
#include "deviceplugin/preferred_allocation.h"

namespace nvshare::deviceplugin {

struct Options {
    // The kubelet's Registration socket; the plugin serves its own socket,
    // kEndpoint, in the same directory (the kubelet only looks there).
    std::string kubelet_socket = "/var/lib/kubelet/device-plugins/kubelet.sock";
    unsigned shares = 10;  // devices advertised per physical GPU
    Policy policy = Policy::Spread;
    std::string nvshare_socket;      // nvshared's lock socket
    std::string library;             // libnvshare.so, as containers get it
    std::string preload_file;        // written here, mounted at their /etc/ld.so.preload
    bool write_preload_file = true;  // false: --no-write-preload-file (the host writes it)
    std::string node_features;       // node-feature-discovery's features file; empty: none
    std::string gpu_info_dir = kDriverGpuDir;
    std::chrono::milliseconds poll_interval{5000};
    bool cdi = true;  // false: --no-cdi
};

inline constexpr const char* kEndpoint = "nvshare-gpu.sock";
inline constexpr const char* kResourceName = "nvshare.com/gpu";
inline constexpr unsigned kMaxShares = 1000;
// --poll-interval's range (tests/system/doc_test.py checks the pages state it).
inline constexpr std::chrono::microseconds kMinPollInterval = std::chrono::milliseconds(10);
inline constexpr std::chrono::microseconds kMaxPollInterval = std::chrono::hours(1);
inline constexpr const char* kPollIntervalRange = "10ms to 1h";

struct ParsedOptions {
    bool run = false;  // false: exit with exit_code
    int exit_code = 0;
    std::string output;  // --help, --version: for stdout
    std::string error;   // for stderr
    Options options;
};

ParsedOptions parse_options(int argc, const char* const* argv);

}  // namespace nvshare::deviceplugin
