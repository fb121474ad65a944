// libnvshare's environment variables, parsed by value ("0" means off) and
// read once, on the first CUDA call, never in a constructor.
#pragma once

#include <cstdint>

#include "common/protocol.h"

namespace nvshare::preload {

enum class Flag { Unset, Off, On, Invalid };

// "1", "true", "yes", "on" -> On; "0", "false", "no", "off", "" -> Off
// (case-insensitive); nullptr -> Unset; anything else -> Invalid.
Flag parse_flag(const char* text);

// When nvshare migrates memory in bulk: "auto" (where it pays, see
// residency.h), or a flag: always / never.
enum class Policy : uint8_t { Auto, On, Off };

// "auto" -> Auto; a flag -> On/Off; false (and Auto) on anything else.
bool parse_policy(const char* text, Policy* out);

// NVSHARE_SWAP: "auto" (or unset, or empty) -> true, "managed" -> false;
// false (and true) on anything else.
bool parse_swap(const char* text, bool* engine);

// Plain decimal milliseconds up to `max`; false on anything else.
bool parse_millis(const char* text, uint32_t max, uint32_t* out);

// NVSHARE_PRIORITY: "interactive", "normal", "batch" -> that class; nullptr
// or "" -> Unset (the admin's rules decide); false (and Unset) on anything
// else.
bool parse_priority(const char* text, proto::Priority* out);

inline constexpr uint32_t kDefaultIdleReleaseMs = 20;
inline constexpr uint32_t kDefaultWaitNoticeMs = 2000;

struct Config {
    bool disabled = false;        // NVSHARE_DISABLE: pass everything through
    bool excluded = false;        // listed by the admin: pass-through too
    bool second_copy = false;     // another libnvshare.so owns the process: pass-through
    uint32_t owner_protocol = 0;  // with second_copy: the owner's protocol version
    bool debug = false;           // NVSHARE_DEBUG: debug messages on stderr
    bool single_oversub = false;  // NVSHARE_ENABLE_SINGLE_OVERSUB
    bool managed = true;          // NVSHARE_MANAGED, else not in the admin's plain-memory list
    uint32_t idle_release_ms = kDefaultIdleReleaseMs;  // NVSHARE_IDLE_RELEASE_MS, 0 = never
    uint32_t wait_notice_ms = kDefaultWaitNoticeMs;    // NVSHARE_WAIT_NOTICE_MS, 0 = never
    char socket_path[108] = {};                        // NVSHARE_SOCKET or the built-in default
    Policy prefetch = Policy::Auto;                    // NVSHARE_PREFETCH: bulk swap-in on grant
    Policy evict = Policy::Auto;                       // NVSHARE_EVICT: bulk swap-out on release
    // NVSHARE_SWAP: "auto" (the swap engine where the GPU allows it) or
    // "managed" (device allocations become managed memory, as before)
    bool swap_engine = true;
    // NVSHARE_PRIORITY: the class asked for in Hello
    proto::Priority priority = proto::Priority::Unset;
};

const Config& config();

}  // namespace nvshare::preload
