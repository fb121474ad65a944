#include "tests/deviceplugin/fake_kubelet.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace nvshare::test {

FakeKubelet::FakeKubelet(std::string socket) : socket_(std::move(socket))
{
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket_, grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    if (!server_)
        throw std::runtime_error("cannot serve Registration on " + socket_);
}

FakeKubelet::~FakeKubelet()
{
    if (server_)
        server_->Shutdown(std::chrono::system_clock::now());
}

void FakeKubelet::stop_and_clear_directory()
{
    server_->Shutdown(std::chrono::system_clock::now());
    server_.reset();
    const auto dir = std::filesystem::path(socket_).parent_path();
    for (const auto& entry : std::filesystem::directory_iterator(dir))
        if (entry.is_socket())
            std::filesystem::remove(entry.path());
}

grpc::Status FakeKubelet::Register(grpc::ServerContext*, const v1beta1::RegisterRequest* request,
                                   v1beta1::Empty*)
{
    {
        std::lock_guard lock(mutex_);
        requests_.push_back(*request);
    }
    registered_.notify_all();
    return grpc::Status::OK;
}

std::optional<v1beta1::RegisterRequest> FakeKubelet::wait_register(size_t n, Millis timeout)
{
    std::unique_lock lock(mutex_);
    if (!registered_.wait_for(lock, timeout, [&] { return requests_.size() >= n; })) {
        ADD_FAILURE() << "registration " << n << " did not come (" << requests_.size()
                      << " so far)";
        return std::nullopt;
    }
    return requests_[n - 1];
}

size_t FakeKubelet::registrations()
{
    std::lock_guard lock(mutex_);
    return requests_.size();
}

std::unique_ptr<v1beta1::DevicePlugin::Stub> FakeKubelet::plugin()
{
    std::string endpoint;
    {
        std::lock_guard lock(mutex_);
        endpoint = requests_.empty() ? "" : requests_.back().endpoint();
    }
    const auto path = std::filesystem::path(socket_).parent_path() / endpoint;
    return v1beta1::DevicePlugin::NewStub(
        grpc::CreateChannel("unix:" + path.string(), grpc::InsecureChannelCredentials()));
}

DeviceStream::DeviceStream(v1beta1::DevicePlugin::Stub& plugin)
{
    // Long enough for the waits of a whole test, each of which may take kTimeout.
    context_.set_deadline(std::chrono::system_clock::now() + 3 * kTimeout);
    reader_ = plugin.ListAndWatch(&context_, v1beta1::Empty());
}

DeviceStream::~DeviceStream()
{
    context_.TryCancel();
    reader_->Finish();
}

std::optional<v1beta1::ListAndWatchResponse> DeviceStream::wait_for(
    const std::function<bool(const v1beta1::ListAndWatchResponse&)>& pred)
{
    v1beta1::ListAndWatchResponse update;
    while (reader_->Read(&update))
        if (pred(update))
            return update;
    ADD_FAILURE() << "the device list never got there; last update had " << update.devices_size()
                  << " devices";
    return std::nullopt;
}

std::optional<v1beta1::ListAndWatchResponse> DeviceStream::next()
{
    v1beta1::ListAndWatchResponse update;
    if (reader_->Read(&update))
        return update;
    ADD_FAILURE() << "the device list stream ended";
    return std::nullopt;
}

}  // namespace nvshare::test
