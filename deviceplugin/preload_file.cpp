#include "deviceplugin/preload_file.h"

#include "cli/cdi_spec.h"
#include "cli/preload_files.h"

namespace nvshare::deviceplugin {

namespace {
constexpr size_t kMaxPreloadFileBytes = 4096;
}

bool write_preload_file(const std::string& path, const std::string& library, std::string* error)
{
    cli::FileError file_error;
    if (cli::update_file(path, cli::cdi::preload_file_text(library), kMaxPreloadFileBytes,
                         &file_error))
        return true;
    *error = file_error.message;
    return false;
}

}  // namespace nvshare::deviceplugin
