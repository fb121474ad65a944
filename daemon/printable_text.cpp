#include "daemon/printable_text.h"

#include <cstdint>

namespace nvshare::daemon {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the well-formed UTF-8 sequence at the start of `s` and its code
// point, or 0 if it is not one (RFC 3629, table 3-7 of the Unicode standard).
size_t decode_one(std::string_view s, uint32_t* code_point)
{
    const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
    const uint8_t lead = byte(0);
    size_t length = 0;
    uint32_t cp = 0;
    uint8_t low = 0x80, high = 0xBF;  // allowed range of the second byte
    if (lead < 0x80) {
        *code_point = lead;
        return 1;
    } else if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2, cp = lead & 0x1F;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3, cp = lead & 0x0F;
        if (lead == 0xE0)
            low = 0xA0;  // overlong
        if (lead == 0xED)
            high = 0x9F;  // surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4, cp = lead & 0x07;
        if (lead == 0xF0)
            low = 0x90;  // overlong
        if (lead == 0xF4)
            high = 0x8F;  // past U+10FFFF
    } else {
        return 0;
    }
    if (s.size() < length)
        return 0;
    for (size_t i = 1; i < length; ++i) {
        const uint8_t b = byte(i);
        const uint8_t lo = i == 1 ? low : 0x80, hi = i == 1 ? high : 0xBF;
        if (b < lo || b > hi)
            return 0;
        cp = (cp << 6) | (b & 0x3F);
    }
    *code_point = cp;
    return length;
}

bool is_control(uint32_t cp)
{
    return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F);
}

// Valid UTF-8 that sd-bus still refuses in a string (found by the status
// fuzzer): U+FDD0..U+FDEF and the last two code points of every plane.
bool is_noncharacter(uint32_t cp)
{
    return (cp >= 0xFDD0 && cp <= 0xFDEF) || (cp & 0xFFFE) == 0xFFFE;
}

}  // namespace

std::string printable_utf8(std::string_view raw)
{
    if (const size_t nul = raw.find('\0'); nul != std::string_view::npos)
        raw = raw.substr(0, nul);
    std::string out;
    out.reserve(raw.size());
    while (!raw.empty()) {
        uint32_t cp = 0;
        const size_t n = decode_one(raw, &cp);
        if (n == 0 || is_noncharacter(cp)) {
            out += kReplacement;
            raw.remove_prefix(n == 0 ? 1 : n);
            continue;
        }
        if (is_control(cp))
            out += '?';
        else
            out.append(raw.substr(0, n));
        raw.remove_prefix(n);
    }
    return out;
}

}  // namespace nvshare::daemon
