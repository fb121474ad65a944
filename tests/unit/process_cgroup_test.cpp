#include "daemon/process_cgroup.h"

#include <gtest/gtest.h>
#include <unistd.h>

using nvshare::daemon::cgroup_path;
using nvshare::daemon::process_cgroup_path;
using nvshare::daemon::root_owned_prefix;
using nvshare::daemon::short_cgroup;

TEST(ProcessCgroup, UnifiedHierarchyNamesTheContainer)
{
    EXPECT_EQ(short_cgroup("0::/machine.slice/libpod-4f2a.scope\n"), "libpod-4f2a.scope");
    EXPECT_EQ(short_cgroup("0::/system.slice/docker-9ab.scope/\n"), "docker-9ab.scope");
}

TEST(ProcessCgroup, HybridHostsPreferTheUnifiedLineThenSystemds)
{
    // podman with cgroupfs on a hybrid host: every hierarchy names it.
    EXPECT_EQ(short_cgroup("4:memory:/libpod_parent/libpod-e91c\n"
                           "1:name=systemd:/libpod_parent/libpod-e91c\n"
                           "0::/libpod_parent/libpod-e91c\n"),
              "libpod-e91c");
    // The unified hierarchy left at the root: the name=systemd one.
    EXPECT_EQ(short_cgroup("2:cpu:/\n1:name=systemd:/user.slice/session-3.scope\n0::/\n"),
              "session-3.scope");
}

TEST(ProcessCgroup, PathIsTheChosenLinesWhole)
{
    EXPECT_EQ(cgroup_path("0::/user.slice/user-1000.slice/session-3.scope/\n"),
              "/user.slice/user-1000.slice/session-3.scope");
    EXPECT_EQ(cgroup_path("2:cpu:/\n1:name=systemd:/system.slice/jupyter.service\n0::/\n"),
              "/system.slice/jupyter.service");
    EXPECT_EQ(cgroup_path("0::/\n"), "");
    // Only one v1 controller places it (a container runtime on a hybrid host).
    EXPECT_EQ(cgroup_path("9:name=systemd:/\n4:memory:/process_api/3f3a\n1:cpu:/\n0::/\n"),
              "/process_api/3f3a");
}

TEST(ProcessCgroup, RootOrNothingIsEmpty)
{
    EXPECT_EQ(short_cgroup("0::/\n"), "");
    EXPECT_EQ(short_cgroup(""), "");
    EXPECT_EQ(short_cgroup("garbage"), "");
}

TEST(ProcessCgroup, ReadsALiveProcessAndNotAGoneOne)
{
    // Whatever this test runs in; only that reading works and a gone pid is "".
    const std::string mine = process_cgroup_path(getpid());
    EXPECT_TRUE(mine.empty() || mine.front() == '/') << mine;
    EXPECT_EQ(process_cgroup_path(-1), "");
}

// Issue 47: unit rules see only what root made. A user's delegated subtree
// (user@UID.service and below) is theirs to name as they please.
TEST(ProcessCgroup, TheRootOwnedPrefixEndsWhereADelegatedSubtreeBegins)
{
    const auto owners = [](std::string_view path) -> std::optional<uid_t> {
        if (path == "/user.slice" || path == "/user.slice/user-1000.slice" ||
            path == "/system.slice" || path == "/system.slice/jupyter.service")
            return 0;
        if (path.starts_with("/user.slice/user-1000.slice/user@1000.service"))
            return 1000;
        return std::nullopt;  // gone, or unknown
    };
    EXPECT_EQ(
        root_owned_prefix("/user.slice/user-1000.slice/user@1000.service/app.slice/jupyter.service",
                          owners),
        "/user.slice/user-1000.slice");
    EXPECT_EQ(root_owned_prefix("/system.slice/jupyter.service", owners),
              "/system.slice/jupyter.service");
    EXPECT_EQ(root_owned_prefix("/machine.slice/libpod-1.scope", owners), "");
    EXPECT_EQ(root_owned_prefix("", owners), "");
}
