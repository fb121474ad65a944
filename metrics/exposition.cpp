#include "metrics/exposition.h"

#include <charconv>

namespace nvshare::metrics {

std::string escape_label(const std::string& value)
{
    std::string out;
    for (char ch : value) {
        if (ch == '\\')
            out += "\\\\";
        else if (ch == '"')
            out += "\\\"";
        else if (ch == '\n')
            out += "\\n";
        else
            out += ch;
    }
    return out;
}

std::string number(double v)
{
    char text[512];  // room for any double in fixed notation
    const auto r = std::to_chars(text, text + sizeof text, v, std::chars_format::fixed);
    return std::string(text, r.ptr);
}

std::string family_head(const char* name, const char* type, const char* help)
{
    return std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace nvshare::metrics
