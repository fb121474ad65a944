// The device IDs the plugin advertises: "<GPU UUID>::<k>", share k (0 to
// shares-1) of one physical GPU. Each is at most 63 characters, as the
// kubelet requires (a UUID is 40).
#pragma once

#include <string>
#include <string_view>

namespace nvshare::deviceplugin {

std::string share_id(std::string_view gpu_uuid, unsigned share);
// The GPU UUID of a share ID; "" when `id` is not one.
std::string_view gpu_of_share(std::string_view id);

}  // namespace nvshare::deviceplugin
