// nvshare-preload.service runs `nvsharectl preload merge` under
// SystemCallFilter=~@privileged, which refuses chown and its kin with EPERM.
// Under systemd as PID 1 the merge once failed there ("chown ...: Operation
// not permitted", issue 18). This runs replace_file() under the same refusal.
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "cli/preload_files.h"

namespace {

// Makes chown, fchown, fchownat and lchown fail with EPERM, as the unit does.
bool refuse_chown()
{
    constexpr unsigned kErrno = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_fchown, 4, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_fchownat, 3, 0),
#ifdef SYS_chown
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_chown, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_lchown, 1, 0),
#else
        BPF_JUMP(BPF_JMP | BPF_JA, 0, 0, 0),
        BPF_JUMP(BPF_JMP | BPF_JA, 0, 0, 0),
#endif
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, kErrno),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
           prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

TEST(PreloadFiles, ReplaceWorksWhereChownIsRefused)
{
    if (geteuid() != 0)
        GTEST_SKIP() << "the chown happens only as root";
    char dir[] = "/tmp/nvshare-seccomp.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    const std::string path = std::string(dir) + "/ld.so.preload";
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        if (!refuse_chown())
            _exit(2);
        if (fchown(0, 0, 0) == 0 || errno != EPERM)
            _exit(3);  // the filter did not take
        nvshare::cli::FileError error;
        _exit(nvshare::cli::replace_file(path, "/usr/lib/libnvshare.so\n", &error) ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "replace_file failed under the unit's system call filter";
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0u);
    EXPECT_EQ(st.st_gid, 0u);
    EXPECT_EQ(st.st_mode & 07777, 0644u);
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(text.str(), "/usr/lib/libnvshare.so\n");
    unlink(path.c_str());
    rmdir(dir);
}

}  // namespace
