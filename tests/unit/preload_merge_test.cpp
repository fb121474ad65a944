#include "common/preload_merge.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using namespace nvshare::preload;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

namespace {

const std::vector<std::string> kNvshare = {"/usr/$LIB/libnvshare.so"};

std::string block(const std::vector<std::string>& entries)
{
    return merge("", entries).text;
}

}  // namespace

// ---- glibc's reading of the file --------------------------------------------------

TEST(GlibcEntries, SplitsOnBlanksNewlinesAndColons)
{
    EXPECT_THAT(glibc_entries("/a.so /b.so\t/c.so\n/d.so:/e.so\n"),
                ElementsAre("/a.so", "/b.so", "/c.so", "/d.so", "/e.so"));
}

TEST(GlibcEntries, CommentsRunToEndOfLine)
{
    EXPECT_THAT(glibc_entries("# all of this\n/a.so # not /b.so\n#/c.so\n/d.so#x\n"),
                ElementsAre("/a.so", "/d.so"));
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

TEST(Merge, CreatesTheBlockInAnEmptyFile)
{
    const auto r = merge("", kNvshare);
    EXPECT_TRUE(r.changed);
    EXPECT_THAT(r.warnings, IsEmpty());
    EXPECT_EQ(r.text.rfind(std::string(kBeginMarker), 0), 0u);
    EXPECT_THAT(r.text, HasSubstr("\n/usr/$LIB/libnvshare.so\n"));
    EXPECT_EQ(r.text.substr(r.text.size() - kEndMarker.size() - 1), std::string(kEndMarker) + "\n");
    EXPECT_THAT(glibc_entries(r.text), ElementsAre("/usr/$LIB/libnvshare.so"));
}

TEST(Merge, NothingToDoLeavesAMissingFileMissing)
{
    const auto r = merge("", {});
    EXPECT_FALSE(r.changed);
    EXPECT_EQ(r.text, "");
}

TEST(Merge, KeepsForeignLinesByteForByte)
{
    const std::string foreign =
        "# security agent\n/opt/agent/libagent.so   # keep me\n\n/lib/a.so:/lib/b.so\n";
    const auto added = merge(foreign, kNvshare);
    EXPECT_EQ(added.text, foreign + block(kNvshare));
    const auto removed = merge(added.text, {});
    EXPECT_TRUE(removed.changed);
    EXPECT_EQ(removed.text, foreign);
}

TEST(Merge, KeepsTheBlockWhereItIs)
{
    const std::string before = "/first.so\n";
    const std::string after = "/last.so\n# trailing comment\n";
    const std::string file = before + block({"/old.so"}) + after;
    const auto r = merge(file, {"/new.so", "/newer.so"});
    EXPECT_EQ(r.text, before + block({"/new.so", "/newer.so"}) + after);
}

TEST(Merge, IsIdempotent)
{
    const std::vector<std::string> inputs = {
        "",
        "/foreign.so",
        "/foreign.so\n",
        "# c\n/usr/$LIB/libnvshare.so\n/x.so\n",
        "/a.so\n" + block({"/b.so"}) + "/c.so",
        std::string(kBeginMarker) + "\n/foreign.so\n",
        "junk \x01\x02\xff\n" + std::string(kEndMarker) + "\n",
    };
    for (const auto& in : inputs) {
        for (const auto& entries :
             {std::vector<std::string>{}, kNvshare, std::vector<std::string>{"/b.so", "/d.so"}}) {
            const auto once = merge(in, entries);
            const auto twice = merge(once.text, entries);
            EXPECT_FALSE(twice.changed) << "input: " << in;
            EXPECT_EQ(twice.text, once.text);
        }
    }
}

TEST(Merge, EndsALastLineThatHadNoNewline)
{
    const auto r = merge("/foreign.so", kNvshare);
    EXPECT_EQ(r.text, "/foreign.so\n" + block(kNvshare));
    EXPECT_THAT(glibc_entries(r.text), ElementsAre("/foreign.so", "/usr/$LIB/libnvshare.so"));
}

TEST(Merge, TakesOverAStandaloneCopyOfAnEntry)
{
    // Someone added the line by hand before the drop-in existed: one copy stays,
    // inside the block, where the hand-made line was.
    const auto r = merge("/a.so\n  /usr/$LIB/libnvshare.so\t\n/b.so\n", kNvshare);
    EXPECT_EQ(r.text, "/a.so\n" + block(kNvshare) + "/b.so\n");
}

TEST(Merge, LeavesEntriesInsideForeignLinesAlone)
{
    // Not a line of its own (a comment or another name shares it): not ours.
    const std::string file = "/usr/$LIB/libnvshare.so /x.so\n/usr/$LIB/libnvshare.so # mine\n";
    EXPECT_EQ(merge(file, {}).text, file);
    EXPECT_EQ(merge(file, kNvshare).text, file + block(kNvshare));
}

TEST(Merge, RetiredEntriesGoEvenWithoutADropIn)
{
    const auto r = merge("/a.so\n/usr/$LIB/libnvshare.so\n", {}, kNvshare);
    EXPECT_EQ(r.text, "/a.so\n");
}

TEST(Merge, UnterminatedBlockKeepsWhatFollows)
{
    const std::string file = "/a.so\n" + std::string(kBeginMarker) + " old\n/foreign.so\n";
    const auto r = merge(file, kNvshare);
    EXPECT_EQ(r.text, "/a.so\n" + block(kNvshare) + "/foreign.so\n");
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_THAT(r.warnings[0], HasSubstr("without its end marker"));
}

TEST(Merge, StrayEndMarkerAndSeveralBlocksCollapseIntoOne)
{
    const std::string file = "/a.so\n" + block({"/x.so"}) + "/b.so\n" + block({"/y.so"}) +
                             std::string(kEndMarker) + "  \n/c.so\n";
    const auto r = merge(file, kNvshare);
    EXPECT_EQ(r.text, "/a.so\n" + block(kNvshare) + "/b.so\n/c.so\n");
}

TEST(Merge, KeepsBinaryJunkAndWarnsAboutNul)
{
    using namespace std::string_literals;
    const std::string junk = "\xff\xfe garbage\r\n\0\0tail"s;
    const auto r = merge(junk, kNvshare);
    EXPECT_EQ(r.text, junk + "\n" + block(kNvshare));
    ASSERT_EQ(r.warnings.size(), 2u);
    EXPECT_THAT(r.warnings[0], HasSubstr("NUL byte"));
    EXPECT_THAT(r.warnings[1], HasSubstr("'/usr/$LIB/libnvshare.so' is listed but ld.so will not"));
    EXPECT_EQ(merge(r.text, {}).text, junk + "\n");
}

TEST(Merge, RemovingTheOnlyBlockEmptiesTheFile)
{
    const auto r = merge(block(kNvshare), {});
    EXPECT_TRUE(r.changed);
    EXPECT_EQ(r.text, "");
}

// ---- $LIB and the drop-in text -----------------------------------------------------

TEST(ExpandLib, ReplacesLibInBothSpellings)
{
    EXPECT_EQ(expand_lib_token("/usr/$LIB/libnvshare.so", "lib/x86_64-linux-gnu"),
              "/usr/lib/x86_64-linux-gnu/libnvshare.so");
    EXPECT_EQ(expand_lib_token("/usr/${LIB}/x.so", "lib64"), "/usr/lib64/x.so");
    EXPECT_EQ(expand_lib_token("/plain/path.so", ""), "/plain/path.so");
}

TEST(ExpandLib, UnknownDollarIsLiteralOthersUncheckable)
{
    EXPECT_EQ(expand_lib_token("/opt/$LIBRARY/x.so", "lib"), "/opt/$LIBRARY/x.so");
    EXPECT_EQ(expand_lib_token("/opt/$/x.so", "lib"), "/opt/$/x.so");
    EXPECT_EQ(expand_lib_token("/usr/$PLATFORM/x.so", "lib"), "");
    EXPECT_EQ(expand_lib_token("$ORIGIN/x.so", "lib"), "");
    EXPECT_EQ(expand_lib_token("/usr/$LIB/x.so", ""), "");
}

TEST(DropInText, ListsTheEntryOnItsOwnLine)
{
    const std::string text = drop_in_text("/usr/$LIB/libnvshare.so");
    EXPECT_THAT(glibc_entries(text), ElementsAre("/usr/$LIB/libnvshare.so"));
    EXPECT_THAT(collect_entries({{"nvshare.conf", text}}).warnings, IsEmpty());
}
