#include "cli/preload_merge.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "build-config.h"

using namespace nvshare::preload;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

namespace {

const std::vector<std::string> kNvshare = {"/usr/$LIB/libnvshare.so"};
const std::vector<std::string> kNone;

}  // namespace

// ---- glibc's reading of the file --------------------------------------------------

TEST(GlibcEntries, SplitsOnBlanksNewlinesAndColons)
{
    EXPECT_THAT(glibc_entries("/a.so /b.so\t/c.so\n/d.so:/e.so\n"),
                ElementsAre("/a.so", "/b.so", "/c.so", "/d.so", "/e.so"));
}

TEST(GlibcEntries, CommentsRunToEndOfLine)
{
    EXPECT_THAT(glibc_entries("# all of this\n/a.so\n"), ElementsAre("/a.so"));
    EXPECT_THAT(glibc_entries("/a.so # not /b.so\n/d.so\n"), ElementsAre("/a.so", "/d.so"));
}

// rtld.c searches for '#' in [file, file + rest): after each comment, rest
// loses the comment's offset and the bytes it blanked.
TEST(GlibcEntries, LateCommentsAreReadAsNames)
{
    // 26 bytes. "# one" at 0: rest 26 - 0 - 5 = 21. "# two" at 12 < 21:
    // rest 21 - 12 - 5 = 4. "# three" at 18 is outside [0, 4).
    EXPECT_THAT(glibc_entries("# one\n/a.so\n# two\n# three\n"),
                ElementsAre("/a.so", "#", "three"));
    // "# c" at 12: rest 26 - 12 - 3 = 11; "# e" at 22 is outside.
    EXPECT_THAT(glibc_entries("/a.so\n/b.so\n# c\n/d.so\n# e\n"),
                ElementsAre("/a.so", "/b.so", "/d.so", "#", "e"));
    // A comment after other comments on the same line's text: "# not" is cut.
    EXPECT_THAT(glibc_entries("# all of this\n/a.so # not /b.so\n/d.so\n"),
                ElementsAre("/a.so", "/b.so", "/d.so"));
}

TEST(GlibcEntries, CommentCutShortWhenTheWindowEnds)
{
    // 18 bytes. "# one": rest 13. "#abcdefghij" at 6: rest 7, so only
    // "#abcdef" is blanked.
    EXPECT_THAT(glibc_entries("# one\n#abcdefghij\n"), ElementsAre("ghij"));
}

TEST(ListEntries, ReadsEveryCommentAsOne)
{
    EXPECT_THAT(list_entries("# one\n/a.so\n# two\n/b.so # three\n/c.so:/d.so\n# four"),
                ElementsAre("/a.so", "/b.so", "/c.so", "/d.so"));
}

TEST(GlibcEntries, LastEntryWithoutNewline)
{
    EXPECT_THAT(glibc_entries("/a.so\n/b.so"), ElementsAre("/a.so", "/b.so"));
    EXPECT_THAT(glibc_entries("/only.so"), ElementsAre("/only.so"));
}

TEST(GlibcEntries, EmptyAndBlankFiles)
{
    EXPECT_THAT(glibc_entries(""), IsEmpty());
    EXPECT_THAT(glibc_entries("\n\n  \t\n"), IsEmpty());
    EXPECT_THAT(glibc_entries("# only a comment"), IsEmpty());
}

TEST(GlibcEntries, NulByteEndsTheList)
{
    using namespace std::string_literals;
    EXPECT_THAT(glibc_entries("/a.so\n\0/b.so\n"s), ElementsAre("/a.so"));
    // The trailing name without a separator is read on its own, as rtld.c does.
    EXPECT_THAT(glibc_entries("/a.so\n\0junk\n/c.so"s), ElementsAre("/a.so", "/c.so"));
}

TEST(GlibcEntries, CarriageReturnIsPartOfTheName)
{
    EXPECT_THAT(glibc_entries("/a.so\r\n"), ElementsAre("/a.so\r"));
}

// ---- drop-ins ----------------------------------------------------------------------

