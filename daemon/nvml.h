// GPU memory sizes from the host's NVIDIA management library (NVML,
// libnvidia-ml.so.1, which the driver installs): the library made for this,
// needing no CUDA context. Loaded with dlopen on first use, so nvshared runs
// where it is missing (then every size is unknown).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace nvshare::daemon {

// The memory of the GPU with this UUID ("GPU-…") as NVML reports it;
// nullopt where NVML is missing or does not know the GPU.
std::optional<uint64_t> nvml_total_memory(const std::string& uuid);

// The GPU memory NVML counts for each compute process on the GPU with this
// UUID (pid -> bytes; pids of the host's PID namespace); nullopt where NVML
// is missing, does not know the GPU or cannot say. Asks the driver: it can
// take as long as the driver does, so callers keep it off the event loop.
std::optional<std::map<int32_t, uint64_t>> nvml_process_memory(const std::string& uuid);

}  // namespace nvshare::daemon
