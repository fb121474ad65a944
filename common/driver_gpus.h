// The host's NVIDIA GPUs as the kernel driver lists them in
// /proc/driver/nvidia/gpus/<PCI bus id>/information, read without touching
// the GPUs, ordered by bus id (nvidia-smi's default order). nvshared lists
// them (daemon/gpu_discovery.h); `nvsharectl cdi generate` reads them where
// nvshared does not answer.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nvshare {

inline constexpr const char* kDriverGpuDir = "/proc/driver/nvidia/gpus";

struct DriverGpu {
    std::string uuid;   // "GPU-" and 36 characters
    std::string model;  // as the driver wrote it: not checked for UTF-8
};

// Parses one `information` file: nullopt if it names no GPU UUID of the
// form clients report.
std::optional<DriverGpu> parse_driver_gpu(std::string_view information);

// Every GPU under `dir`; empty when the directory is missing or unreadable
// (no driver, or hidden by a sandbox).
std::vector<DriverGpu> driver_gpus(const std::string& dir);

}  // namespace nvshare
