#include "common/units.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace nvshare {

namespace {

struct Unit {
    std::string_view suffix;
    double factor;
};

// Splits "1.5GiB" into 1.5 and "GiB". Rejects empty numbers, signs and junk.
bool split_number(std::string_view text, double* value, std::string_view* suffix)
{
    while (!text.empty() && text.front() == ' ')
        text.remove_prefix(1);
    while (!text.empty() && text.back() == ' ')
        text.remove_suffix(1);
    size_t i = 0;
    bool digits = false, dot = false;
    for (; i < text.size(); ++i) {
        const char ch = text[i];
        if (ch >= '0' && ch <= '9')
            digits = true;
        else if (ch == '.' && !dot)
            dot = true;
        else
            break;
    }
    if (!digits)
        return false;
    const std::string number(text.substr(0, i));
    char* end = nullptr;
    *value = std::strtod(number.c_str(), &end);
    if (end != number.c_str() + number.size() || !std::isfinite(*value))
        return false;
    *suffix = text.substr(i);
    while (!suffix->empty() && suffix->front() == ' ')
        suffix->remove_prefix(1);
    return true;
}

template <size_t N>
std::optional<double> scale(std::string_view text, const Unit (&units)[N])
{
    double value = 0;
    std::string_view suffix;
    if (!split_number(text, &value, &suffix))
        return std::nullopt;
    for (const Unit& u : units)
        if (suffix == u.suffix)
            return value * u.factor;
    return std::nullopt;
}

}  // namespace

std::optional<std::chrono::microseconds> parse_duration(std::string_view text)
{
    static constexpr Unit units[] = {
        {"", 1e6},     {"s", 1e6},  {"sec", 1e6},  {"us", 1},     {"usec", 1},    {"ms", 1e3},
        {"msec", 1e3}, {"m", 60e6}, {"min", 60e6}, {"h", 3600e6}, {"hr", 3600e6},
    };
    // Callers hold durations as nanoseconds (the scheduler's Duration): a
    // longer one (~292 years) would overflow there, wrap, and could pass a
    // range check as a short one. The double of the limit rounds up, hence >=.
    const auto us = scale(text, units);
    if (!us || *us >= static_cast<double>(std::numeric_limits<int64_t>::max() / 1000))
        return std::nullopt;
    return std::chrono::microseconds(static_cast<int64_t>(std::llround(*us)));
}

std::optional<uint64_t> parse_size(std::string_view text)
{
    static constexpr double K = 1024.0;
    static constexpr Unit units[] = {
        {"", 1},
        {"B", 1},
        {"K", K},
        {"KiB", K},
        {"KB", 1e3},
        {"M", K * K},
        {"MiB", K * K},
        {"MB", 1e6},
        {"G", K * K * K},
        {"GiB", K * K * K},
        {"GB", 1e9},
        {"T", K * K * K * K},
        {"TiB", K * K * K * K},
        {"TB", 1e12},
    };
    const auto bytes = scale(text, units);
    // 2^64 is the first double past UINT64_MAX; llround would stop at 2^63.
    if (!bytes || *bytes >= 18446744073709551616.0)
        return std::nullopt;
    return static_cast<uint64_t>(std::round(*bytes));
}

std::string format_duration(std::chrono::microseconds d)
{
    const auto us = d.count();
    char buf[64];
    if (us % 60000000 == 0 && us >= 60000000)
        snprintf(buf, sizeof buf, "%lldmin", static_cast<long long>(us / 60000000));
    else if (us % 1000000 == 0)
        snprintf(buf, sizeof buf, "%llds", static_cast<long long>(us / 1000000));
    else if (us >= 1000000)
        snprintf(buf, sizeof buf, "%.3gs", static_cast<double>(us) / 1e6);
    else if (us % 1000 == 0)
        snprintf(buf, sizeof buf, "%lldms", static_cast<long long>(us / 1000));
    else
        snprintf(buf, sizeof buf, "%lldus", static_cast<long long>(us));
    return buf;
}

std::string format_size(uint64_t bytes)
{
    static constexpr const char* names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = static_cast<double>(bytes);
    size_t i = 0;
    while (v >= 1024.0 && i + 1 < std::size(names)) {
        v /= 1024.0;
        ++i;
    }
    char buf[32];
    if (i == 0)
        snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
    else
        snprintf(buf, sizeof buf, "%.1f %s", v, names[i]);
    return buf;
}

}  // namespace nvshare
