// The gRPC server of the plugin's socket: started anew for every
// registration, since a restarting kubelet deletes the plugin's socket.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "deviceplugin/plugin_service.h"

namespace nvshare::deviceplugin {

class PluginServer {
public:
    PluginServer(DeviceBoard& board, const Options& options) : board_(board), options_(options) {}
    ~PluginServer() { stop(); }
    PluginServer(const PluginServer&) = delete;
    PluginServer& operator=(const PluginServer&) = delete;

    // Serves on `path` (replacing a file left there); false when it cannot.
    bool start(const std::string& path);
    // Ends the streams, shuts the server down and removes its socket.
    void stop();

private:
    DeviceBoard& board_;  // to wake the streams when stopping
    const Options& options_;
    std::string path_;
    std::unique_ptr<PluginService> service_;
    std::unique_ptr<grpc::Server> server_;
};

}  // namespace nvshare::deviceplugin
