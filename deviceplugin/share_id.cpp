#include "deviceplugin/share_id.h"

namespace nvshare::deviceplugin {

namespace {
constexpr std::string_view kSeparator = "::";
}

std::string share_id(std::string_view gpu_uuid, unsigned share)
{
    return std::string(gpu_uuid) + std::string(kSeparator) + std::to_string(share);
}

std::string_view gpu_of_share(std::string_view id)
{
    const size_t at = id.rfind(kSeparator);
    if (at == std::string_view::npos || at == 0 || at + kSeparator.size() == id.size())
        return {};
    for (char c : id.substr(at + kSeparator.size()))
        if (c < '0' || c > '9')
            return {};
    return id.substr(0, at);
}

}  // namespace nvshare::deviceplugin
