#include "daemon/process_exit.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

using nvshare::daemon::exiting_process_fd;
using nvshare::daemon::stat_says_exiting;

TEST(ProcessExit, ReadsTheExitingFlagOfAStatLine)
{
    // flags (the ninth field) 0x400104: PF_EXITING among others.
    EXPECT_TRUE(stat_says_exiting("4242 (python3) R 1 4242 4242 0 -1 4194564 120 0 0 0"));
    EXPECT_FALSE(stat_says_exiting("4242 (python3) S 1 4242 4242 0 -1 4194560 120 0 0 0"));
    // A name with spaces and parentheses does not shift the fields.
    EXPECT_TRUE(stat_says_exiting("7 (a) b (c) R 1 7 7 0 -1 4 0"));
    EXPECT_FALSE(stat_says_exiting("7 (a) 4 4 4 4 4 4 4) S 1 7 7 0 -1 0 0"));
}

TEST(ProcessExit, RefusesWhatIsNotAStatLine)
{
    EXPECT_FALSE(stat_says_exiting(""));
    EXPECT_FALSE(stat_says_exiting("no parenthesis 4"));
    EXPECT_FALSE(stat_says_exiting("7 (a) R 1 7 7 0 -1"));       // cut before the flags
    EXPECT_FALSE(stat_says_exiting("7 (a) R 1 7 7 0 -1 4x 0"));  // not a number
    EXPECT_FALSE(stat_says_exiting("7 (a) R 1 7 7 0 -1 -4 0"));
}

TEST(ProcessExit, OnlyAnExitingProcessIsWatched)
{
    EXPECT_EQ(exiting_process_fd(getpid()), -1);  // this one lives on
    EXPECT_EQ(exiting_process_fd(0), -1);
    // A child that has ended and not been reaped is exiting, and its pidfd
    // is readable at once.
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0)
        _exit(0);
    siginfo_t info{};
    ASSERT_EQ(waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
    const int fd = exiting_process_fd(child);
    ASSERT_GE(fd, 0);
    pollfd p{fd, POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 0), 1);
    close(fd);
    ASSERT_EQ(waitpid(child, nullptr, 0), child);
    EXPECT_EQ(exiting_process_fd(child), -1);  // reaped: gone
}
