#include "cli/library_facts.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <deque>

#include "build-config.h"

// The linker's symbol for this program's own ELF header.
extern "C" const ElfW(Ehdr) __ehdr_start __attribute__((visibility("hidden")));

namespace nvshare::cli {

namespace {

constexpr int kMaxSymlinks = 40;  // the kernel's limit (MAXSYMLINKS)
constexpr size_t kHeaderBytes = 64;

// The path's components, without empty ones and ".".
std::deque<std::string> components(const std::string& path)
{
    std::deque<std::string> out;
    size_t pos = 0;
    while (pos <= path.size()) {
        size_t end = path.find('/', pos);
        if (end == std::string::npos)
            end = path.size();
        std::string name = path.substr(pos, end - pos);
        if (!name.empty() && name != ".")
            out.push_back(std::move(name));
        pos = end + 1;
    }
    return out;
}

std::string parent_of(const std::string& dir)
{
    const size_t slash = dir.rfind('/');
    return slash == 0 || slash == std::string::npos ? "/" : dir.substr(0, slash);
}

preload::NodeFacts node(const std::string& path, const struct stat& st)
{
    return {path, static_cast<uint32_t>(st.st_uid), static_cast<uint32_t>(st.st_mode)};
}

void read_header(const std::string& path, std::string* header)
{
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return;  // an empty header: "not an ELF file"
    char buf[kHeaderBytes];
    size_t done = 0;
    while (done < sizeof buf) {
        const ssize_t n = read(fd, buf + done, sizeof buf - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += static_cast<size_t>(n);
    }
    close(fd);
    header->assign(buf, done);
}

bool read_at(int fd, void* buf, size_t size, off_t offset)
{
    return pread(fd, buf, size, offset) == static_cast<ssize_t>(size);
}

// Whether the 64-bit ET_DYN object at `path` is a position-independent
// executable: DF_1_PIE in DT_FLAGS_1, which linkers set on PIEs only (a
// library that can also run, such as libc.so.6, has a PT_INTERP too but no
// DF_1_PIE). Of the host's class and byte order only: others are refused
// before this matters.
bool is_pie(const std::string& path)
{
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return false;
    bool pie = false;
    ElfW(Ehdr) eh{};
    if (read_at(fd, &eh, sizeof eh, 0) && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
        eh.e_type == ET_DYN && eh.e_phentsize == sizeof(ElfW(Phdr))) {
        for (ElfW(Half) i = 0; i < eh.e_phnum && !pie; ++i) {
            ElfW(Phdr) ph{};
            if (!read_at(fd, &ph, sizeof ph, static_cast<off_t>(eh.e_phoff + i * sizeof ph)))
                break;
            if (ph.p_type != PT_DYNAMIC)
                continue;
            // A dynamic section is a few hundred entries at most.
            const size_t count = std::min<size_t>(ph.p_filesz / sizeof(ElfW(Dyn)), 4096);
            for (size_t k = 0; k < count; ++k) {
                ElfW(Dyn) d{};
                if (!read_at(fd, &d, sizeof d, static_cast<off_t>(ph.p_offset + k * sizeof d)) ||
                    d.d_tag == DT_NULL)
                    break;
                if (d.d_tag == DT_FLAGS_1 && (d.d_un.d_val & DF_1_PIE) != 0)
                    pie = true;
            }
        }
    }
    close(fd);
    return pie;
}

// The dynamic linker this program runs under (its PT_INTERP).
std::string interpreter()
{
    std::string path;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* out) {
            // The first object is the program itself.
            for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i)
                if (info->dlpi_phdr[i].p_type == PT_INTERP)
                    *static_cast<std::string*>(out) =
                        reinterpret_cast<const char*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
            return 1;
        },
        &path);
    return path;
}

