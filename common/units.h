// Parsing and printing of the durations and sizes that users type:
// "30s", "500ms", "2min", "1.5h", plain numbers (seconds); "16G", "512MiB",
// plain numbers (bytes). Shared by nvshared's options, its config file and
// nvsharectl, so every place accepts the same spellings.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace nvshare {

std::optional<std::chrono::microseconds> parse_duration(std::string_view text);
std::optional<uint64_t> parse_size(std::string_view text);

std::string format_duration(std::chrono::microseconds d);  // "30s", "1.5s", "250ms", "2min"
std::string format_size(uint64_t bytes);                   // "16.0 GiB", "512 B"

}  // namespace nvshare
