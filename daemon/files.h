// Whole-file reads and crash-safe replacement, for the config and state files.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace nvshare::daemon {

// The file's contents; nullopt if it does not exist (*error left empty) or
// cannot be read (*error says why).
std::optional<std::string> read_file(const std::string& path, std::string* error);

// Replaces `path` so that readers and crashes see the old or the new contents,
// never a mix: temp file in the same directory, fsync, rename, fsync the
// directory. False with *error on failure (the old file is then untouched).
bool write_file_atomically(const std::string& path, std::string_view contents, std::string* error);

}  // namespace nvshare::daemon
