// Whole-file reads and writes for tests.
#pragma once

#include <string>

namespace nvshare::test {

std::string read_text(const std::string& path);  // "" if unreadable
void write_text(const std::string& path, const std::string& text);
bool file_exists(const std::string& path);
// Creates (or truncates) path with a single newline: a signal file.
void touch(const std::string& path);

}  // namespace nvshare::test