// `ld.so --list-diagnostics` (glibc 2.33 and later), run with an empty
// environment as a plain program start sees it; "" if it cannot be run.
std::string ld_so_diagnostics()
{
    const std::string ld_so = interpreter();
    if (ld_so.empty())
        return {};
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return {};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    char* argv[] = {const_cast<char*>(ld_so.c_str()), const_cast<char*>("--list-diagnostics"),
                    nullptr};
    char* envp[] = {nullptr};
    pid_t pid = -1;
    const int err = posix_spawn(&pid, ld_so.c_str(), &actions, nullptr, argv, envp);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    std::string out;
    if (err == 0) {
        char buf[4096];
        for (;;) {
            const ssize_t n = read(fds[0], buf, sizeof buf);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0 || out.size() > (1 << 20))
                break;
            out.append(buf, static_cast<size_t>(n));
        }
    }
    close(fds[0]);
    if (err != 0)
        return {};
    int wstatus = 0;
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0 ? out : std::string();
}

}  // namespace

preload::LibraryFacts gather_path_facts(const std::string& path)
{
    preload::LibraryFacts facts;
    auto failed = [&](const std::string& where, int err) {
        facts.error = err;
        facts.error_path = where;
        return facts;
    };
    struct stat st {};
    if (path.empty() || path[0] != '/')
        return failed(path, EINVAL);
    if (lstat("/", &st) != 0)
        return failed("/", errno);
    facts.directories.push_back(node("/", st));
    std::deque<std::string> todo = components(path);
    std::string current = "/";
    int links = 0;
    while (!todo.empty()) {
        const std::string name = std::move(todo.front());
        todo.pop_front();
        if (name == "..") {
            current = parent_of(current);  // already recorded on the way down
            continue;
        }
        const std::string next = (current == "/" ? "" : current) + "/" + name;
        if (lstat(next.c_str(), &st) != 0)
            return failed(next, errno);
        if (S_ISLNK(st.st_mode)) {
            if (++links > kMaxSymlinks)
                return failed(next, ELOOP);
            char target[PATH_MAX];
            const ssize_t n = readlink(next.c_str(), target, sizeof target);
            if (n < 0 || static_cast<size_t>(n) >= sizeof target)
                return failed(next, n < 0 ? errno : ENAMETOOLONG);
            const std::string link(target, static_cast<size_t>(n));
            std::deque<std::string> more = components(link);
            todo.insert(todo.begin(), more.begin(), more.end());
            if (link[0] == '/')
                current = "/";
            continue;
        }
        if (!todo.empty()) {
            if (!S_ISDIR(st.st_mode))
                return failed(next, ENOTDIR);
            facts.directories.push_back(node(next, st));
            current = next;
            continue;
        }
        facts.file = node(next, st);
    }
    if (facts.file.path.empty()) {  // the path ended in ".." or was "/"
        if (stat(current.c_str(), &st) != 0)
            return failed(current, errno);
        facts.file = node(current, st);
    }
    return facts;
}

preload::LibraryFacts gather_library_facts(const std::string& path)
{
    preload::LibraryFacts facts = gather_path_facts(path);
    if (facts.error == 0 && S_ISREG(facts.file.mode)) {
        read_header(facts.file.path, &facts.header);
        facts.pie = is_pie(facts.file.path);
    }
    return facts;
}

LibraryChecker::LibraryChecker()
{
    host_.elf_class = __ehdr_start.e_ident[EI_CLASS];
    host_.data = __ehdr_start.e_ident[EI_DATA];
    host_.machine = __ehdr_start.e_machine;
}

std::string LibraryChecker::expand(const std::string& entry, std::string* why)
{
    if (preload::uses_platform(entry) && !platform_asked_) {
        platform_asked_ = true;
        platform_ = preload::platform_from_diagnostics(ld_so_diagnostics());
    }
    return preload::expand_tokens(entry, {NVSHARE_LD_LIB, platform_}, why);
}

LibraryCheck LibraryChecker::check(const std::string& entry)
{
    LibraryCheck result;
    result.path = expand(entry, &result.problem);
    if (result.path.empty())
        return result;
    const preload::LibraryFacts facts = gather_library_facts(result.path);
    result.missing = facts.error == ENOENT;
    result.problem = preload::library_problem(facts, host_);
    return result;
}

}  // namespace nvshare::cli