TEST(DropIns, OnlyVisibleConfFiles)
{
    EXPECT_TRUE(is_drop_in_name("nvshare.conf"));
    EXPECT_TRUE(is_drop_in_name("50-other.conf"));
    EXPECT_FALSE(is_drop_in_name(".conf"));
    EXPECT_FALSE(is_drop_in_name(".nvshare.conf.Xy12ab"));
    EXPECT_FALSE(is_drop_in_name("nvshare.conf~"));
    EXPECT_FALSE(is_drop_in_name("nvshare.conf.dpkg-old"));
    EXPECT_FALSE(is_drop_in_name("README"));
}

TEST(DropIns, OrderedByFileNameAndDeduplicated)
{
    const auto c = collect_entries({{"50-b.conf", "/b.so\n/a.so\n"},
                                    {"10-a.conf", "# comment\n/a.so /z.so:/y.so\n"},
                                    {"90-c.conf", ""}});
    EXPECT_THAT(c.entries, ElementsAre("/a.so", "/z.so", "/y.so", "/b.so"));
    EXPECT_THAT(c.warnings, IsEmpty());
}

TEST(DropIns, RejectsWhatLdSoCouldNotLoadEverywhere)
{
    using namespace std::string_literals;
    const auto c = collect_entries({{"a.conf", "libbare.so\n/good.so\n../rel.so\n/cr.so\r\n"},
                                    {"b.conf", "/x.so\n\0/y.so\n"s},
                                    {"c.conf", std::string(kMaxDropInBytes + 1, '/')}});
    EXPECT_THAT(c.entries, ElementsAre("/good.so"));
    ASSERT_EQ(c.warnings.size(), 5u);
    EXPECT_THAT(c.warnings[0], HasSubstr("'libbare.so' is not an absolute path"));
    EXPECT_THAT(c.warnings[1], HasSubstr("'../rel.so' is not an absolute path"));
    EXPECT_THAT(c.warnings[2], HasSubstr("'/cr.so\\x0d' contains a control character"));
    EXPECT_THAT(c.warnings[3], HasSubstr("b.conf: contains a NUL byte"));
    EXPECT_THAT(c.warnings[4], HasSubstr("c.conf: larger than 64 KiB"));
}

// ---- the merge ---------------------------------------------------------------------

TEST(Merge, AppendsToAnEmptyFile)
{
    const auto r = merge("", kNvshare, kNone);
    EXPECT_TRUE(r.changed);
    EXPECT_THAT(r.warnings, IsEmpty());
    EXPECT_EQ(r.text, "/usr/$LIB/libnvshare.so\n");
}

TEST(Merge, NothingToDoLeavesAMissingFileMissing)
{
    const auto r = merge("", kNone, kNone);
    EXPECT_FALSE(r.changed);
    EXPECT_EQ(r.text, "");
}

TEST(Merge, KeepsForeignLinesByteForByte)
{
    const std::string foreign =
        "# security agent\n/opt/agent/libagent.so   # keep me\n\n/lib/a.so:/lib/b.so\n";
    const auto added = merge(foreign, kNvshare, kNone);
    EXPECT_EQ(added.text, foreign + "/usr/$LIB/libnvshare.so\n");
    const auto removed = merge(added.text, kNone, kNvshare);
    EXPECT_TRUE(removed.changed);
    EXPECT_EQ(removed.text, foreign);
}

TEST(Merge, OwnedLinesLeaveWhereverTheyAreAndEntriesGoLast)
{
    // Inserting before a foreign comment could push it out of rtld.c's window;
    // deleting lines and appending never can.
    const std::string file = "/old.so\n# foreign\n/x.so\n  /new.so\t\n/last.so\n";
    const auto r = merge(file, {"/new.so", "/newer.so"}, {"/old.so"});
    EXPECT_EQ(r.text, "# foreign\n/x.so\n/last.so\n/new.so\n/newer.so\n");
}

TEST(Merge, NeverBreaksAFileLdSoReadsAsIntended)
{
    // Appending only widens rtld.c's comment window, so a foreign file that
    // ld.so read as meant is still read so, with the entries after it.
    const std::vector<std::string> foreign_files = {
        "# a\n/f1.so\n# b\n/f2.so\n",
        "/f1.so\n#x\n/f2.so\n",
        "#\n/f1.so:/f2.so\n",
        "/f1.so\n/f2.so",
    };
    for (const auto& foreign : foreign_files) {
        ASSERT_EQ(glibc_entries(foreign), list_entries(foreign)) << foreign;
        std::vector<std::string> expected = list_entries(foreign);
        expected.insert(expected.end(), {"/n1.so", "/n2.so"});
        const auto added = merge(foreign, {"/n1.so", "/n2.so"}, kNone);
        EXPECT_EQ(glibc_entries(added.text), expected) << foreign;
        EXPECT_EQ(glibc_entries(merge(added.text, kNone, {"/n1.so", "/n2.so"}).text),
                  list_entries(foreign));
    }
}

