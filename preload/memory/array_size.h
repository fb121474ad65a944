// Bytes of device memory a CUDA array takes, from its descriptor (pure; the
// driver's own figure is not available for ordinary arrays). Used to count
// arrays and mipmapped arrays against the GPU like other allocations.
#pragma once

#include <cstdint>

#include "preload/driver/cuda_api.h"

namespace nvshare::preload {

// Width x height x depth elements of `channels` channels of `format` (a
// height or depth of 0 means 1). Formats of unknown size count 4 bytes a
// channel. Saturates instead of overflowing.
uint64_t array_bytes(CUarray_format format, unsigned channels, uint64_t width, uint64_t height,
                     uint64_t depth);

// All `levels` levels of a mipmapped array, each half the size of the one
// before in every dimension that is not 0 (never below 1).
uint64_t mipmapped_array_bytes(CUarray_format format, unsigned channels, uint64_t width,
                               uint64_t height, uint64_t depth, unsigned levels);

}  // namespace nvshare::preload
