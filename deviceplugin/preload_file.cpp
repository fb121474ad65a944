#include "deviceplugin/preload_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "cli/preload_files.h"

namespace nvshare::deviceplugin {

namespace {
constexpr size_t kMaxPreloadFileBytes = 4096;
}

bool write_preload_file(const std::string& path, const std::string& library, std::string* error)
{
    const std::string dir = std::filesystem::path(path).parent_path().string();
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
        *error = "cannot create " + dir + ": " + strerror(errno);
        return false;
    }
    const std::string text = library + "\n";
    std::string current;
    bool exists = false;
    cli::FileError file_error;
    if (cli::read_regular_file(path, kMaxPreloadFileBytes, &current, &exists, &file_error) &&
        ((exists && current == text) || cli::replace_file(path, text, &file_error)))
        return true;
    *error = file_error.message;
    return false;
}

}  // namespace nvshare::deviceplugin
