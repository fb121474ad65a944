#include "daemon/gpu_discovery.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

using namespace nvshare::daemon;
namespace fs = std::filesystem;

namespace {

// As the 580 driver writes it.
constexpr const char* kInformation =
    "Model: \t\t NVIDIA H200\n"
    "IRQ:   \t\t 41\n"
    "GPU UUID: \t GPU-8d24b632-fa25-d2ce-acc8-459bda596624\n"
    "Video BIOS: \t 96.00.a5.00.1a\n"
    "Bus Type: \t PCIe\n"
    "Bus Location: \t 0000:00:06.0\n";

TEST(GpuDiscovery, ParsesTheDriversInformationFile)
{
    const auto d = parse_gpu_information(kInformation);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->uuid, "GPU-8d24b632-fa25-d2ce-acc8-459bda596624");
    EXPECT_EQ(d->name, "NVIDIA H200");
    EXPECT_EQ(d->physical_memory, 0u);
}

TEST(GpuDiscovery, RejectsFilesWithoutAUuid)
{
    EXPECT_FALSE(parse_gpu_information("Model: X\n"));
    EXPECT_FALSE(parse_gpu_information("GPU UUID: GPU-short\n"));
    EXPECT_FALSE(parse_gpu_information(""));
    EXPECT_FALSE(parse_gpu_information("garbage without colons"));
}

TEST(GpuDiscovery, ListsGpusInBusOrderAndSkipsJunk)
{
    const fs::path dir = fs::temp_directory_path() / ("gpus-" + std::to_string(getpid()));
    fs::remove_all(dir);
    auto write = [&](const std::string& bus, const std::string& text) {
        fs::create_directories(dir / bus);
        std::ofstream(dir / bus / "information") << text;
    };
    std::string second = kInformation;
    second.replace(second.find("8d24b632"), 8, "11111111");
    write("0000:41:00.0", second);
    write("0000:00:06.0", kInformation);
    write("0000:99:00.0", "not a gpu");
    fs::create_directories(dir / "0000:aa:00.0");  // no information file
    const auto gpus = discover_gpus(dir);
    ASSERT_EQ(gpus.size(), 2u);
    EXPECT_EQ(gpus[0].uuid, "GPU-8d24b632-fa25-d2ce-acc8-459bda596624");
    EXPECT_EQ(gpus[1].uuid, "GPU-11111111-fa25-d2ce-acc8-459bda596624");
    fs::remove_all(dir);
    EXPECT_TRUE(discover_gpus(dir).empty()) << "a missing directory is no error";
}

}  // namespace
