// Writes all of `text` to `fd`, through short writes and EINTR; false when
// the descriptor refuses (errno says why). For nvsharectl's files and
// nvshare-metrics' answer.
#pragma once

#include <string_view>

namespace nvshare {

bool write_all(int fd, std::string_view text);

}  // namespace nvshare
