#include "tests/support/files.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

namespace nvshare::test {

std::string read_text(const std::string& path)
{
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void write_text(const std::string& path, const std::string& text)
{
    std::ofstream out(path, std::ios::trunc);
    out << text;
}

bool file_exists(const std::string& path)
{
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

void touch(const std::string& path)
{
    std::ofstream(path).put('\n');
}

}  // namespace nvshare::test
