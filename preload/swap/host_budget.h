// How much host memory the swap engine may pin now. Pure logic: the text of
// /proc/meminfo in, bytes out (unit-tested directly). Pinned memory cannot
// be reclaimed: pinning past what the host has left brings the kernel's
// OOM killer onto the programs (tests/RELIABILITY.md).
#pragma once

#include <cstddef>
#include <cstdint>

namespace nvshare::preload::host_budget {

struct Figures {
    uint64_t total = 0;      // MemTotal, bytes
    uint64_t available = 0;  // MemAvailable, bytes
    bool known = false;      // both were found
};

// Reads MemTotal and MemAvailable (in kB) from /proc/meminfo's text.
Figures parse_meminfo(const char* text, size_t length);

// The least left available: 1 GiB, or 1/32 of the host's memory if more.
uint64_t reserve(uint64_t total);

// Whether the host runs low: less available than 1/8 of its memory (at
// least twice the reserve). Host memory kept only to save pinning later
// (for data that is on the GPU) is given back then.
bool low(const Figures& f);

// What one round of making host memory may pin: a quarter of what is
// available above the reserve, so that up to four processes pinning at the
// same moment stay within it (with half each, three processes pinning at
// once went past it); everything where the figures are unknown.
uint64_t pinnable(const Figures& f);

}  // namespace nvshare::preload::host_budget
