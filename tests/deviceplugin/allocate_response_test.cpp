// Allocate's answer for one container, without gRPC.
#include "deviceplugin/allocate_response.h"

#include <gtest/gtest.h>

namespace nvshare::deviceplugin {
namespace {

Options options(const std::string& socket)
{
    Options o;
    o.nvshare_socket = socket;
    o.library = "/usr/lib/x86_64-linux-gnu/libnvshare.so";
    o.preload_file = "/var/lib/nvshare/container-ld.so.preload";
    return o;
}

TEST(AllocateResponse, ASocketOfAnotherNameIsNamedToTheLibrary)
{
    const auto r = container_allocation({"GPU-a"}, options("/srv/gpu/lock.sock"));
    ASSERT_GE(r.mounts_size(), 1);
    EXPECT_EQ(r.mounts(0).host_path(), "/srv/gpu");
    EXPECT_EQ(r.mounts(0).container_path(), "/run/nvshare");  // where the library looks
    EXPECT_EQ(r.envs().at("NVSHARE_SOCKET"), "/run/nvshare/lock.sock");
}

TEST(AllocateResponse, TheDefaultNameNeedsNoVariable)
{
    const auto r = container_allocation({"GPU-a", "GPU-b"}, options("/srv/gpu/nvshare.sock"));
    EXPECT_EQ(r.envs().count("NVSHARE_SOCKET"), 0u);
    EXPECT_EQ(r.envs().at("NVIDIA_VISIBLE_DEVICES"), "GPU-a,GPU-b");
    ASSERT_EQ(r.cdi_devices_size(), 2);
    EXPECT_EQ(r.cdi_devices(1).name(), "nvshare.com/gpu=GPU-b");
}

TEST(AllocateResponse, NoCdiNamesWhenTurnedOff)
{
    Options o = options("/run/nvshare/nvshare.sock");
    o.cdi = false;
    const auto r = container_allocation({"GPU-a"}, o);
    EXPECT_EQ(r.cdi_devices_size(), 0);
    ASSERT_EQ(r.mounts_size(), 3);
    EXPECT_EQ(r.mounts(2).host_path(), o.preload_file);
    EXPECT_EQ(r.mounts(2).container_path(), "/etc/ld.so.preload");
}

}  // namespace
}  // namespace nvshare::deviceplugin
