// nvshare-device-plugin against a fake kubelet (a real gRPC Registration
// server, then a client of the plugin's socket) and a real nvshared whose
// GPUs come from a made-up driver list.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "common/lock_client.h"
#include "common/uuid.h"
#include "tests/deviceplugin/fake_kubelet.h"
#include "tests/support/daemon.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/programs.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_gpu.h"

namespace nvshare::test {
namespace {

constexpr unsigned kShares = 3;
const std::string kLibrary = "/opt/nvshare-test/libnvshare.so";

std::string device_plugin_path()
{
    return required_env("NVSHARE_DEVICE_PLUGIN");
}

// Two GPUs as the driver lists them, for nvshared and the plugin.
struct DriverGpus {
    TempDir dir;
    std::vector<std::string> uuids;
    DriverGpus()
    {
        for (uint8_t n = 0; n < 2; ++n) {
            char uuid[kUuidTextSize];
            format_gpu_uuid(test_gpu(n, 0).uuid, uuid);
            const std::string bus = dir / ("0000:0" + std::to_string(n + 1) + ":00.0");
            std::filesystem::create_directory(bus);
            write_text(bus + "/information",
                       "Model: \t\t Test GPU\nGPU UUID: \t " + std::string(uuid) + "\n");
            uuids.push_back(uuid);
        }
    }
};

// The plugin with its log in `dir`; prints the log when the test failed.
class Plugin {
public:
    Plugin(const TempDir& dir, const std::string& kubelet_socket, const std::string& nvshare_socket,
           const std::string& gpu_info_dir, std::vector<std::string> extra = {})
        : log_(dir / "plugin.log"), preload_file_(dir / "container-ld.so.preload")
    {
        Process::Spec spec;
        spec.argv = {device_plugin_path(),
                     "--kubelet-socket",
                     kubelet_socket,
                     "--socket",
                     nvshare_socket,
                     "--gpu-info-dir",
                     gpu_info_dir,
                     "--library",
                     kLibrary,
                     "--preload-file",
                     preload_file_,
                     "--shares",
                     std::to_string(kShares),
                     "--poll-interval",
                     "50ms"};
        spec.argv.insert(spec.argv.end(), extra.begin(), extra.end());
        spec.stdout_path = spec.stderr_path = log_;
        process_ = Process(std::move(spec));
    }
    ~Plugin()
    {
        if (::testing::Test::HasFailure())
            std::cerr << "---- the plugin's log ----\n" << read_text(log_) << "----\n";
    }
    Process& process() { return process_; }
    std::string log() const { return read_text(log_); }
    const std::string& preload_file() const { return preload_file_; }

private:
    std::string log_;
    std::string preload_file_;
    Process process_;
};

std::string id(const std::string& uuid, unsigned k)
{
    return uuid + "::" + std::to_string(k);
}

// Every share of every GPU in `uuids`, all with this health.
bool all(const v1beta1::ListAndWatchResponse& r, const std::vector<std::string>& uuids,
         const std::string& health)
{
    std::set<std::string> want;
    for (const auto& u : uuids)
        for (unsigned k = 0; k < kShares; ++k)
            want.insert(id(u, k));
    std::set<std::string> got;
    for (const auto& d : r.devices()) {
        if (d.health() != health)
            return false;
        got.insert(d.id());
    }
    return got == want;
}

std::string gpu_of(const std::string& share)
{
    return share.substr(0, share.find("::"));
}

// The fixture: GPUs, nvshared listing them, a kubelet directory.
class DevicePlugin : public ::testing::Test {
protected:
    DriverGpus gpus;
    TempDir kubelet_dir;
    std::string kubelet_socket = kubelet_dir / "kubelet.sock";
    Daemon daemon;

