// What Allocate tells the kubelet to give a container its shares of GPUs.
#pragma once

#include <string>
#include <vector>

#include "api.pb.h"
#include "deviceplugin/options.h"

namespace nvshare::deviceplugin {

// For a container given shares of `gpu_uuids` (distinct, in order): the CDI
// devices nvshare.com/gpu=<UUID> (unless --no-cdi) for runtimes with CDI,
// and for those without, the same edits spelled out: nvshared's socket
// directory and libnvshare.so mounted read-only at their host paths,
// LD_PRELOAD and NVSHARE_SOCKET, and NVIDIA_VISIBLE_DEVICES naming the GPUs
// for the NVIDIA container runtime.
v1beta1::ContainerAllocateResponse container_allocation(const std::vector<std::string>& gpu_uuids,
                                                        const Options& options);

}  // namespace nvshare::deviceplugin
