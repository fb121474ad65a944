// The anti-thrashing mode as users spell it: "on", "off", "auto", both ways.
// Header-only, usable in libnvshare.so too.
#pragma once

#include <optional>
#include <string_view>

#include "common/protocol.h"

namespace nvshare::proto {

inline const char* mode_name(Mode m)
{
    switch (m) {
        case Mode::On:
            return "on";
        case Mode::Off:
            return "off";
        case Mode::Auto:
            return "auto";
    }
    return "?";
}

}  // namespace nvshare::proto

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
