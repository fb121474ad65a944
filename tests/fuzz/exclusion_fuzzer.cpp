// libFuzzer target for libnvshare.so's exclusion list (preload/exclusion.h),
// which every process on the host reads from a root-owned file.
//
// Input: EXE <RS> COMM <RS> LIST (fields missing from the input are null
// pointers). Besides the sanitizers, it checks what the header promises:
// nvshared is always excluded; a list names the executable by its path or
// its file name and the process by its comm; lines are independent (a list
// excludes exactly when one of its halves does), so more lines never exclude
// less; and reading the list from a file keeps a prefix of it, never half a
// line, whatever the buffer size.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "preload/exclusion.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

// Whether `name` as a line of the list names itself: no newline, no comment,
// no blanks around it that the parser would trim.
bool listable(std::string_view name)
{
    const auto blank = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\r'; };
    return !name.empty() && name.find_first_of("\n#") == std::string_view::npos &&
           !blank(name.front()) && !blank(name.back());
}

bool excluded(const char* exe, const char* comm, const std::string& list)
{
    return nvshare_is_excluded(exe, comm, list.c_str());
}

// nvshare_load_exclusion_list() on `content` through a real file descriptor
// (a memfd, named by /proc/self/fd) with a buffer of `size` bytes.
void check_load(const std::string& content, size_t size)
{
    const int fd = memfd_create("exclusion-fuzzer", MFD_CLOEXEC);
    FUZZ_CHECK(fd >= 0);
    FUZZ_CHECK(write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()));
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    std::vector<char> buf(size, 'x');
    const size_t used = nvshare_load_exclusion_list(path.c_str(), buf.data(), size);
    close(fd);
    FUZZ_CHECK(used < size && buf[used] == '\0');
    FUZZ_CHECK(memcmp(buf.data(), content.data(), used) == 0);
    if (content.size() <= size - 1) {
        FUZZ_CHECK(used == content.size());
    } else if (size < 2) {
        FUZZ_CHECK(used == 0);
    } else {
        // The longest prefix that fits and ends a line.
        const size_t last_newline = content.rfind('\n', size - 2);
        FUZZ_CHECK(used == (last_newline == std::string::npos ? 0 : last_newline + 1));
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const auto fields = nvshare::fuzz::split_fields(data, size);
    // Like /proc/self/exe and comm: C strings, so each ends at a NUL byte.
    const std::string exe_text = fields[0].c_str();
    const std::string comm_text = fields.size() > 1 ? fields[1].c_str() : "";
    const std::string list = fields.size() > 2 ? fields[2].c_str() : "";
    const char* exe = exe_text.c_str();
    const char* comm = fields.size() > 1 ? comm_text.c_str() : nullptr;

    const bool by_default = nvshare_is_excluded(exe, comm, nullptr);
    FUZZ_CHECK(excluded(exe, comm, "") == by_default);
    FUZZ_CHECK(nvshare_is_excluded("/usr/sbin/nvshared", comm, list.c_str()));
    FUZZ_CHECK(nvshare_is_excluded(nullptr, "nvshared", list.c_str()));
    const bool whole = excluded(exe, comm, list);
    FUZZ_CHECK(!by_default || whole);

    // Lines are independent: cut at the newline nearest the middle.
    if (const size_t cut = list.find('\n', list.size() / 2); cut != std::string::npos)
        FUZZ_CHECK(whole == (excluded(exe, comm, list.substr(0, cut)) ||
                             excluded(exe, comm, list.substr(cut + 1))));

    // Each way of naming the process works, also after the fuzzed lines.
    if (listable(exe_text) && exe_text.front() == '/')
        FUZZ_CHECK(excluded(exe, nullptr, list + "\n" + exe_text));
    const std::string base = exe_text.substr(exe_text.rfind('/') + 1);
    if (listable(base))
        FUZZ_CHECK(excluded(exe, nullptr, list + "\n " + base + " # by name"));
    if (comm != nullptr && listable(comm_text) && comm_text.front() != '/' &&
        comm_text.size() <= 15) {
        FUZZ_CHECK(excluded(nullptr, comm, list + "\n" + comm_text));
        // The kernel cuts comm to 15 characters: a longer name still matches it.
        if (comm_text.size() == 15)
            FUZZ_CHECK(excluded(nullptr, comm, list + "\n" + comm_text + "-and-more"));
    }

    // The file may hold anything, NUL bytes included.
    const std::string raw_list = fields.size() > 2 ? fields[2] : "";
    check_load(raw_list, nvshare_exclusion_list_max);
    check_load(raw_list, 1 + (size % 64));
    return 0;
}
