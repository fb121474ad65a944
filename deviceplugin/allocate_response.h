// What Allocate tells the kubelet to give a container its shares of GPUs.
#pragma once

#include <string>
#include <vector>

#include "api.pb.h"
#include "deviceplugin/options.h"

namespace nvshare::deviceplugin {

// For a container given shares of `gpu_uuids` (distinct, in order): the CDI
// devices nvshare.com/gpu=<UUID> (unless --no-cdi) for runtimes with CDI,
// and for those without, the edits of nvsharectl's CDI spec spelled out,
// all read-only: nvshared's socket directory where libnvshare.so looks for
// it, the library at its host path, and the one-line preload file at
// /etc/ld.so.preload (nvsharectl(1), CONTAINERS, says why not LD_PRELOAD);
// NVSHARE_SOCKET only when the socket's name is not the default's. And
// NVIDIA_VISIBLE_DEVICES naming the GPUs, for the NVIDIA container runtime.
v1beta1::ContainerAllocateResponse container_allocation(const std::vector<std::string>& gpu_uuids,
                                                        const Options& options);

}  // namespace nvshare::deviceplugin
