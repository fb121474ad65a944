#include "preload/memory/array_size.h"

namespace nvshare::preload {

namespace {

uint64_t channel_bytes(CUarray_format format)
{
    switch (format) {
        case CU_AD_FORMAT_UNSIGNED_INT8:
        case CU_AD_FORMAT_SIGNED_INT8:
            return 1;
        case CU_AD_FORMAT_UNSIGNED_INT16:
        case CU_AD_FORMAT_SIGNED_INT16:
        case CU_AD_FORMAT_HALF:
            return 2;
        default:
            return 4;  // 32-bit formats, and the safe side for the rest
    }
}

uint64_t mul(uint64_t a, uint64_t b)
{
    uint64_t r = 0;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

uint64_t at_least_one(uint64_t v)
{
    return v == 0 ? 1 : v;
}

}  // namespace

uint64_t array_bytes(CUarray_format format, unsigned channels, uint64_t width, uint64_t height,
                     uint64_t depth)
{
    const uint64_t element = mul(channel_bytes(format), at_least_one(channels));
    return mul(mul(mul(element, width), at_least_one(height)), at_least_one(depth));
}

uint64_t mipmapped_array_bytes(CUarray_format format, unsigned channels, uint64_t width,
                               uint64_t height, uint64_t depth, unsigned levels)
{
    uint64_t total = 0;
    for (unsigned l = 0; l < levels && width != 0; ++l) {
        const uint64_t b = array_bytes(format, channels, width, height, depth);
        total = total + b < total ? UINT64_MAX : total + b;
        width = width > 1 ? width / 2 : 1;
        height = height > 1 ? height / 2 : height;
        depth = depth > 1 ? depth / 2 : depth;
    }
    return total;
}

}  // namespace nvshare::preload