TEST(Merge, AppendingCanOnlyHelpAMisreadFile)
{
    // "# b" lies outside the window of this short file; the entry's bytes
    // widen the window (rtld.c's quirk), and removing it restores the bytes.
    const std::string foreign = "# a\n/x\n# b\n";
    EXPECT_THAT(glibc_entries(foreign), ElementsAre("/x", "b"));
    const auto added = merge(foreign, kNvshare, kNone);
    EXPECT_THAT(glibc_entries(added.text), ElementsAre("/x", "/usr/$LIB/libnvshare.so"));
    EXPECT_EQ(merge(added.text, kNone, kNvshare).text, foreign);
}

TEST(Merge, IsIdempotent)
{
    const std::vector<std::string> inputs = {
        "",
        "/foreign.so",
        "/foreign.so\n",
        "# c\n/usr/$LIB/libnvshare.so\n/x.so\n",
        "/usr/$LIB/libnvshare.so\n/b.so\n/usr/$LIB/libnvshare.so\n",
        "junk \x01\x02\xff\n\t\n",
    };
    const std::vector<std::vector<std::string>> entry_sets = {kNone, kNvshare, {"/b.so", "/d.so"}};
    for (const auto& in : inputs) {
        for (const auto& entries : entry_sets) {
            const auto once = merge(in, entries, kNvshare);
            const auto twice = merge(once.text, entries, entries);
            EXPECT_FALSE(twice.changed) << "input: " << in;
            EXPECT_EQ(twice.text, once.text);
        }
    }
}

TEST(Merge, EndsALastLineThatHadNoNewline)
{
    const auto r = merge("/foreign.so", kNvshare, kNone);
    EXPECT_EQ(r.text, "/foreign.so\n/usr/$LIB/libnvshare.so\n");
    EXPECT_THAT(glibc_entries(r.text), ElementsAre("/foreign.so", "/usr/$LIB/libnvshare.so"));
    EXPECT_EQ(merge("/foreign.so", kNone, kNone).text, "/foreign.so");
}

TEST(Merge, TakesOverStandaloneCopiesOfAnEntry)
{
    // Someone added the line by hand before the drop-in existed: one copy stays.
    const auto r = merge("/a.so\n  /usr/$LIB/libnvshare.so\t\n/b.so\n/usr/$LIB/libnvshare.so",
                         kNvshare, kNone);
    EXPECT_EQ(r.text, "/a.so\n/b.so\n/usr/$LIB/libnvshare.so\n");
}

TEST(Merge, LeavesEntriesInsideForeignLinesAlone)
{
    // Not a line of its own (a comment, a separator or another name shares it).
    const std::string file =
        "/usr/$LIB/libnvshare.so /x.so\n/usr/$LIB/libnvshare.so # mine\n/usr/$LIB/libnvshare.so:\n";
    EXPECT_EQ(merge(file, kNone, kNvshare).text, file);
    EXPECT_EQ(merge(file, kNvshare, kNone).text, file + "/usr/$LIB/libnvshare.so\n");
}

TEST(Merge, OnlyOwnedOrListedEntriesGo)
{
    const std::string file = "/a.so\n/usr/$LIB/libnvshare.so\n/b.so\n";
    EXPECT_EQ(merge(file, kNone, kNone).text, file);  // hand-made and never ours
    EXPECT_EQ(merge(file, kNone, kNvshare).text, "/a.so\n/b.so\n");
}

