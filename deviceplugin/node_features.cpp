#include "deviceplugin/node_features.h"

#include "cli/preload_files.h"

namespace nvshare::deviceplugin {

namespace {
constexpr size_t kMaxNodeFeaturesBytes = 4096;
}

std::string node_features_text(unsigned shares)
{
    return "nvshare.com/gpu.shared=true\nnvshare.com/gpu.shares-per-gpu=" + std::to_string(shares) +
           "\n";
}

bool write_node_features(const std::string& path, unsigned shares, std::string* error)
{
    cli::FileError file_error;
    if (cli::update_file(path, node_features_text(shares), kMaxNodeFeaturesBytes, &file_error))
        return true;
    *error = file_error.message;
    return false;
}

bool remove_node_features(const std::string& path, std::string* error)
{
    cli::FileError file_error;
    if (cli::remove_file(path, &file_error))
        return true;
    *error = file_error.message;
    return false;
}

}  // namespace nvshare::deviceplugin
