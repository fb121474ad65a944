// A client's command line as the status and the journal show it.
#include "daemon/process_command.h"

#include <gtest/gtest.h>
#include <unistd.h>

using namespace std::string_literals;

namespace nvshare::daemon {
namespace {

TEST(ProcessCommand, ArgumentsJoinedBySpaces)
{
    EXPECT_EQ(command_line_text("python3\0train.py\0--epochs\0003\0"s),
              "python3 train.py --epochs 3");
    EXPECT_EQ(command_line_text("jupyter-kernel\0"s), "jupyter-kernel");
    // An empty argument still counts; NULs at the end do not.
    EXPECT_EQ(command_line_text("a\0\0b\0\0\0"s), "a  b");
    EXPECT_EQ(command_line_text(""), "");  // a kernel thread, a zombie
}

TEST(ProcessCommand, ALongLineIsCutAndSaysSo)
{
    const std::string arg(3000, 'x');
    const std::string line = command_line_text("python3\0"s + arg + '\0');
    ASSERT_EQ(line.size(), kCommandLineMax);
    EXPECT_EQ(line.substr(0, 9), "python3 x");
    EXPECT_EQ(line.substr(line.size() - 3), "...");
    // Exactly the most kept: whole.
    const std::string exact(kCommandLineMax, 'y');
    EXPECT_EQ(command_line_text(exact), exact);
}

TEST(ProcessCommand, ReadsThisProcess)
{
    const std::string line = process_command_line(getpid());
    EXPECT_NE(line.find("settings-unit-tests"), std::string::npos) << line;
    EXPECT_EQ(process_command_line(0), "");  // no such entry
}

}  // namespace
}  // namespace nvshare::daemon
