// A uid as people read it: the user's name, or the number when it has none.
#pragma once

#include <cstdint>
#include <string>

namespace nvshare {

std::string user_name(uint32_t uid);

}  // namespace nvshare
