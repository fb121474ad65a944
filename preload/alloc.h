// Allocation rewrite and accounting (the hooks themselves are exported from
// alloc.cpp).
#pragma once

namespace nvshare::preload::alloc {

void reset_after_fork();

}  // namespace nvshare::preload::alloc
