// Text from outside the daemon (a client's Hello, /proc, the driver) made fit
// to log, render as JSON and send on D-Bus, all of which need valid UTF-8 and
// one line per value. Done once, where the text enters: nothing downstream
// has to check again.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace nvshare::daemon {

// `raw` up to its first NUL, as valid UTF-8: each byte that does not begin a
// well-formed sequence (bad lead or continuation bytes, a sequence cut short,
// overlong forms, surrogates, code points past U+10FFFF) becomes U+FFFD, and
// so does a noncharacter (U+FDD0..U+FDEF, U+xxFFFE, U+xxFFFF), which D-Bus
// refuses; control characters (C0, DEL, C1) become '?'.
std::string printable_utf8(std::string_view raw);

// The same for a fixed-size field that need not be NUL-terminated.
inline std::string printable_utf8(const char* field, size_t size)
{
    size_t n = 0;
    while (n < size && field[n] != '\0')
        ++n;
    return printable_utf8(std::string_view(field, n));
}

}  // namespace nvshare::daemon
