// The kubelet's side for tests/deploy/plugin_image_test.sh: serves the
// Registration socket in the device-plugins directory that the plugin's
// container mounts, and checks what the containerized plugin does through
// its mounts: it registers, lists NVSHARE_TEST_GPUS GPUs times
// NVSHARE_TEST_SHARES shares, Healthy (nvshared, in another container,
// answered through the socket directory), and answers Allocate with the
// host's preload file and socket directory.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "tests/deviceplugin/fake_kubelet.h"
#include "tests/support/programs.h"

namespace nvshare::test {
namespace {

TEST(PluginImage, RegistersListsHealthyGpusAndAllocates)
{
    const std::string dir = required_env("NVSHARE_TEST_DEVICE_PLUGINS");
    const size_t gpus = std::stoul(required_env("NVSHARE_TEST_GPUS"));
    const size_t shares = std::stoul(required_env("NVSHARE_TEST_SHARES"));
    FakeKubelet kubelet(dir + "/kubelet.sock");
    const auto reg = kubelet.wait_register(1);
    ASSERT_TRUE(reg);
    EXPECT_EQ(reg->resource_name(), "nvshare.com/gpu");
    EXPECT_EQ(reg->version(), "v1beta1");
    EXPECT_EQ(reg->endpoint(), "nvshare-gpu.sock");
    auto stub = kubelet.plugin();
    DeviceStream stream(*stub);
    const auto list = stream.wait_for([&](const v1beta1::ListAndWatchResponse& r) {
        if (static_cast<size_t>(r.devices_size()) != gpus * shares)
            return false;
        for (const auto& d : r.devices())
            if (d.health() != "Healthy")
                return false;
        return true;
    });
    ASSERT_TRUE(list);
    std::cout << "ok: registered; " << list->devices_size() << " devices, all Healthy\n";

    grpc::ClientContext ctx;
    v1beta1::AllocateRequest request;
    request.add_container_requests()->add_devices_ids(list->devices(0).id());
    v1beta1::AllocateResponse answer;
    ASSERT_TRUE(stub->Allocate(&ctx, request, &answer).ok());
    ASSERT_EQ(answer.container_responses_size(), 1);
    std::set<std::string> mounts;
    for (const auto& m : answer.container_responses(0).mounts())
        mounts.insert(m.host_path() + " -> " + m.container_path());
    EXPECT_TRUE(mounts.count("/run/nvshare -> /run/nvshare")) << answer.DebugString();
    EXPECT_TRUE(mounts.count("/var/lib/nvshare/container-ld.so.preload -> /etc/ld.so.preload"))
        << answer.DebugString();
    std::cout << "ok: Allocate names the host's socket directory and preload file\n";
}

}  // namespace
}  // namespace nvshare::test
