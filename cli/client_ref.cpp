#include "cli/client_ref.h"

#include <charconv>

namespace nvshare::cli {

std::optional<ClientRef> parse_client_ref(std::string_view text)
{
    ClientRef ref;
    if (text.substr(0, 4) == "pid:") {
        ref.by_pid = true;
        text.remove_prefix(4);
    }
    const char* end = text.data() + text.size();
    const auto [stop, error] = std::from_chars(text.data(), end, ref.value);
    if (text.empty() || error != std::errc() || stop != end)
        return std::nullopt;
    if (ref.by_pid && (ref.value == 0 || ref.value > INT32_MAX))
        return std::nullopt;
    return ref;
}

}  // namespace nvshare::cli
