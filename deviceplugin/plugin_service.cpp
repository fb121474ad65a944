#include "deviceplugin/plugin_service.h"

#include <algorithm>

#include "deviceplugin/allocate_response.h"
#include "deviceplugin/preferred_allocation.h"
#include "deviceplugin/share_id.h"

namespace nvshare::deviceplugin {

namespace {

// How often a stream with nothing to send checks that the kubelet is still there.
constexpr std::chrono::seconds kCancelCheck{1};

v1beta1::ListAndWatchResponse device_list(const std::vector<GpuHealth>& gpus, unsigned shares)
{
    v1beta1::ListAndWatchResponse r;
    for (const GpuHealth& gpu : gpus)
        for (unsigned k = 0; k < shares; ++k) {
            v1beta1::Device* d = r.add_devices();
            d->set_id(share_id(gpu.uuid, k));
            d->set_health(gpu.healthy ? "Healthy" : "Unhealthy");
        }
    return r;
}

// Whether `id` is a share this plugin advertises now.
bool advertised(const std::vector<GpuHealth>& gpus, unsigned shares, const std::string& id)
{
    const std::string_view uuid = gpu_of_share(id);
    return std::any_of(gpus.begin(), gpus.end(), [&](const GpuHealth& g) {
        if (g.uuid != uuid)
            return false;
        for (unsigned k = 0; k < shares; ++k)
            if (share_id(g.uuid, k) == id)
                return true;
        return false;
    });
}

}  // namespace

v1beta1::DevicePluginOptions plugin_options()
{
    v1beta1::DevicePluginOptions o;
    o.set_pre_start_required(false);
    o.set_get_preferred_allocation_available(true);
    return o;
}

grpc::Status PluginService::GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                                   v1beta1::DevicePluginOptions* out)
{
    *out = plugin_options();
    return grpc::Status::OK;
}

grpc::Status PluginService::ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty*,
                                         grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer)
{
    DeviceBoard::Snapshot snap = board_.current();
    if (!writer->Write(device_list(snap.gpus, options_.shares)))
        return grpc::Status::OK;
    while (!stopping_ && !context->IsCancelled()) {
        const uint64_t seen = snap.generation;
        snap = board_.wait_change(seen, stopping_, kCancelCheck);
        if (snap.generation != seen && !stopping_ &&
            !writer->Write(device_list(snap.gpus, options_.shares)))
            break;
    }
    return grpc::Status::OK;
}

grpc::Status PluginService::GetPreferredAllocation(
    grpc::ServerContext*, const v1beta1::PreferredAllocationRequest* request,
    v1beta1::PreferredAllocationResponse* out)
{
    for (const auto& c : request->container_requests()) {
        const std::vector<std::string> available(c.available_deviceids().begin(),
                                                 c.available_deviceids().end());
        const std::vector<std::string> must(c.must_include_deviceids().begin(),
                                            c.must_include_deviceids().end());
        const size_t size = c.allocation_size() > 0 ? static_cast<size_t>(c.allocation_size()) : 0;
        auto* answer = out->add_container_responses();
        for (std::string& id : preferred_allocation(available, must, size, options_.policy))
            answer->add_deviceids(std::move(id));
    }
    return grpc::Status::OK;
}

grpc::Status PluginService::Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* request,
                                     v1beta1::AllocateResponse* out)
{
    const DeviceBoard::Snapshot snap = board_.current();
    for (const auto& c : request->container_requests()) {
        std::vector<std::string> gpus;
        for (const std::string& id : c.devices_ids()) {
            if (!advertised(snap.gpus, options_.shares, id))
                return {grpc::StatusCode::INVALID_ARGUMENT,
                        "not a device of nvshare-device-plugin: " + id};
            const std::string uuid(gpu_of_share(id));
            if (std::find(gpus.begin(), gpus.end(), uuid) == gpus.end())
                gpus.push_back(uuid);
        }
        *out->add_container_responses() = container_allocation(gpus, options_);
    }
    return grpc::Status::OK;
}

grpc::Status PluginService::PreStartContainer(grpc::ServerContext*,
                                              const v1beta1::PreStartContainerRequest*,
                                              v1beta1::PreStartContainerResponse*)
{
    return grpc::Status::OK;  // not asked for (pre_start_required is false)
}

}  // namespace nvshare::deviceplugin
