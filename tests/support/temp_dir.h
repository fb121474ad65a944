// A fresh directory under /tmp for one test's files.
#pragma once

#include <string>

namespace nvshare::test {

// Removed with its contents at destruction. Mode 0755: processes of other
// uids (setpriv, test clients as nobody) must reach what is in it.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return path_; }
    std::string operator/(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

}  // namespace nvshare::test
