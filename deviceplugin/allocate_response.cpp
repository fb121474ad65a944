#include "deviceplugin/allocate_response.h"

#include <filesystem>

#include "build-config.h"

namespace nvshare::deviceplugin {

namespace {

void add_mount(v1beta1::ContainerAllocateResponse& r, const std::string& host,
               const std::string& container)
{
    v1beta1::Mount* m = r.add_mounts();
    m->set_host_path(host);
    m->set_container_path(container);
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
    const std::filesystem::path host_socket(options.nvshare_socket);
    const std::filesystem::path default_socket(NVSHARE_DEFAULT_SOCKET);
    add_mount(r, host_socket.parent_path().string(), default_socket.parent_path().string());
    add_mount(r, options.library, options.library);
    add_mount(r, options.preload_file, "/etc/ld.so.preload");
    auto& envs = *r.mutable_envs();
    if (host_socket.filename() != default_socket.filename())
        envs["NVSHARE_SOCKET"] = (default_socket.parent_path() / host_socket.filename()).string();
    envs["NVIDIA_VISIBLE_DEVICES"] = visible;
    return r;
}

}  // namespace nvshare::deviceplugin
