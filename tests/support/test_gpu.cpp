#include "tests/support/test_gpu.h"

#include <string>

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

}  // namespace nvshare::test
