// Small text helpers for the parsers of files people write (nvshared's
// settings, the driver's GPU list).
#pragma once

#include <string_view>

namespace nvshare {

// Without leading and trailing blanks (spaces, tabs; a trailing CR too, for
// files edited on other systems).
inline std::string_view trim(std::string_view s)
{
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
        s.remove_suffix(1);
    return s;
}

}  // namespace nvshare
