#include "deviceplugin/plugin_server.h"

#include <unistd.h>

#include <chrono>

namespace nvshare::deviceplugin {

namespace {
// How long calls in flight get to finish when the server stops.
constexpr std::chrono::seconds kShutdownGrace{2};
}  // namespace

bool PluginServer::start(const std::string& path)
{
    stop();
    unlink(path.c_str());
    service_ = std::make_unique<PluginService>(board_, options_);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    if (!server_) {
        service_.reset();
        return false;
    }
    path_ = path;
    return true;
}

void PluginServer::stop()
{
    if (!server_)
        return;
    service_->stop();
    board_.wake_all();
    server_->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
    server_.reset();
    service_.reset();
    unlink(path_.c_str());
    path_.clear();
}

}  // namespace nvshare::deviceplugin
