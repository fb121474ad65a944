// Byte sizes for the tests, in one place: CI's unity build puts several test
// files into one translation unit, where each file's own copy clashed.
#pragma once

#include <cstdint>

namespace nvshare::test {

inline constexpr uint64_t GiB = 1ull << 30;

}  // namespace nvshare::test
