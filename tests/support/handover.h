// How fast the lock changes hands between two clients: what the flood and
// storm tests measure under attack against the same quiet figure.
#pragma once

#include <vector>

#include "common/lock_client.h"

namespace nvshare::test {

// The times from one client's Released to the other's Grant, in
// microseconds, over `rounds` hand-overs of GPU 0 10 ms apart (the GPU must
// make them take turns: anti-thrashing on). `a` holds the lock when called,
// and again after an even number of rounds. Fewer than `rounds` times: a
// Grant did not come within 10 s.
std::vector<double> handovers(LockClient& a, LockClient& b, int rounds);

// The median of `values` (0 when empty).
double median(std::vector<double> values);

}  // namespace nvshare::test
