// The kubelet's side of the device-plugin API for the tests: a real gRPC
// Registration server on a socket, and a client of the plugin's socket.
#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "api.grpc.pb.h"
#include "tests/support/wait.h"

namespace nvshare::test {

class FakeKubelet final : public v1beta1::Registration::Service {
public:
    // Serves Registration on `socket` (in the device-plugins directory).
    explicit FakeKubelet(std::string socket);
    ~FakeKubelet() override;

    // What a restarting kubelet does: stop serving and delete every socket
    // of the directory, its own and the plugins'.
    void stop_and_clear_directory();

    // The n-th Register call (1 = the first) once it has come; nullopt (and
    // a gtest failure) when it does not come in time.
    std::optional<v1beta1::RegisterRequest> wait_register(size_t n, Millis timeout = kTimeout);
    size_t registrations();

    // A client of the plugin's socket, named by the last registration.
    std::unique_ptr<v1beta1::DevicePlugin::Stub> plugin();

    grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* request,
                          v1beta1::Empty*) override;

private:
    std::string socket_;
    std::unique_ptr<grpc::Server> server_;
    std::mutex mutex_;
    std::condition_variable registered_;
    std::vector<v1beta1::RegisterRequest> requests_;
};

// A ListAndWatch stream, read until an update satisfies a condition.
class DeviceStream {
public:
    explicit DeviceStream(v1beta1::DevicePlugin::Stub& plugin);
    ~DeviceStream();
    // Reads updates until `pred` holds for one (returned) or the stream
    // ends or times out (nullopt, with a gtest failure).
    std::optional<v1beta1::ListAndWatchResponse> wait_for(
        const std::function<bool(const v1beta1::ListAndWatchResponse&)>& pred);

    // The next update; nullopt (with a gtest failure) when the stream ends.
    std::optional<v1beta1::ListAndWatchResponse> next();

private:
    grpc::ClientContext context_;
    std::unique_ptr<grpc::ClientReader<v1beta1::ListAndWatchResponse>> reader_;
};

}  // namespace nvshare::test
