#include <cstring>

#include "preload/hooks/proc_address.h"

namespace nvshare::preload {

namespace {

bool ends_with(const char* s, size_t len, const char* suffix)
{
    const size_t n = strlen(suffix);
    return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

// Length of a trailing "_v<digits>" ending at len, or 0.
size_t version_suffix(const char* s, size_t len)
{
    size_t i = len;
    while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9')
        --i;
    if (i == len || i < 2 || s[i - 1] != 'v' || s[i - 2] != '_')
        return 0;
    return len - (i - 2);
}

}  // namespace

size_t base_length(const char* name)
{
    size_t len = strlen(name);
    if (ends_with(name, len, "_ptsz") || ends_with(name, len, "_ptds"))
        len -= 5;
    return len - version_suffix(name, len);
}

bool is_variant_of(const char* name, const char* base, size_t base_len)
{
    if (strncmp(name, base, base_len) != 0)
        return false;
    const size_t len = strlen(name);
    if (len < base_len)
        return false;
    return base_length(name) == base_len;
}

int match_variant(const char* symbol, const void* pointer, const char* const* names, size_t count,
                  VariantLookup lookup, void* ctx, bool* any_variant)
{
    const size_t base_len = base_length(symbol);
    *any_variant = false;
    for (size_t i = 0; i < count; ++i) {
        if (names[i] == nullptr || !is_variant_of(names[i], symbol, base_len))
            continue;
        *any_variant = true;
        const void* real = lookup(i, ctx);
        if (real != nullptr && real == pointer)
            return static_cast<int>(i);
    }
    return -1;
}

}  // namespace nvshare::preload
