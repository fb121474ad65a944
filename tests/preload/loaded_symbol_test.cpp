// loaded_symbol(): a versioned lookup through the loaded objects' own symbol
// tables finds what the dynamic linker finds, and nothing else.
#include "preload/driver/loaded_symbol.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include "preload/driver/base_glibc.h"
#include "preload/driver/glibc_version.h"

namespace nvshare::preload {
namespace {

TEST(LoadedSymbol, FindsWhatTheDynamicLinkerFindsAtThatVersion)
{
    for (const char* name : {"dlopen", "dlvsym", "pthread_create", "pthread_join", "getpid"}) {
        void* expected = dlvsym(RTLD_DEFAULT, name, NVS_GLIBC_BASE);
        ASSERT_NE(expected, nullptr) << name;
        EXPECT_EQ(loaded_symbol(name, NVS_GLIBC_BASE), expected) << name;
    }
    EXPECT_EQ(loaded_symbol("dlsym", NVS_GLIBC_DLSYM),
              dlvsym(RTLD_DEFAULT, "dlsym", NVS_GLIBC_DLSYM));
}

TEST(LoadedSymbol, MissesAnotherVersionAnUnknownNameAndAnUndefinedEntry)
{
    EXPECT_EQ(loaded_symbol("dlopen", "GLIBC_9.99"), nullptr);
    EXPECT_EQ(loaded_symbol("nvshare_no_such_function", NVS_GLIBC_BASE), nullptr);
    // This program, the first object searched, refers to dlvsym@GLIBC_2.34:
    // its undefined entry is passed over for libc's definition.
    EXPECT_EQ(loaded_symbol("dlvsym", NVS_GLIBC_DLSYM), reinterpret_cast<void*>(&dlvsym));
}

TEST(BaseGlibc, TheBaseVersionFunctionsWork)
{
    void* self = base_glibc::dlopen(nullptr, RTLD_LAZY | RTLD_NOLOAD);
    ASSERT_NE(self, nullptr);
    EXPECT_EQ(base_glibc::dlvsym(self, "getpid", NVS_GLIBC_BASE),
              dlvsym(RTLD_DEFAULT, "getpid", NVS_GLIBC_BASE));
    EXPECT_EQ(base_glibc::dlclose(self), 0);
    pthread_t t;
    int ran = 0;
    ASSERT_EQ(base_glibc::pthread_create(
                  &t, nullptr,
                  [](void* p) -> void* {
                      *static_cast<int*>(p) = 1;
                      return p;
                  },
                  &ran),
              0);
    void* result = nullptr;
    ASSERT_EQ(base_glibc::pthread_join(t, &result), 0);
    EXPECT_EQ(result, &ran);
    EXPECT_EQ(ran, 1);
}

}  // namespace
}  // namespace nvshare::preload
