// What the fuzz targets share: a property check that stops the fuzzer (so it
// finds logic bugs, not only memory bugs) and the split of one input into the
// several texts a parser takes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#define FUZZ_CHECK(cond)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: property violated: %s\n", __FILE__, __LINE__, #cond); \
            __builtin_trap();                                                             \
        }                                                                                 \
    } while (0)

namespace nvshare::fuzz {

// Separates the texts of one input: ASCII RS (record separator), which the
// parsers give no meaning, so a seed file stays readable.
inline constexpr char kFieldSeparator = '\x1e';

inline std::vector<std::string> split_fields(const uint8_t* data, size_t size)
{
    std::vector<std::string> fields(1);
    for (size_t i = 0; i < size; ++i) {
        if (data[i] == static_cast<uint8_t>(kFieldSeparator))
            fields.emplace_back();
        else
            fields.back() += static_cast<char>(data[i]);
    }
    return fields;
}

// The lines of `text` split at '\n' (a last line without one included).
inline std::vector<std::string_view> lines_of(std::string_view text)
{
    std::vector<std::string_view> lines;
    size_t start = 0;
    while (start < text.size()) {
        const size_t end = text.find('\n', start);
        if (end == std::string_view::npos) {
            lines.push_back(text.substr(start));
            break;
        }
        lines.push_back(text.substr(start, end - start));
        start = end + 1;
    }
    return lines;
}

}  // namespace nvshare::fuzz
