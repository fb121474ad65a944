// Which exported variant a driver pointer is. cuGetProcAddress answers a base
// name ("cuMemAlloc") with the variant that fits the caller's CUDA version and
// stream flags ("cuMemAlloc_v2", "cuLaunchKernel_ptsz"); we hand back our
// wrapper of exactly that variant, identified by pointer, never by guessing.
#pragma once

#include <cstddef>

namespace nvshare::preload {

// Length of `name` without a variant suffix: "_ptsz"/"_ptds", then "_v<N>".
size_t base_length(const char* name);

// Whether `name` is `base` (its first base_len characters) plus nothing or a
// variant suffix: "_v<N>", "_ptsz", "_ptds", "_v<N>_ptsz", "_v<N>_ptds".
bool is_variant_of(const char* name, const char* base, size_t base_len);

// Among names[0..count), the variant of `symbol` whose real function
// (lookup(index, ctx)) is `pointer`: its index, or -1. *any_variant tells
// whether `symbol` has variants in `names` at all.
using VariantLookup = const void* (*)(size_t index, void* ctx);
int match_variant(const char* symbol, const void* pointer, const char* const* names, size_t count,
                  VariantLookup lookup, void* ctx, bool* any_variant);

}  // namespace nvshare::preload
