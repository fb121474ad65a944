#include "deviceplugin/allocate_response.h"

#include <filesystem>

namespace nvshare::deviceplugin {

namespace {

void add_mount(v1beta1::ContainerAllocateResponse& r, const std::string& path)
{
    v1beta1::Mount* m = r.add_mounts();
    m->set_host_path(path);
    m->set_container_path(path);
    m->set_read_only(true);
}

}  // namespace

v1beta1::ContainerAllocateResponse container_allocation(const std::vector<std::string>& gpu_uuids,
                                                        const Options& options)
{
    v1beta1::ContainerAllocateResponse r;
    std::string visible;
    for (const std::string& uuid : gpu_uuids) {
        if (options.cdi)
            r.add_cdi_devices()->set_name(std::string(kResourceName) + "=" + uuid);
        visible += (visible.empty() ? "" : ",") + uuid;
    }
    // The directory, not the socket: nvshared re-creates its socket when it
    // restarts, and a bind mount of the file would keep the old one.
    // Connecting to a socket needs no write access to its mount.
    add_mount(r, std::filesystem::path(options.nvshare_socket).parent_path().string());
    add_mount(r, options.library);
    auto& envs = *r.mutable_envs();
    envs["LD_PRELOAD"] = options.library;
    envs["NVSHARE_SOCKET"] = options.nvshare_socket;
    envs["NVIDIA_VISIBLE_DEVICES"] = visible;
    return r;
}

}  // namespace nvshare::deviceplugin
