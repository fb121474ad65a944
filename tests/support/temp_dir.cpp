#include "tests/support/temp_dir.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace nvshare::test {

TempDir::TempDir()
{
    char pattern[] = "/tmp/nvshare-test.XXXXXX";
    if (mkdtemp(pattern) == nullptr)
        throw std::runtime_error(std::string("mkdtemp: ") + strerror(errno));
    path_ = pattern;
    chmod(path_.c_str(), 0755);
}

TempDir::~TempDir()
{
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
}

}  // namespace nvshare::test
