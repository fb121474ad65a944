#include "preload/exclusion.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "tests/support/files.h"
#include "tests/support/temp_dir.h"

namespace {

using nvshare::test::TempDir;

// `text` as the exclusion list "list" in `dir`; returns its path.
std::string write_list(const TempDir& dir, const std::string& text)
{
    const std::string file = dir / "list";
    nvshare::test::write_text(file, text);
    return file;
}

}  // namespace

TEST(Exclusion, DaemonIsAlwaysExcluded)
{
    EXPECT_TRUE(nvshare_is_excluded("/usr/sbin/nvshared", "nvshared", nullptr));
    EXPECT_TRUE(nvshare_is_excluded("/opt/x/nvshared", nullptr, ""));
    EXPECT_TRUE(nvshare_is_excluded(nullptr, "nvshared", nullptr));
    EXPECT_FALSE(nvshare_is_excluded("/usr/bin/python3", "python3", nullptr));
    EXPECT_FALSE(nvshare_is_excluded("/usr/sbin/nvshared-helper", "nvshared-helper", nullptr));
    EXPECT_FALSE(nvshare_is_excluded(nullptr, nullptr, nullptr));
}

TEST(Exclusion, PathsMatchTheExecutableExactly)
{
    const char* list = "/usr/bin/Xorg\n/opt/app/bin/train\n";
    EXPECT_TRUE(nvshare_is_excluded("/usr/bin/Xorg", "Xorg", list));
    EXPECT_TRUE(nvshare_is_excluded("/opt/app/bin/train", "something", list));
    EXPECT_FALSE(nvshare_is_excluded("/usr/local/bin/Xorg", "Xorg", list));
    EXPECT_FALSE(nvshare_is_excluded("/opt/app/bin/train2", "train2", list));
    EXPECT_FALSE(nvshare_is_excluded("/opt/app/bin", "bin", list));
    EXPECT_FALSE(nvshare_is_excluded(nullptr, "Xorg", list));
}

TEST(Exclusion, NamesMatchFileNameOrComm)
{
    const char* list = "blender\n";
    EXPECT_TRUE(nvshare_is_excluded("/usr/bin/blender", "blender", list));
    EXPECT_TRUE(nvshare_is_excluded("/usr/bin/blender", "renamed-thread", list));
    EXPECT_TRUE(nvshare_is_excluded("/usr/bin/python3", "blender", list));
    EXPECT_FALSE(nvshare_is_excluded("/usr/bin/blender-thumbnailer", "blender-thumbna", list));
    EXPECT_FALSE(nvshare_is_excluded("/usr/bin/ble", "ble", list));
}

TEST(Exclusion, LongNamesMatchTheTruncatedComm)
{
    const char* list = "my-very-long-trainer\n";
    // The kernel keeps 15 characters.
    EXPECT_TRUE(nvshare_is_excluded(nullptr, "my-very-long-tr", list));
    EXPECT_TRUE(nvshare_is_excluded("/bin/my-very-long-trainer", "x", list));
    EXPECT_FALSE(nvshare_is_excluded(nullptr, "my-very-long-t", list));
    EXPECT_FALSE(nvshare_is_excluded(nullptr, "my-very-long-tx", list));
}

TEST(Exclusion, CommentsBlanksAndOddLines)
{
    const char* list =
        "# excluded from GPU sharing\n"
        "\n"
        "   \t\n"
        "  firefox   # the browser\r\n"
        "#chrome\n"
        "/usr/bin/with space\n"
        "last-without-newline";
    EXPECT_TRUE(nvshare_is_excluded("/usr/lib/firefox/firefox", "firefox", list));
    EXPECT_FALSE(nvshare_is_excluded("/opt/google/chrome/chrome", "chrome", list));
    EXPECT_TRUE(nvshare_is_excluded("/usr/bin/with space", "with space", list));
    EXPECT_TRUE(nvshare_is_excluded(nullptr, "last-without-ne", list));
    EXPECT_FALSE(nvshare_is_excluded("/usr/bin/bash", "bash", "#\n#\n"));
    EXPECT_FALSE(nvshare_is_excluded("/usr/bin/bash", "bash", ""));
}

// The plain-memory list uses the same entries, without the daemon's rule.
TEST(PlainList, MatchesEntriesButNotTheDaemon)
{
    const char* list = "# keep plain device memory\ninference-server\n/opt/svc/bin/run\n";
    EXPECT_TRUE(nvshare_is_listed("/usr/bin/inference-server", "inference-serv", list));
    EXPECT_TRUE(nvshare_is_listed("/opt/svc/bin/run", "run", list));
    EXPECT_FALSE(nvshare_is_listed("/usr/bin/run", "run", list));
    EXPECT_FALSE(nvshare_is_listed("/usr/sbin/nvshared", "nvshared", list));
    EXPECT_FALSE(nvshare_is_listed("/usr/sbin/nvshared", "nvshared", nullptr));
    EXPECT_TRUE(std::string(nvshare_plain_list_path).ends_with("/nvshare/preload-plain.conf"));
}

TEST(ExclusionList, DefaultPathIsUnderTheConfigDirectory)
{
    EXPECT_EQ(std::string(nvshare_exclusion_list_path).rfind("/nvshare/preload-exclude.conf"),
              std::string(nvshare_exclusion_list_path).size() -
                  std::string("/nvshare/preload-exclude.conf").size());
}

TEST(ExclusionList, LoadsTheFile)
{
    TempDir dir;
    const std::string file = write_list(dir, "# c\nblender\n/usr/bin/Xorg\n");
    char buf[256];
    EXPECT_EQ(nvshare_load_exclusion_list(file.c_str(), buf, sizeof buf), 26u);
    EXPECT_STREQ(buf, "# c\nblender\n/usr/bin/Xorg\n");
    EXPECT_TRUE(nvshare_is_excluded("/usr/bin/Xorg", "Xorg", buf));
}

TEST(ExclusionList, MissingOrSpecialFilesReadAsEmpty)
{
    TempDir dir;
    char buf[64] = "stale";
    EXPECT_EQ(nvshare_load_exclusion_list((dir.path() + "/none").c_str(), buf, sizeof buf), 0u);
    EXPECT_STREQ(buf, "");
    // A FIFO must not block the process (nobody writes to it).
    const std::string fifo = dir.path() + "/fifo";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
    EXPECT_EQ(nvshare_load_exclusion_list(fifo.c_str(), buf, sizeof buf), 0u);
    EXPECT_EQ(nvshare_load_exclusion_list(dir.path().c_str(), buf, sizeof buf), 0u);
    EXPECT_EQ(nvshare_load_exclusion_list("/nonexistent", nullptr, 0), 0u);
}

TEST(ExclusionList, TooLongListLosesOnlyItsIncompleteLastLine)
{
    TempDir dir;
    const std::string file = write_list(dir, "alpha\nbeta\ngamma-long-entry\n");
    char buf[16];  // holds "alpha\nbeta\ngamm"
    EXPECT_EQ(nvshare_load_exclusion_list(file.c_str(), buf, sizeof buf), 11u);
    EXPECT_STREQ(buf, "alpha\nbeta\n");
    EXPECT_FALSE(nvshare_is_excluded(nullptr, "gamm", buf));
    // Exactly fitting content is kept whole.
    char exact[12];
    EXPECT_EQ(
        nvshare_load_exclusion_list(write_list(dir, "alpha\nbeta\n").c_str(), exact, sizeof exact),
        11u);
    EXPECT_STREQ(exact, "alpha\nbeta\n");
}
