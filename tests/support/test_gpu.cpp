#include "tests/support/test_gpu.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "common/uuid.h"

namespace nvshare::test {

GpuSpec test_gpu(uint8_t number, uint64_t physical_memory)
{
    GpuSpec g;
    for (size_t i = 0; i < proto::kUuidBytes; ++i)
        g.uuid[i] = static_cast<uint8_t>(0xa0 + i);
    g.uuid[15] = number;
    g.physical_memory = physical_memory;
    g.name = "Test GPU " + std::to_string(number);
    return g;
}

std::string list_host_gpu(const std::string& info_dir)
{
    char uuid[kUuidTextSize];
    format_gpu_uuid(test_gpu(0, 0).uuid, uuid);
    const std::filesystem::path dir = std::filesystem::path(info_dir) / "0000:01:00.0";
    std::filesystem::create_directory(dir);
    std::ofstream(dir / "information") << "Model: \t\t Test GPU\nGPU UUID: \t " << uuid << "\n";
    return uuid;
}

}  // namespace nvshare::test
