#include "daemon/printable_text.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

using nvshare::daemon::printable_utf8;

namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(PrintableUtf8, KeepsValidText)
{
    EXPECT_EQ(printable_utf8("python3"), "python3");
    EXPECT_EQ(printable_utf8("训练 ü €"), "训练 ü €");
    EXPECT_EQ(printable_utf8("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");  // U+1F600
}

TEST(PrintableUtf8, ACommandCutMidCharacterBecomesValid)
{
    // What the kernel leaves of "abcdefghijklmn训练": 15 bytes, the CJK
    // character cut after its second byte.
    const std::string comm = std::string("abcdefghijklmn训练").substr(0, 15);
    ASSERT_EQ(comm.size(), 15u);
    EXPECT_THROW((void)nlohmann::json(comm).dump(), nlohmann::json::type_error);
    const std::string clean = printable_utf8(comm);
    EXPECT_EQ(clean, "abcdefghijklmn" + kFffd);
    EXPECT_NO_THROW((void)nlohmann::json(clean).dump());
}

TEST(PrintableUtf8, ReplacesEveryMalformedForm)
{
    EXPECT_EQ(printable_utf8("\x80"), kFffd);              // lone continuation
    EXPECT_EQ(printable_utf8("\xC0\xAF"), kFffd + kFffd);  // overlong '/'
    EXPECT_EQ(printable_utf8("\xE0\x80\xAF"), kFffd + kFffd + kFffd);
    EXPECT_EQ(printable_utf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // surrogate
    EXPECT_EQ(printable_utf8("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);
    EXPECT_EQ(printable_utf8("\xFF"
                             "a"),
              kFffd + "a");
    EXPECT_EQ(printable_utf8("\xE8\xAE"), kFffd + kFffd);  // cut short
}

TEST(PrintableUtf8, NoncharactersThatDbusRefusesAreReplaced)
{
    // U+BFFFF: what the status fuzzer found sd-bus refusing.
    EXPECT_EQ(printable_utf8("a\xF2\xBF\xBF\xBF"
                             "b"),
              "a" + kFffd + "b");
    EXPECT_EQ(printable_utf8("\xEF\xBF\xBE"), kFffd);           // U+FFFE
    EXPECT_EQ(printable_utf8("\xEF\xB7\x90"), kFffd);           // U+FDD0
    EXPECT_EQ(printable_utf8("\xEF\xB7\xAF"), kFffd);           // U+FDEF
    EXPECT_EQ(printable_utf8("\xF4\x8F\xBF\xBF"), kFffd);       // U+10FFFF
    EXPECT_EQ(printable_utf8("\xEF\xB7\xB0"), "\xEF\xB7\xB0");  // U+FDF0 is fine
    EXPECT_EQ(printable_utf8("\xEF\xBF\xBD"), kFffd);           // U+FFFD itself stays
}

TEST(PrintableUtf8, ControlCharactersBecomeQuestionMarks)
{
    EXPECT_EQ(printable_utf8("a\nb\tc\x7f"
                             "d"),
              "a?b?c?d");
    EXPECT_EQ(printable_utf8("\xC2\x85"), "?");  // C1 NEXT LINE
}

TEST(PrintableUtf8, StopsAtTheFirstNul)
{
    const char field[8] = {'a', 'b', '\0', 'c', 'd', 'e', 'f', 'g'};
    EXPECT_EQ(printable_utf8(field, sizeof field), "ab");
    const char full[4] = {'w', 'x', 'y', 'z'};  // no NUL at all
    EXPECT_EQ(printable_utf8(full, sizeof full), "wxyz");
}

TEST(PrintableUtf8, AnyBytesGiveTextJsonAccepts)
{
    // Every two-byte string, and a sweep of three-byte ones.
    for (int a = 0; a < 256; ++a) {
        for (int b = 0; b < 256; ++b) {
            const char raw[3] = {static_cast<char>(a), static_cast<char>(b),
                                 static_cast<char>((a * 7 + b) & 0xFF)};
            const std::string clean = printable_utf8(std::string_view(raw, 3));
            ASSERT_NO_THROW((void)nlohmann::json(clean).dump()) << a << " " << b;
        }
    }
}

}  // namespace
