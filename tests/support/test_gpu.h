// A made-up GPU for clients of the lock protocol in tests and benchmarks.
#pragma once

#include <cstdint>

#include "common/lock_client.h"

namespace nvshare::test {

// A GpuSpec whose UUID is derived from a small number.
GpuSpec test_gpu(uint8_t number, uint64_t physical_memory);

}  // namespace nvshare::test
