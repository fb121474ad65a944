#include "deviceplugin/kubelet.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <chrono>

#include "api.grpc.pb.h"
#include "deviceplugin/options.h"
#include "deviceplugin/plugin_service.h"

namespace nvshare::deviceplugin {

namespace {
constexpr std::chrono::seconds kRegisterTimeout{10};
}

bool register_with_kubelet(const std::string& kubelet_socket, const std::string& endpoint,
                           std::string* error)
{
    auto channel =
        grpc::CreateChannel("unix:" + kubelet_socket, grpc::InsecureChannelCredentials());
    auto stub = v1beta1::Registration::NewStub(channel);
    v1beta1::RegisterRequest request;
    request.set_version("v1beta1");
    request.set_endpoint(endpoint);
    request.set_resource_name(kResourceName);
    *request.mutable_options() = plugin_options();
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kRegisterTimeout);
    v1beta1::Empty reply;
    const grpc::Status status = stub->Register(&context, request, &reply);
    if (!status.ok()) {
        *error = status.error_message().empty()
                     ? "gRPC status " + std::to_string(static_cast<int>(status.error_code()))
                     : status.error_message();
        return false;
    }
    return true;
}

bool FileIdentity::operator==(const FileIdentity& other) const
{
    return exists == other.exists && device == other.device && inode == other.inode &&
           changed.tv_sec == other.changed.tv_sec && changed.tv_nsec == other.changed.tv_nsec;
}

FileIdentity file_identity(const std::string& path)
{
    struct stat st {};
    if (stat(path.c_str(), &st) != 0)
        return {};
    return {true, st.st_dev, st.st_ino, st.st_ctim};
}

}  // namespace nvshare::deviceplugin
