// GetPreferredAllocation's choice among the shares the kubelet offers:
// spread a container's shares over different GPUs, or pack them onto as few
// GPUs as possible.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nvshare::deviceplugin {

enum class Policy { Spread, Pack };

std::optional<Policy> parse_policy(std::string_view name);  // "spread", "pack"

// `size` IDs: all of `must_include` (in that order), then shares of
// `available` chosen by `policy`. Spread takes next from the GPU with the
// fewest chosen shares, pack from the one with the most; ties go to the GPU
// with more shares left, then the one offered first. Within a GPU, shares go
// in the order offered. Deterministic: the same request, the same answer.
std::vector<std::string> preferred_allocation(const std::vector<std::string>& available,
                                              const std::vector<std::string>& must_include,
                                              size_t size, Policy policy);

}  // namespace nvshare::deviceplugin
