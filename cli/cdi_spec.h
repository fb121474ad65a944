// The CDI (Container Device Interface) spec of `nvsharectl cdi generate`:
// devices nvshare.com/gpu=all, =INDEX and =UUID, each of which bind-mounts
// nvshare's socket directory, libnvshare.so and a one-line ld.so.preload
// into the container, all read-only. nvsharectl(1), CONTAINERS, says why
// /etc/ld.so.preload and not LD_PRELOAD.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace nvshare::cli::cdi {

inline constexpr const char* kKind = "nvshare.com/gpu";
// The oldest version with every field used here (mounts: 0.3.0) that
// Debian 12's podman 4.3 reads: it refuses 0.6.0. Newer runtimes read all
// older versions.
inline constexpr const char* kVersion = "0.5.0";

struct Gpu {
    uint64_t index = 0;  // nvshared's GPU index (nvidia-smi's order)
    std::string uuid;    // "GPU-…"
};

struct Paths {
    std::string socket_dir;            // on the host
    std::string container_socket_dir;  // where libnvshare.so looks for it
    std::string library;               // libnvshare.so, at the same path inside
    std::string preload_file;          // mounted at /etc/ld.so.preload
};

// Why a path may not go into the spec, or "": each must be absolute and free
// of control characters; the library's is also one line of the containers'
// /etc/ld.so.preload, which splits at blanks and ':' (ld.so(8)).
std::string path_problem(const std::string& path, bool preload_entry);

// The spec: one device per GPU (by index and by UUID) and "all".
nlohmann::json make_spec(const std::vector<Gpu>& gpus, const Paths& paths);

// What the preload file holds: the library, as the container sees it.
std::string preload_file_text(const std::string& library);

// The GPUs of nvshared's status document (its "gpus" array); a GPU whose
// UUID could not be a device name is left out.
std::vector<Gpu> gpus_from_status(const nlohmann::json& status);

// The spec's devices as runtimes name them ("nvshare.com/gpu=all"), or
// empty with *error set when `spec` is not a spec.
std::vector<std::string> device_names(const nlohmann::json& spec, std::string* error);

}  // namespace nvshare::cli::cdi
