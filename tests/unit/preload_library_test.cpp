// The rules for listing a library in /etc/ld.so.preload, judged from facts
// made up here (cli/library_facts gathers the real ones, checked here on two
// real files; the preload-namespace test checks them against files and the
// real ld.so).
#include "cli/preload_library.h"

#include <dlfcn.h>
#include <elf.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>

#include "cli/library_facts.h"

using namespace nvshare::preload;
using ::testing::HasSubstr;

namespace {

const ElfIdentity kX86_64 = {ELFCLASS64, ELFDATA2LSB, EM_X86_64};

std::string elf64_header(uint16_t type, uint16_t machine, uint8_t elf_class = ELFCLASS64)
{
    std::string h(sizeof(Elf64_Ehdr), '\0');
    h.replace(0, SELFMAG, ELFMAG);
    h[EI_CLASS] = static_cast<char>(elf_class);
    h[EI_DATA] = ELFDATA2LSB;
    h[EI_VERSION] = EV_CURRENT;
    h[16] = static_cast<char>(type & 0xff);
    h[17] = static_cast<char>(type >> 8);
    h[18] = static_cast<char>(machine & 0xff);
    h[19] = static_cast<char>(machine >> 8);
    return h;
}

// A library that passes every check: /usr/lib/x.so, root's, 0644.
LibraryFacts good()
{
    LibraryFacts f;
    f.directories = {
        {"/", 0, S_IFDIR | 0755}, {"/usr", 0, S_IFDIR | 0755}, {"/usr/lib", 0, S_IFDIR | 0755}};
    f.file = {"/usr/lib/x.so", 0, S_IFREG | 0644};
    f.header = elf64_header(ET_DYN, EM_X86_64);
    return f;
}

}  // namespace

TEST(LibraryProblem, AcceptsARootOwnedSharedObjectOfThisMachine)
{
    EXPECT_EQ(library_problem(good(), kX86_64), "");
    LibraryFacts f = good();
    f.file.mode = S_IFREG | 0755;
    f.directories[2].mode = S_IFDIR | 0555;
    EXPECT_EQ(library_problem(f, kX86_64), "");
}

TEST(LibraryProblem, MissingFileNamesThePath)
{
    LibraryFacts f = good();
    f.error = ENOENT;
    f.error_path = "/usr/lib/haswell";
    EXPECT_EQ(library_problem(f, kX86_64), "no such file: /usr/lib/haswell");
    f.error = ELOOP;
    EXPECT_THAT(library_problem(f, kX86_64), HasSubstr("cannot look up /usr/lib/haswell"));
}

TEST(LibraryProblem, ADirectoryOthersCanWriteOrOwnIsRefused)
{
    LibraryFacts f = good();
    f.directories[1] = {"/usr", 0, S_IFDIR | 01777};  // sticky or not: refused
    EXPECT_EQ(library_problem(f, kX86_64),
              "directory /usr is writable by group or others (mode 1777)");
    f = good();
    f.directories[2].mode = S_IFDIR | 0775;
    EXPECT_THAT(library_problem(f, kX86_64), HasSubstr("/usr/lib is writable by group"));
    f = good();
    f.directories[2].uid = 1000;
    EXPECT_EQ(library_problem(f, kX86_64), "directory /usr/lib is owned by uid 1000, not root");
}

TEST(LibraryProblem, TheFileMustBeRootsAndReadableByAll)
{
    LibraryFacts f = good();
    f.file.uid = 65534;
    EXPECT_EQ(library_problem(f, kX86_64), "file /usr/lib/x.so is owned by uid 65534, not root");
    f = good();
    f.file.mode = S_IFREG | 0666;
    EXPECT_THAT(library_problem(f, kX86_64), HasSubstr("writable by group or others"));
    f = good();
    f.file.mode = S_IFREG | 0600;
    EXPECT_EQ(library_problem(f, kX86_64),
              "/usr/lib/x.so is not readable by every user (mode 0600)");
    f = good();
    f.file.mode = S_IFDIR | 0755;
    EXPECT_EQ(library_problem(f, kX86_64), "/usr/lib/x.so is not a regular file");
}

TEST(LibraryProblem, ElfHeaderOfThisMachinesProgramsOnly)
{
    LibraryFacts f = good();
    f.header = "#!/bin/sh\n";
    EXPECT_EQ(library_problem(f, kX86_64), "/usr/lib/x.so is not an ELF file");
    f.header = "";
    EXPECT_EQ(library_problem(f, kX86_64), "/usr/lib/x.so is not an ELF file");
    f.header = elf64_header(ET_DYN, EM_386, ELFCLASS32).substr(0, sizeof(Elf32_Ehdr));
    EXPECT_EQ(library_problem(f, kX86_64),
              "/usr/lib/x.so is a 32-bit ELF object; programs here are 64-bit");
    f.header = elf64_header(ET_DYN, EM_AARCH64);
    EXPECT_EQ(library_problem(f, kX86_64),
              "/usr/lib/x.so is built for AArch64; programs here are x86-64");
    f.header = elf64_header(ET_EXEC, EM_X86_64);
    EXPECT_EQ(library_problem(f, kX86_64), "/usr/lib/x.so is an executable, not a shared object");
    f.header = elf64_header(ET_DYN, EM_X86_64);
    f.pie = true;
    EXPECT_EQ(library_problem(f, kX86_64),
              "/usr/lib/x.so is an executable (position-independent), not a shared object");
    f.pie = false;
    f.header = elf64_header(ET_REL, EM_X86_64);
    EXPECT_EQ(library_problem(f, kX86_64), "/usr/lib/x.so is not a shared object (ELF type 1)");
    f.header = elf64_header(ET_DYN, EM_X86_64).substr(0, 40);
    EXPECT_EQ(library_problem(f, kX86_64), "/usr/lib/x.so has a truncated ELF header");
    f.header = elf64_header(ET_DYN, EM_X86_64);
    f.header[EI_DATA] = ELFDATA2MSB;
    EXPECT_THAT(library_problem(f, kX86_64), HasSubstr("wrong byte order"));
}

