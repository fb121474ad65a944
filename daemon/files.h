// Whole-file reads and crash-safe replacement, for the config and state files.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace nvshare::daemon {

// Config and state files are small; anything larger is not one of ours.
inline constexpr size_t kMaxFileSize = size_t{1} << 20;

// The contents of a regular file of at most kMaxFileSize bytes; nullopt if it
// does not exist (*error left empty) or cannot be read, is not a regular
// file or is larger (*error says why). Never blocks on a FIFO or device.
std::optional<std::string> read_file(const std::string& path, std::string* error);

// Replaces `path` so that readers and crashes see the old or the new contents,
// never a mix: temp file in the same directory, fsync, rename, fsync the
// directory. False with *error on failure (the old file is then untouched).
bool write_file_atomically(const std::string& path, std::string_view contents, std::string* error);

}  // namespace nvshare::daemon