TEST(Merge, KeepsBinaryJunkAndWarnsAboutNul)
{
    using namespace std::string_literals;
    const std::string junk = "\xff\xfe garbage\r\n\0\0tail"s;
    const auto r = merge(junk, kNvshare, kNone);
    EXPECT_EQ(r.text, junk + "\n/usr/$LIB/libnvshare.so\n");
    ASSERT_EQ(r.warnings.size(), 2u);
    EXPECT_THAT(r.warnings[0], HasSubstr("NUL byte"));
    EXPECT_THAT(r.warnings[1], HasSubstr("'/usr/$LIB/libnvshare.so' is listed but ld.so will not"));
    EXPECT_EQ(merge(r.text, kNone, kNvshare).text, junk + "\n");
}

TEST(Merge, RemovingTheOnlyEntryEmptiesTheFile)
{
    const auto r = merge("/usr/$LIB/libnvshare.so\n", kNone, kNvshare);
    EXPECT_TRUE(r.changed);
    EXPECT_EQ(r.text, "");
}

TEST(MergeState, ListsTheEntriesAndNothingElse)
{
    EXPECT_THAT(list_entries(state_text({"/a.so", "/usr/$LIB/b.so"})),
                ElementsAre("/a.so", "/usr/$LIB/b.so"));
    EXPECT_THAT(list_entries(state_text({})), IsEmpty());
}

// ---- disable: unlisting a name wherever it stands -------------------------------

TEST(Unlist, BlanksTheNameOnASharedLineAndKeepsEveryOffset)
{
    const std::string file = "/a.so /usr/$LIB/libnvshare.so:/b.so\n";
    const std::string out = unlist(file, kNvshare);
    EXPECT_EQ(out, "/a.so " + std::string(23, ' ') + ":/b.so\n");
    EXPECT_THAT(glibc_entries(out), ElementsAre("/a.so", "/b.so"));
}

TEST(Unlist, EverySeparatorAndTheLastNameWithoutNewline)
{
    const std::string file = "/x.so\t/n.so\n/n.so:/y.so /n.so";
    const std::string out = unlist(file, {"/n.so"});
    EXPECT_EQ(out.size(), file.size());
    EXPECT_THAT(glibc_entries(out), ElementsAre("/x.so", "/y.so"));
}

TEST(Unlist, FollowsGlibcsCommentQuirkAndLeavesCommentsAlone)
{
    // ld.so reads "ghij" out of the late comment; "one" in the first
    // comment is not read, so it stays.
    const std::string file = "# one\n#abcdefghij\n";
    EXPECT_THAT(glibc_entries(file), ElementsAre("ghij"));
    EXPECT_EQ(unlist(file, {"one"}), file);
    const std::string out = unlist(file, {"ghij"});
    EXPECT_THAT(glibc_entries(out), IsEmpty());
    EXPECT_EQ(out, "# one\n#abcdef    \n");
}

TEST(Unlist, NamesAfterANulAreNotReadAndNotTouched)
{
    using namespace std::string_literals;
    const std::string file = "/n.so\n\0/n.so\n"s;
    EXPECT_EQ(unlist(file, {"/n.so"}), "     \n\0/n.so\n"s);
}

TEST(GlibcEntrySpans, PointAtTheNames)
{
    const std::string file = "  /a.so\t:/b.so\n/c";
    std::vector<std::string> named;
    for (const Span& s : glibc_entry_spans(file))
        named.push_back(file.substr(s.offset, s.length));
    EXPECT_EQ(named, glibc_entries(file));
    EXPECT_THAT(named, ElementsAre("/a.so", "/b.so", "/c"));
}

// ---- the drop-in text ---------------------------------------------------------------

TEST(DropInText, ListsTheEntryOnItsOwnLine)
{
    const std::string text = drop_in_text("/usr/$LIB/libnvshare.so");
    EXPECT_THAT(list_entries(text), ElementsAre("/usr/$LIB/libnvshare.so"));
    EXPECT_THAT(collect_entries({{"nvshare.conf", text}}).warnings, IsEmpty());
}

TEST(DropInText, IsWhatMesonInstalls)
{
    // systemd/nvshare-preload.conf.in, as configured for this build.
    const char* path = getenv("NVSHARE_TEST_DROP_IN");
    ASSERT_NE(path, nullptr) << "run through meson test";
    std::ifstream file(path, std::ios::binary);
    ASSERT_TRUE(file) << path;
    std::stringstream content;
    content << file.rdbuf();
    EXPECT_EQ(content.str(), drop_in_text(NVSHARE_PRELOAD_ENTRY));
}