TEST(LibraryProblem, DirectoriesAreJudgedBeforeTheFile)
{
    LibraryFacts f = good();
    f.directories[1].uid = 7;
    f.header = "not elf";
    EXPECT_THAT(library_problem(f, kX86_64), HasSubstr("directory /usr is owned by uid 7"));
}

// ---- ld.so's dynamic string tokens --------------------------------------------------

TEST(ExpandTokens, LibAndPlatformInBothSpellings)
{
    const TokenValues v = {"lib/x86_64-linux-gnu", "haswell"};
    std::string why;
    EXPECT_EQ(expand_tokens("/usr/$LIB/libnvshare.so", v, &why),
              "/usr/lib/x86_64-linux-gnu/libnvshare.so");
    EXPECT_EQ(expand_tokens("/usr/${LIB}/x.so", v, &why), "/usr/lib/x86_64-linux-gnu/x.so");
    EXPECT_EQ(expand_tokens("/opt/$PLATFORM/x.so", v, &why), "/opt/haswell/x.so");
    EXPECT_EQ(expand_tokens("/opt/${PLATFORM}-$LIB.so", v, &why),
              "/opt/haswell-lib/x86_64-linux-gnu.so");
    EXPECT_EQ(expand_tokens("/plain/path.so", {}, &why), "/plain/path.so");
    EXPECT_EQ(why, "");
}

TEST(ExpandTokens, UnknownDollarStaysLiteral)
{
    const TokenValues v = {"lib", "x86_64"};
    std::string why;
    // As glibc's is_dst: a name running on is no token; "${LIB" lacks its brace.
    EXPECT_EQ(expand_tokens("/opt/$LIBRARY/x.so", v, &why), "/opt/$LIBRARY/x.so");
    EXPECT_EQ(expand_tokens("/opt/$LIB_1/x.so", v, &why), "/opt/$LIB_1/x.so");
    EXPECT_EQ(expand_tokens("/opt/${LIB/x.so", v, &why), "/opt/${LIB/x.so");
    EXPECT_EQ(expand_tokens("/opt/$/x$", v, &why), "/opt/$/x$");
    EXPECT_EQ(expand_tokens("/opt/$LIB", v, &why), "/opt/lib");
    EXPECT_EQ(why, "");
}

TEST(ExpandTokens, OriginAndUnknownValuesCannotBeChecked)
{
    std::string why;
    EXPECT_EQ(expand_tokens("$ORIGIN/x.so", {"lib", "x86_64"}, &why), "");
    EXPECT_THAT(why, HasSubstr("$ORIGIN"));
    EXPECT_EQ(expand_tokens("/${ORIGIN}/x.so", {"lib", "x86_64"}, &why), "");
    EXPECT_EQ(expand_tokens("/usr/$PLATFORM/x.so", {"lib", ""}, &why), "");
    EXPECT_THAT(why, HasSubstr("$PLATFORM"));
    EXPECT_EQ(expand_tokens("/usr/$LIB/x.so", {"", "x86_64"}, &why), "");
    EXPECT_THAT(why, HasSubstr("$LIB"));
}

TEST(UsesPlatform, OnlyTheToken)
{
    EXPECT_TRUE(uses_platform("/a/$PLATFORM/x.so"));
    EXPECT_TRUE(uses_platform("/a/$LIB/${PLATFORM}"));
    EXPECT_FALSE(uses_platform("/a/$PLATFORMS/x.so"));
    EXPECT_FALSE(uses_platform("/a/PLATFORM/x.so"));
}

TEST(PlatformFromDiagnostics, ReadsDlPlatform)
{
    EXPECT_EQ(platform_from_diagnostics("dl_pagesize=0x1000\ndl_platform=\"haswell\"\n"
                                        "dl_string_platform=0x32\n"),
              "haswell");
    EXPECT_EQ(platform_from_diagnostics("dl_platform=\"x86_64\""), "x86_64");
    EXPECT_EQ(platform_from_diagnostics("dl_platform=0x0\n"), "");
    EXPECT_EQ(platform_from_diagnostics("dl_platform=\"a\\x01\"\n"), "");
    EXPECT_EQ(platform_from_diagnostics(""), "");
    EXPECT_EQ(platform_from_diagnostics("x dl_platform=\"haswell\"\n"), "");
}

// The facts of real files: this test program (a position-independent
// executable, as Debian's compiler builds them) is one; libc.so.6, which can
// also run and so has a PT_INTERP, is not.
TEST(LibraryFacts, TellsAPositionIndependentExecutableFromALibrary)
{
    char self[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    ASSERT_GT(n, 0);
    self[n] = '\0';
    const LibraryFacts program = nvshare::cli::gather_library_facts(self);
    EXPECT_TRUE(program.pie) << self;
    Dl_info info{};
    ASSERT_NE(dladdr(reinterpret_cast<void*>(&printf), &info), 0);
    char libc[PATH_MAX];
    ASSERT_NE(realpath(info.dli_fname, libc), nullptr);
    const LibraryFacts library = nvshare::cli::gather_library_facts(libc);
    EXPECT_FALSE(library.pie) << libc;
    EXPECT_EQ(library.error, 0) << libc;
}
