// The DevicePlugin service the kubelet calls on the plugin's socket.
#pragma once

#include <atomic>

#include "api.grpc.pb.h"
#include "deviceplugin/device_board.h"
#include "deviceplugin/options.h"

namespace nvshare::deviceplugin {

class PluginService final : public v1beta1::DevicePlugin::Service {
public:
    PluginService(const DeviceBoard& board, const Options& options)
        : board_(board), options_(options)
    {
    }
    // Ends the ListAndWatch streams (before the server shuts down).
    void stop() { stopping_ = true; }

    grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                        v1beta1::DevicePluginOptions* out) override;
    grpc::Status ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty*,
                              grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override;
    grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                        const v1beta1::PreferredAllocationRequest* request,
                                        v1beta1::PreferredAllocationResponse* out) override;
    grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* request,
                          v1beta1::AllocateResponse* out) override;
    grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                   v1beta1::PreStartContainerResponse*) override;

private:
    const DeviceBoard& board_;
    const Options& options_;
    std::atomic<bool> stopping_ = false;
};

// The options the plugin registers with (and GetDevicePluginOptions answers).
v1beta1::DevicePluginOptions plugin_options();

}  // namespace nvshare::deviceplugin