    void SetUp() override { ASSERT_TRUE(daemon.start({"--gpu-info-dir", gpus.dir.path()})); }
    Plugin plugin(std::vector<std::string> extra = {})
    {
        return Plugin(kubelet_dir, kubelet_socket, daemon.socket(), gpus.dir.path(),
                      std::move(extra));
    }
};

TEST_F(DevicePlugin, RegistersAndAnswersTheKubelet)
{
    FakeKubelet kubelet(kubelet_socket);
    Plugin p = plugin();
    const auto reg = kubelet.wait_register(1);
    ASSERT_TRUE(reg);
    EXPECT_EQ(reg->version(), "v1beta1");
    EXPECT_EQ(reg->resource_name(), "nvshare.com/gpu");
    EXPECT_EQ(reg->endpoint(), "nvshare-gpu.sock");
    EXPECT_TRUE(reg->options().get_preferred_allocation_available());
    EXPECT_FALSE(reg->options().pre_start_required());

    auto stub = kubelet.plugin();
    {
        grpc::ClientContext ctx;
        v1beta1::DevicePluginOptions options;
        ASSERT_TRUE(stub->GetDevicePluginOptions(&ctx, v1beta1::Empty(), &options).ok());
        EXPECT_TRUE(options.get_preferred_allocation_available());
    }

    // kShares healthy devices per GPU nvshared lists.
    DeviceStream stream(*stub);
    const auto list = stream.wait_for([&](const auto& r) { return all(r, gpus.uuids, "Healthy"); });
    ASSERT_TRUE(list);

    // Spread (the default): two shares on two GPUs, the included one kept.
    {
        grpc::ClientContext ctx;
        v1beta1::PreferredAllocationRequest request;
        auto* c = request.add_container_requests();
        for (const auto& d : list->devices())
            c->add_available_deviceids(d.id());
        c->add_must_include_deviceids(id(gpus.uuids[1], 2));
        c->set_allocation_size(2);
        v1beta1::PreferredAllocationResponse answer;
        ASSERT_TRUE(stub->GetPreferredAllocation(&ctx, request, &answer).ok());
        ASSERT_EQ(answer.container_responses_size(), 1);
        const auto& ids = answer.container_responses(0).deviceids();
        ASSERT_EQ(ids.size(), 2);
        EXPECT_EQ(ids[0], id(gpus.uuids[1], 2));
        EXPECT_EQ(gpu_of(ids[1]), gpus.uuids[0]);
    }

    // Allocate: two containers; CDI names per distinct GPU, mounts and env.
    {
        grpc::ClientContext ctx;
        v1beta1::AllocateRequest request;
        auto* both = request.add_container_requests();
        both->add_devices_ids(id(gpus.uuids[0], 0));
        both->add_devices_ids(id(gpus.uuids[0], 1));
        both->add_devices_ids(id(gpus.uuids[1], 0));
        request.add_container_requests()->add_devices_ids(id(gpus.uuids[1], 1));
        v1beta1::AllocateResponse answer;
        ASSERT_TRUE(stub->Allocate(&ctx, request, &answer).ok());
        ASSERT_EQ(answer.container_responses_size(), 2);
        const auto& first = answer.container_responses(0);
        ASSERT_EQ(first.cdi_devices_size(), 2);
        EXPECT_EQ(first.cdi_devices(0).name(), "nvshare.com/gpu=" + gpus.uuids[0]);
        EXPECT_EQ(first.cdi_devices(1).name(), "nvshare.com/gpu=" + gpus.uuids[1]);
        // nvshared's socket has the default's name: no NVSHARE_SOCKET needed.
        EXPECT_EQ(first.envs().count("NVSHARE_SOCKET"), 0u);
        EXPECT_EQ(first.envs().count("LD_PRELOAD"), 0u);
        EXPECT_EQ(first.envs().at("NVIDIA_VISIBLE_DEVICES"), gpus.uuids[0] + "," + gpus.uuids[1]);
        ASSERT_EQ(first.mounts_size(), 3);
        // The socket's directory where the library looks for it.
        EXPECT_EQ(first.mounts(0).host_path(), daemon.dir().path());
        EXPECT_EQ(first.mounts(0).container_path(), "/run/nvshare");
        EXPECT_EQ(first.mounts(1).host_path(), kLibrary);
        EXPECT_EQ(first.mounts(1).container_path(), kLibrary);
        EXPECT_EQ(first.mounts(2).host_path(), p.preload_file());
        EXPECT_EQ(first.mounts(2).container_path(), "/etc/ld.so.preload");
        for (const auto& m : first.mounts())
            EXPECT_TRUE(m.read_only()) << m.container_path();
        // Written by the plugin, readable by every process of the container.
        EXPECT_EQ(read_text(p.preload_file()), kLibrary + "\n");
        EXPECT_EQ(std::filesystem::status(p.preload_file()).permissions() &
                      std::filesystem::perms::others_read,
                  std::filesystem::perms::others_read);
        const auto& second = answer.container_responses(1);
        ASSERT_EQ(second.cdi_devices_size(), 1);
        EXPECT_EQ(second.cdi_devices(0).name(), "nvshare.com/gpu=" + gpus.uuids[1]);
        EXPECT_EQ(second.envs().at("NVIDIA_VISIBLE_DEVICES"), gpus.uuids[1]);
    }

    // A device it never advertised is refused.
    {
        grpc::ClientContext ctx;
        v1beta1::AllocateRequest request;
        request.add_container_requests()->add_devices_ids(id(gpus.uuids[0], kShares));
        v1beta1::AllocateResponse answer;
        EXPECT_EQ(stub->Allocate(&ctx, request, &answer).error_code(),
                  grpc::StatusCode::INVALID_ARGUMENT);
    }

    // SIGTERM: a clean exit that removes its socket.
    EXPECT_EQ(p.process().stop(SIGTERM), 0);
    EXPECT_FALSE(file_exists(kubelet_dir / "nvshare-gpu.sock"));
}

TEST_F(DevicePlugin, PackAndNoCdiAsConfigured)
{
    FakeKubelet kubelet(kubelet_socket);
    Plugin p = plugin({"--allocation", "pack", "--no-cdi"});
    ASSERT_TRUE(kubelet.wait_register(1));
    auto stub = kubelet.plugin();
    {
        grpc::ClientContext ctx;
        v1beta1::PreferredAllocationRequest request;
        auto* c = request.add_container_requests();
        for (const auto& u : gpus.uuids)
            for (unsigned k = 0; k < kShares; ++k)
                c->add_available_deviceids(id(u, k));
        c->set_allocation_size(2);
        v1beta1::PreferredAllocationResponse answer;
        ASSERT_TRUE(stub->GetPreferredAllocation(&ctx, request, &answer).ok());
        ASSERT_EQ(answer.container_responses_size(), 1);
        const auto& ids = answer.container_responses(0).deviceids();
        ASSERT_EQ(ids.size(), 2);
        EXPECT_EQ(gpu_of(ids[0]), gpu_of(ids[1]));
    }
    {
        // Allocate answers once the device list is in (the first poll is
        // done before registering, so it is).
        grpc::ClientContext ctx;
        v1beta1::AllocateRequest request;
        request.add_container_requests()->add_devices_ids(id(gpus.uuids[0], 0));
        v1beta1::AllocateResponse answer;
        ASSERT_TRUE(stub->Allocate(&ctx, request, &answer).ok());
        ASSERT_EQ(answer.container_responses_size(), 1);
        EXPECT_EQ(answer.container_responses(0).cdi_devices_size(), 0);
        EXPECT_EQ(answer.container_responses(0).mounts_size(), 3);
    }
}

// As in its container image's DaemonSet: the host writes the preload file,
// the plugin writes the node's features for node-feature-discovery and
// removes them when it stops.
TEST_F(DevicePlugin, NodeFeaturesWhileRunningAndTheHostsPreloadFile)
{
    TempDir features_dir;
    const std::string features = features_dir / "features.d/nvshare";
    FakeKubelet kubelet(kubelet_socket);
    Plugin p = plugin({"--no-write-preload-file", "--node-features", features});
    ASSERT_TRUE(kubelet.wait_register(1));
    EXPECT_EQ(read_text(features), "nvshare.com/gpu.shared=true\nnvshare.com/gpu.shares-per-gpu=" +
                                       std::to_string(kShares) + "\n");
    EXPECT_FALSE(file_exists(p.preload_file()));
    auto stub = kubelet.plugin();
    grpc::ClientContext ctx;
    v1beta1::AllocateRequest request;
    request.add_container_requests()->add_devices_ids(id(gpus.uuids[0], 0));
    v1beta1::AllocateResponse answer;
    ASSERT_TRUE(stub->Allocate(&ctx, request, &answer).ok());
    ASSERT_EQ(answer.container_responses_size(), 1);
    bool names_it = false;
    for (const auto& m : answer.container_responses(0).mounts())
        names_it |= m.host_path() == p.preload_file() && m.container_path() == "/etc/ld.so.preload";
    EXPECT_TRUE(names_it) << answer.DebugString();
    EXPECT_EQ(p.process().stop(SIGTERM), 0);
    EXPECT_FALSE(file_exists(features));
}

TEST_F(DevicePlugin, RegistersWhenTheKubeletComesAndAgainAfterItRestarts)
{
    // Started before the kubelet: it waits for the socket.
    Plugin p = plugin();
    ASSERT_TRUE(wait_until([&] { return p.log().find("no socket there") != std::string::npos; }));
    std::optional<FakeKubelet> kubelet(std::in_place, kubelet_socket);
    ASSERT_TRUE(kubelet->wait_register(1));
    {
        auto stub = kubelet->plugin();
        DeviceStream stream(*stub);
        ASSERT_TRUE(stream.wait_for([&](const auto& r) { return all(r, gpus.uuids, "Healthy"); }));
    }

    // The kubelet restarts: its socket and the plugin's are deleted, then it
    // serves a new socket at the same path.
    kubelet->stop_and_clear_directory();
    kubelet.reset();
    kubelet.emplace(kubelet_socket);
    const auto reg = kubelet->wait_register(1);
    ASSERT_TRUE(reg);
    EXPECT_EQ(reg->resource_name(), "nvshare.com/gpu");
    auto stub = kubelet->plugin();
    DeviceStream stream(*stub);
    EXPECT_TRUE(stream.wait_for([&](const auto& r) { return all(r, gpus.uuids, "Healthy"); }));
}

TEST_F(DevicePlugin, GpusTurnUnhealthyWhileNvsharedIsDown)
{
    FakeKubelet kubelet(kubelet_socket);
    Plugin p = plugin();
    ASSERT_TRUE(kubelet.wait_register(1));
    auto stub = kubelet.plugin();
    DeviceStream stream(*stub);
    ASSERT_TRUE(stream.wait_for([&](const auto& r) { return all(r, gpus.uuids, "Healthy"); }));

    // The same devices, first unhealthy, then healthy again on the same stream.
    ASSERT_EQ(daemon.stop(SIGKILL), 128 + SIGKILL);
    ASSERT_TRUE(stream.wait_for([&](const auto& r) { return all(r, gpus.uuids, "Unhealthy"); }));
    ASSERT_TRUE(daemon.restart());
    EXPECT_TRUE(stream.wait_for([&](const auto& r) { return all(r, gpus.uuids, "Healthy"); }));
    // No re-registration was needed for that.
    EXPECT_EQ(kubelet.registrations(), 1u);
}

TEST_F(DevicePlugin, GpusThatClientsMakeUpAreNotAdvertised)
{
    // In nvshared's list before the plugin starts, so its first look sees it.
    LockClient made_up;
    std::string error;
    ASSERT_TRUE(made_up.connect(daemon.socket(), &error)) << error;
    ASSERT_TRUE(made_up.hello("made-up", {test_gpu(9, 1ull << 30)}));
    ASSERT_TRUE(daemon.wait_status([](const nlohmann::json& s) { return s["gpus"].size() == 3; })
                    .is_object());
    FakeKubelet kubelet(kubelet_socket);
    Plugin p = plugin();
    ASSERT_TRUE(kubelet.wait_register(1));
    auto stub = kubelet.plugin();
    DeviceStream stream(*stub);
    const auto first = stream.next();
    ASSERT_TRUE(first);
    EXPECT_TRUE(all(*first, gpus.uuids, "Healthy")) << first->DebugString();
}

TEST_F(DevicePlugin, AdvertisesTheDriversGpusUnhealthyWithoutNvshared)
{
    daemon.stop();
    FakeKubelet kubelet(kubelet_socket);
    Plugin p = plugin();
    ASSERT_TRUE(kubelet.wait_register(1));
    auto stub = kubelet.plugin();
    DeviceStream stream(*stub);
    ASSERT_TRUE(stream.wait_for([&](const auto& r) { return all(r, gpus.uuids, "Unhealthy"); }));
    ASSERT_TRUE(daemon.restart());
    EXPECT_TRUE(stream.wait_for([&](const auto& r) { return all(r, gpus.uuids, "Healthy"); }));
}

TEST(DevicePluginOptions, BadOptionsExitTwo)
{
    for (const std::vector<std::string>& args : {std::vector<std::string>{"--shares", "0"},
                                                 {"--shares", "1001"},
                                                 {"--allocation", "x"},
                                                 {"--poll-interval", "1ms"},
                                                 {"--socket", "relative.sock"},
                                                 {"--preload-file", "relative"},
                                                 {"--node-features", "relative"},
                                                 {"--bogus"}}) {
        std::vector<std::string> argv{device_plugin_path()};
        argv.insert(argv.end(), args.begin(), args.end());
        const RunResult r = run(argv);
        EXPECT_EQ(r.status, 2) << args[0];
        EXPECT_NE(r.err.find("nvshare-device-plugin: "), std::string::npos) << r.err;
    }
}

}  // namespace
}  // namespace nvshare::test
