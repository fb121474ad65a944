#include "preload/swap/host_budget.h"

#include <cstring>

#include "preload/swap/tuning.h"

namespace nvshare::preload::host_budget {

namespace {

// The value in kB of the line that starts with `key` ("MemTotal:"), as
// bytes; false if there is no such line.
bool field(const char* text, size_t length, const char* key, uint64_t* bytes)
{
    const size_t key_length = strlen(key);
    for (size_t at = 0; at + key_length <= length;) {
        const char* line = text + at;
        const void* end = memchr(line, '\n', length - at);
        const size_t line_length = end != nullptr
                                       ? static_cast<size_t>(static_cast<const char*>(end) - line)
                                       : length - at;
        if (line_length >= key_length && memcmp(line, key, key_length) == 0) {
            size_t i = key_length;
            while (i < line_length && line[i] == ' ')
                ++i;
            uint64_t kb = 0;
            bool digits = false;
            for (; i < line_length && line[i] >= '0' && line[i] <= '9'; ++i, digits = true)
                kb = kb * 10 + static_cast<uint64_t>(line[i] - '0');
            *bytes = kb * 1024;
            return digits;
        }
        at += line_length + 1;
    }
    return false;
}

}  // namespace

Figures parse_meminfo(const char* text, size_t length)
{
    Figures f;
    f.known = field(text, length, "MemTotal:", &f.total) &&
              field(text, length, "MemAvailable:", &f.available);
    return f;
}

uint64_t reserve(uint64_t total)
{
    const uint64_t share = total / tuning::kHostReserveShare;
    return share > tuning::kHostReserveLeast ? share : tuning::kHostReserveLeast;
}

bool low(const Figures& f)
{
    const uint64_t twice_reserve = 2 * reserve(f.total), share = f.total / tuning::kHostLowShare;
    return f.known && f.available < (share > twice_reserve ? share : twice_reserve);
}

uint64_t pinnable(const Figures& f)
{
    if (!f.known)
        return UINT64_MAX;
    const uint64_t keep_free = reserve(f.total);
    return f.available > keep_free ? (f.available - keep_free) / tuning::kHostPinShare : 0;
}

}  // namespace nvshare::preload::host_budget
