// GPU UUIDs as the driver gives them (16 bytes) and as people read them
// ("GPU-1a2b3c4d-..."), the form nvidia-smi prints. Header-only and libc-only
// so that libnvshare.so can use it too.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nvshare {

inline constexpr size_t kUuidTextSize = 41;  // "GPU-" + 36 + NUL

inline void format_gpu_uuid(const uint8_t (&uuid)[16], char (&out)[kUuidTextSize])
{
    static constexpr char hex[] = "0123456789abcdef";
    const char* prefix = "GPU-";
    size_t o = 0;
    for (; prefix[o] != '\0'; ++o)
        out[o] = prefix[o];
    for (size_t i = 0; i < 16; ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[o++] = '-';
        out[o++] = hex[uuid[i] >> 4];
        out[o++] = hex[uuid[i] & 15];
    }
    out[o] = '\0';
}

}  // namespace nvshare
