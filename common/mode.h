// The anti-thrashing mode as users spell it: "on", "off", "auto".
#pragma once

#include <optional>
#include <string_view>

#include "common/protocol.h"

namespace nvshare {

inline std::optional<proto::Mode> parse_mode(std::string_view s)
{
    if (s == "on")
        return proto::Mode::On;
    if (s == "off")
        return proto::Mode::Off;
    if (s == "auto")
        return proto::Mode::Auto;
    return std::nullopt;
}

}  // namespace nvshare
