// A made-up GPU for clients of the lock protocol in tests and benchmarks.
#pragma once

#include <cstdint>
#include <string>

#include "common/lock_client.h"

namespace nvshare::test {

// A GpuSpec whose UUID is derived from a small number.
GpuSpec test_gpu(uint8_t number, uint64_t physical_memory);

// Makes `info_dir` a --gpu-info-dir in which the host lists one GPU,
// test_gpu(0)'s, as the NVIDIA driver's /proc files do; returns its UUID.
std::string list_host_gpu(const std::string& info_dir);

}  // namespace nvshare::test
