// Unit tests of libnvshare's pure parts: variant matching for
// cuGetProcAddress, environment parsing, the allocation table, the idle
// gap history, the lines about waiting for the GPU.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "preload/env.h"
#include "preload/hooks/proc_address.h"
#include "preload/lock/idle_gaps.h"
#include "preload/lock/wait_notice.h"
#include "preload/memory/alloc_table.h"
#include "preload/memory/array_size.h"

namespace nvshare::preload {
namespace {

size_t base(const char* name)
{
    return base_length(name);
}

TEST(ProcAddressMatch, BaseNameStripsVariantSuffixes)
{
    EXPECT_EQ(base("cuMemAlloc"), 10u);
    EXPECT_EQ(base("cuMemAlloc_v2"), 10u);
    EXPECT_EQ(base("cuLaunchKernel_ptsz"), 14u);
    EXPECT_EQ(base("cuMemcpyHtoD_v2_ptds"), 12u);
    EXPECT_EQ(base("cuStreamGetCaptureInfo_v3"), 22u);
    EXPECT_EQ(base("cuMemsetD2D8_v2"), 12u);  // trailing digits of the name stay
    EXPECT_EQ(base("cuMemsetD8"), 10u);
    EXPECT_EQ(base("cuFoo_v"), 7u);  // "_v" without a number is part of the name
}

TEST(ProcAddressMatch, VariantsOfABaseName)
{
    const char* b = "cuMemcpy3D";
    EXPECT_TRUE(is_variant_of("cuMemcpy3D", b, 10));
    EXPECT_TRUE(is_variant_of("cuMemcpy3D_v2", b, 10));
    EXPECT_TRUE(is_variant_of("cuMemcpy3D_v2_ptds", b, 10));
    EXPECT_FALSE(is_variant_of("cuMemcpy3DPeer", b, 10));
    EXPECT_FALSE(is_variant_of("cuMemcpy3DAsync_v2", b, 10));
    EXPECT_FALSE(is_variant_of("cuMemcpy", b, 10));
}

// A table like the library's: some exported names, an internal (nullptr)
// one; "real functions" are distinct fake addresses.
const char* const kNames[] = {
    "cuMemAlloc_v2",
    "cuLaunchKernel",
    "cuLaunchKernel_ptsz",
    "cuMemPrefetchAsync",
    "cuMemPrefetchAsync_ptsz",
    "cuMemPrefetchAsync_v2",
    "cuMemPrefetchAsync_v2_ptsz",
    "cuMemcpy3DPeer",
    "cuMemcpy3D_v2",
    nullptr,
};
constexpr size_t kCount = sizeof kNames / sizeof kNames[0];
char g_functions[kCount];
const void* fake_real(size_t i, void*)
{
    return &g_functions[i];
}

int match(const char* symbol, const void* p, bool* any)
{
    return match_variant(symbol, p, kNames, kCount, fake_real, nullptr, any);
}

TEST(ProcAddressMatch, FindsExactlyTheVariantTheDriverReturned)
{
    bool any = false;
    EXPECT_EQ(match("cuMemPrefetchAsync", &g_functions[3], &any), 3);
    EXPECT_EQ(match("cuMemPrefetchAsync", &g_functions[4], &any), 4);
    EXPECT_EQ(match("cuMemPrefetchAsync", &g_functions[5], &any), 5);
    EXPECT_EQ(match("cuMemPrefetchAsync", &g_functions[6], &any), 6);
    EXPECT_EQ(match("cuLaunchKernel", &g_functions[2], &any), 2);
    EXPECT_EQ(match("cuMemAlloc", &g_functions[0], &any), 0);
    EXPECT_TRUE(any);
}

TEST(ProcAddressMatch, NeverMatchesAnotherFunctionOrAnUnknownPointer)
{
    bool any = false;
    // cuMemcpy3DPeer's pointer is not a variant of cuMemcpy3D.
    EXPECT_EQ(match("cuMemcpy3D", &g_functions[7], &any), -1);
    EXPECT_TRUE(any);  // cuMemcpy3D_v2 is
    // A tool's trampoline: a known name, an unknown pointer.
    char trampoline;
    EXPECT_EQ(match("cuLaunchKernel", &trampoline, &any), -1);
    EXPECT_TRUE(any);
    // A name we do not wrap.
    EXPECT_EQ(match("cuModuleLoad", &g_functions[1], &any), -1);
    EXPECT_FALSE(any);
}

TEST(Env, FlagsAreParsedByValue)
{
    EXPECT_EQ(parse_flag(nullptr), Flag::Unset);
    for (const char* on : {"1", "true", "TRUE", "yes", "on", "On"})
        EXPECT_EQ(parse_flag(on), Flag::On) << on;
    for (const char* off : {"0", "", "false", "no", "off", "OFF"})
        EXPECT_EQ(parse_flag(off), Flag::Off) << off;
    for (const char* bad : {"2", "enable", " 1", "1 "})
        EXPECT_EQ(parse_flag(bad), Flag::Invalid) << bad;
}

TEST(Env, Millis)
{
    uint32_t v = 7;
    EXPECT_TRUE(parse_millis("0", 1000, &v));
    EXPECT_EQ(v, 0u);
    EXPECT_TRUE(parse_millis("250", 1000, &v));
    EXPECT_EQ(v, 250u);
    EXPECT_FALSE(parse_millis("1001", 1000, &v));
    EXPECT_FALSE(parse_millis("", 1000, &v));
    EXPECT_FALSE(parse_millis("10ms", 1000, &v));
    EXPECT_FALSE(parse_millis("-1", 1000, &v));
    EXPECT_FALSE(parse_millis("99999999999999999999", 1000, &v));
    EXPECT_EQ(v, 250u);
}

TEST(Env, Priority)
{
    proto::Priority p = proto::Priority::Batch;
    EXPECT_TRUE(parse_priority(nullptr, &p));
    EXPECT_EQ(p, proto::Priority::Unset);
    EXPECT_TRUE(parse_priority("", &p));
    EXPECT_EQ(p, proto::Priority::Unset);
    EXPECT_TRUE(parse_priority("interactive", &p));
    EXPECT_EQ(p, proto::Priority::Interactive);
    EXPECT_TRUE(parse_priority("normal", &p));
    EXPECT_EQ(p, proto::Priority::Normal);
    EXPECT_TRUE(parse_priority("batch", &p));
    EXPECT_EQ(p, proto::Priority::Batch);
    for (const char* bad : {"high", "Batch", " batch", "batch ", "unset", "1"}) {
        EXPECT_FALSE(parse_priority(bad, &p)) << bad;
        EXPECT_EQ(p, proto::Priority::Unset) << bad;
    }
}

TEST(Env, Swap)
{
    bool engine = false;
    const char* const defaults[] = {nullptr, "", "auto", "AUTO"};
    for (const char* yes : defaults) {
        engine = false;
        EXPECT_TRUE(parse_swap(yes, &engine)) << (yes ? yes : "(unset)");
        EXPECT_TRUE(engine);
    }
    EXPECT_TRUE(parse_swap("managed", &engine));
    EXPECT_FALSE(engine);
    for (const char* bad : {"vmm", "0", "off", " managed", "managed "}) {
        engine = false;
        EXPECT_FALSE(parse_swap(bad, &engine)) << bad;
        EXPECT_TRUE(engine) << bad;  // invalid: the default stays
    }
}

TEST(AllocTable, InsertFindRemove)
{
    AllocTable t;
    AllocTable::Entry e{};
    EXPECT_FALSE(t.find(0x1000, &e));
    EXPECT_FALSE(t.remove(0x1000, &e));
    ASSERT_TRUE(t.insert(0x1000, 64, 0, 1));
    ASSERT_TRUE(t.insert(0x2000, 128, 1, 2));
    EXPECT_EQ(t.size(), 2u);
    ASSERT_TRUE(t.find(0x2000, &e));
    EXPECT_EQ(e.size, 128u);
    EXPECT_EQ(e.gpu, 1);
    EXPECT_EQ(e.kind, 2);
    ASSERT_TRUE(t.insert(0x2000, 256, 1, 2));  // replaces
    EXPECT_EQ(t.size(), 2u);
    ASSERT_TRUE(t.remove(0x2000, &e));
    EXPECT_EQ(e.size, 256u);
    EXPECT_FALSE(t.find(0x2000, nullptr));
    EXPECT_TRUE(t.find(0x1000, nullptr));
    t.clear();
    EXPECT_EQ(t.size(), 0u);
    EXPECT_FALSE(t.find(0x1000, nullptr));
}

TEST(AllocTable, KeepsTheRewrittenMarkAndTheOrderAcrossGrowth)
{
    AllocTable t;
    ASSERT_TRUE(t.insert(0x1000, 64, 0, 0, true));
    for (uint64_t i = 1; i <= 1000; ++i)  // forces the table to grow several times
        ASSERT_TRUE(t.insert(0x1000 + i * 0x1000, 64, 0, 0, false));
    AllocTable::Entry first{}, last{};
    ASSERT_TRUE(t.find(0x1000, &first));
    ASSERT_TRUE(t.find(0x1000 + 1000 * 0x1000, &last));
    EXPECT_TRUE(first.rewritten);
    EXPECT_FALSE(last.rewritten);
    EXPECT_LT(first.seq, last.seq);
    uint64_t previous = 0;
    for (uint64_t i = 0; i <= 1000; ++i) {
        AllocTable::Entry e{};
        ASSERT_TRUE(t.find(0x1000 + i * 0x1000, &e));
        EXPECT_GT(e.seq, previous) << "allocation " << i;
        previous = e.seq;
    }
}

TEST(AllocTable, AgreesWithAMapUnderChurn)
{
    AllocTable t;
    std::map<uint64_t, uint64_t> model;
    std::mt19937_64 rng(42);
    for (int i = 0; i < 200000; ++i) {
        // Page-aligned keys from a small range: many collisions and reuse.
        const uint64_t key = 0x7f0000000000ull + (rng() % 20000) * 4096;
        if (rng() % 3 != 0) {
            const uint64_t size = rng() % 100000 + 1;
            ASSERT_TRUE(t.insert(key, size, 0, 1));
            model[key] = size;
        } else {
            AllocTable::Entry e{};
            const bool removed = t.remove(key, &e);
            ASSERT_EQ(removed, model.count(key) == 1);
            if (removed) {
                EXPECT_EQ(e.size, model[key]);
                model.erase(key);
            }
        }
        ASSERT_EQ(t.size(), model.size());
    }
    for (const auto& [key, size] : model) {
        AllocTable::Entry e{};
        ASSERT_TRUE(t.find(key, &e));
        EXPECT_EQ(e.size, size);
    }
    // Deleted slots are reused: the table did not grow without bound.
    EXPECT_LE(t.capacity(), 65536u);
}

// ---- idle gaps -----------------------------------------------------------------------

constexpr uint64_t kMs = 1000 * 1000;

// A pause of `ms` in the GPU work of the process `g` watches.
void pause_of(IdleGaps& g, uint64_t ms)
{
    g.idle_since(10 * kMs);
    g.resumed((10 + ms) * kMs);
}

TEST(IdleGaps, WithoutAHistoryWaitsTheSwitchCostOrThePeriod)
{
    IdleGaps g;
    EXPECT_EQ(g.hold_for(0, 20 * kMs), 20 * kMs);
    EXPECT_EQ(g.hold_for(300 * kMs, 20 * kMs), 300 * kMs);
}

TEST(IdleGaps, LongPausesLetGoAfterTheFloor)
{
    IdleGaps g;
    g.idle_since(1000 * kMs);
    g.idle_since(1500 * kMs);  // the same pause: the earliest time stays
    g.resumed(2000 * kMs);     // a pause of 1 s
    EXPECT_EQ(g.remembered(), 1u);
    EXPECT_EQ(g.hold_for(300 * kMs, 20 * kMs), IdleGaps::kShortHoldFloorNs);
    // A switch that costs more than the pauses last is not worth it.
    EXPECT_EQ(g.hold_for(1200 * kMs, 20 * kMs), 1200 * kMs);
}

TEST(IdleGaps, WaitsOutTheShortPausesOnly)
{
    IdleGaps g;
    pause_of(g, 5);  // between the steps of a burst
    EXPECT_EQ(g.hold_for(300 * kMs, 20 * kMs), 300 * kMs) << "no long pause seen yet";
    pause_of(g, 900);
    pause_of(g, 8);
    EXPECT_EQ(g.hold_for(300 * kMs, 20 * kMs), 16 * kMs) << "twice the longest short pause";
    pause_of(g, 200);  // short against a switch of 300 ms
    EXPECT_EQ(g.hold_for(300 * kMs, 20 * kMs), 300 * kMs) << "at most the ski rental's wait";
    for (size_t i = 0; i < IdleGaps::kRemembered; ++i)
        pause_of(g, 900);
    EXPECT_EQ(g.hold_for(300 * kMs, 20 * kMs), IdleGaps::kShortHoldFloorNs)
        << "the short ones are forgotten";
    EXPECT_EQ(g.remembered(), IdleGaps::kRemembered);
    for (size_t i = 0; i < IdleGaps::kRemembered; ++i)
        pause_of(g, 50);
    EXPECT_EQ(g.hold_for(300 * kMs, 20 * kMs), 300 * kMs) << "and so are the long ones";
}

// The short pauses of a start-up (allocations that waited, a first fill) do
// not keep every later long pause waiting out a switch: the short ones count
// from the latest kRecentShort pauses only, the long ones from all.
TEST(IdleGaps, ShortPausesCountFromTheLatestOnly)
{
    IdleGaps g;
    pause_of(g, 400);  // during the start-up
    pause_of(g, 1500);
    EXPECT_EQ(g.hold_for(700 * kMs, 20 * kMs), 700 * kMs) << "twice 400 ms is more";
    for (size_t i = 1; i < IdleGaps::kRecentShort; ++i)
        pause_of(g, 1500);
    EXPECT_EQ(g.longest_recent_short(700 * kMs), 0u);
    EXPECT_EQ(g.hold_for(700 * kMs, 20 * kMs), IdleGaps::kShortHoldFloorNs)
        << "only long pauses lately";
    EXPECT_TRUE(g.long_seen(700 * kMs));
    pause_of(g, 30);  // a short one again
    EXPECT_EQ(g.hold_for(700 * kMs, 20 * kMs), 60 * kMs);
}

// The work of a check phase comes right after the program's wait for its
// last step returns, and a synchronous read's pause reads as 0 ms: after
// long pauses only, or after such a 0 ms pause, the holder still waits the
// floor (letting go at once raced the program's next call and won), never
// more than the ski rental's wait.
TEST(IdleGaps, LongPausesOrOnesReadAsNoneStillHoldTheFloor)
{
    IdleGaps g;
    pause_of(g, 1000);
    pause_of(g, 1000);
    EXPECT_EQ(g.hold_for(500 * kMs, 20 * kMs), IdleGaps::kShortHoldFloorNs);
    pause_of(g, 0);
    EXPECT_EQ(g.longest_recent_short(500 * kMs), 0u);
    EXPECT_EQ(g.hold_for(500 * kMs, 20 * kMs), IdleGaps::kShortHoldFloorNs);
    EXPECT_EQ(g.hold_for(5 * kMs, 0), 5 * kMs) << "never more than the ski rental's wait";
    pause_of(g, 6);
    EXPECT_EQ(g.hold_for(500 * kMs, 20 * kMs), 12 * kMs) << "twice a short pause above it";
}

// A check phase after the last step: many quick reads whose pauses read as
// 0 ms, and now and then a read that keeps the CPU longer than the floor. The
// holder lets go wrongly at the first such pause; that pause (timed to the
// call that came back) then holds for the rest of the burst, however many
// 0 ms pauses follow, and no longer than the next long pause.
TEST(IdleGaps, AShortPauseHoldsForTheRestOfItsBurst)
{
    IdleGaps g;
    pause_of(g, 1000);
    pause_of(g, 1000);
    pause_of(g, 0);
    EXPECT_EQ(g.hold_for(500 * kMs, 20 * kMs), IdleGaps::kShortHoldFloorNs);
    pause_of(g, 19);  // longer than the floor: let go, wrongly
    for (int i = 0; i < 5; ++i)
        pause_of(g, 0);
    EXPECT_EQ(g.longest_recent_short(500 * kMs), 19 * kMs);
    EXPECT_EQ(g.hold_for(500 * kMs, 20 * kMs), 38 * kMs);
    pause_of(g, 1000);  // the burst ends
    EXPECT_EQ(g.longest_recent_short(500 * kMs), 0u) << "the latest two: 1000 and 0 ms";
    EXPECT_EQ(g.hold_for(500 * kMs, 20 * kMs), IdleGaps::kShortHoldFloorNs);
    pause_of(g, 3);
    EXPECT_EQ(g.longest_recent_short(500 * kMs), 3 * kMs) << "the new burst only";
}

TEST(IdleGaps, WorkWithoutASeenPauseRecordsNothing)
{
    IdleGaps g;
    g.resumed(5 * kMs);
    EXPECT_EQ(g.remembered(), 0u);
    EXPECT_FALSE(g.idle());
    g.idle_since(10 * kMs);
    EXPECT_TRUE(g.idle());
    g.resumed(9 * kMs);  // submitted before the pause was seen: no pause at all
    EXPECT_EQ(g.remembered(), 1u);
    EXPECT_EQ(g.hold_for(0, 20 * kMs), 20 * kMs);
}

TEST(IdleGaps, LooksAgainSoonWhileItWaitsOutALongHold)
{
    const uint64_t start = 1000 * kMs;
    // A hold of 2.3 s (host memory still to be made) is looked at every
    // 50 ms, or every period where that is shorter: work that resumes and
    // pauses again meanwhile is seen within that, not at the hold's end.
    EXPECT_EQ(IdleGaps::next_look(start, start + 2300 * kMs, 1000 * kMs), start + 50 * kMs);
    EXPECT_EQ(IdleGaps::next_look(start, start + 2300 * kMs, 20 * kMs), start + 20 * kMs);
    // A look planned sooner stays as planned.
    EXPECT_EQ(IdleGaps::next_look(start, start + 2 * kMs, 20 * kMs), start + 2 * kMs);
    EXPECT_EQ(IdleGaps::next_look(start, start + 30 * kMs, 1000 * kMs), start + 30 * kMs);
}

// ---- the lines about waiting (issue 16) -------------------------------------

proto::WaitingPayload waiting(uint32_t reason, uint32_t place, int32_t pid)
{
    proto::WaitingPayload w{};
    w.gpu = 0;
    w.reason = reason;
    w.place = place;
    w.holder_pid = pid;
    w.holder_uid = 1001;
    w.held_us = 11'500'000;
    w.quantum_us = 30'000'000;
    memcpy(w.holder_comm, "python3", 7);
    return w;
}

WaitContext context(const char* user)
{
    WaitContext c;
    c.ordinal = 1;
    c.gpu_name = "NVIDIA H100 80GB HBM3";
    c.gpu_uuid = "GPU-01234567-89ab-cdef-0123-456789abcdef";
    c.holder_user = user;
    c.waited_ns = 2'040'000'000;
    c.since_frame_ns = 600'000'000;
    return c;
}

std::string waiting_line(const proto::WaitingPayload* w, const WaitContext& c)
{
    char line[400];
    const size_t n = format_waiting(line, sizeof line, w, c);
    EXPECT_EQ(n, strlen(line));
    return line;
}

TEST(WaitNotice, NamesGpuHolderTimePlaceAndReason)
{
    const auto w = waiting(static_cast<uint32_t>(proto::WaitReason::ModeOn), 2, 456);
    EXPECT_EQ(waiting_line(&w, context("alice")),
              "waiting for GPU 1 (NVIDIA H100 80GB HBM3, GPU-01234567-89ab-cdef-0123-456789abcdef) "
              "for 2.0 s: held by pid 456 (python3, user alice) for 12.1 s of its 30.0 s quantum; "
              "2nd in line; why: mode on, processes take turns");
}

TEST(WaitNotice, EachReasonHasItsWords)
{
    using proto::WaitReason;
    const std::map<WaitReason, std::string> words{
        {WaitReason::Oversubscribed, "why: its memory is oversubscribed, processes take turns"},
        {WaitReason::ModeOn, "why: mode on, processes take turns"},
        {WaitReason::Priority, "why: a process of higher priority goes first"},
        {WaitReason::Turns, "why: auto mode takes turns at the end of the holder's burst"},
    };
    for (const auto& [reason, text] : words) {
        const auto w = waiting(static_cast<uint32_t>(reason), 1, 456);
        EXPECT_NE(waiting_line(&w, context("alice")).find(text), std::string::npos) << text;
    }
    const auto unknown = waiting(99, 1, 456);
    EXPECT_NE(waiting_line(&unknown, context("alice")).find("why: processes take turns"),
              std::string::npos);
}

TEST(WaitNotice, PlacesUidsAndMissingFacts)
{
    for (const auto& [place, text] : std::map<uint32_t, std::string>{{1, "1st"},
                                                                     {2, "2nd"},
                                                                     {3, "3rd"},
                                                                     {4, "4th"},
                                                                     {11, "11th"},
                                                                     {12, "12th"},
                                                                     {13, "13th"},
                                                                     {21, "21st"},
                                                                     {112, "112th"}}) {
        const auto w = waiting(2, place, 456);
        // Beyond the named places, the place is as last told (a snapshot).
        const std::string said =
            place > proto::kNamedPlaces ? " in line as last told;" : " in line;";
        EXPECT_NE(waiting_line(&w, context("alice")).find("; " + text + said), std::string::npos)
            << place;
    }
    const auto w = waiting(2, 1, 456);
    EXPECT_NE(waiting_line(&w, context("")).find("(python3, uid 1001)"), std::string::npos);
    const auto behind = waiting(2, 3, 0);
    EXPECT_NE(waiting_line(&behind, context("")).find(": processes ahead in line; 3rd in line"),
              std::string::npos);
    const auto others = waiting(2, 1, 0);
    EXPECT_NE(waiting_line(&others, context("")).find("its other GPUs"), std::string::npos);
    EXPECT_EQ(waiting_line(nullptr, context("")),
              "waiting for GPU 1 (NVIDIA H100 80GB HBM3, GPU-01234567-89ab-cdef-0123-456789abcdef) "
              "for 2.0 s (nvshared does not say why)");
}

TEST(WaitNotice, LongTextIsCutNotOverrun)
{
    auto w = waiting(2, 4000000000u, 2147483647);
    memset(w.holder_comm, 'x', sizeof w.holder_comm - 1);
    char small[40];
    memset(small, '#', sizeof small);
    EXPECT_EQ(format_waiting(small, 32, &w, context("alice")), 31u);
    EXPECT_EQ(small[31], '\0');
    EXPECT_EQ(small[32], '#');
}

TEST(WaitNotice, GotLineAndRevokeCauses)
{
    char line[96];
    format_got(line, sizeof line, 0, 9'160'000'000);
    EXPECT_STREQ(line, "got GPU 0 after 9.1 s");
    EXPECT_STREQ(revoke_cause_text(static_cast<uint32_t>(proto::RevokeCauseCode::GraceExpired)),
                 "not released within the grace period");
    EXPECT_STREQ(revoke_cause_text(static_cast<uint32_t>(proto::RevokeCauseCode::Admin)),
                 "revoked by an administrator (nvsharectl revoke)");
    EXPECT_STREQ(revoke_cause_text(0), "no cause given");
}

TEST(WaitNotice, UserNamesComeFromPasswdText)
{
    const std::string passwd =
        "root:x:0:0:root:/root:/bin/bash\n"
        "broken\n"
        "bad:x:12a:0::/:/bin/sh\n"
        "alice:x:1001:1001:Alice:/home/alice:/bin/bash\n"
        "huge:x:99999999999:0::/:/bin/sh\n"
        "last:x:7:7::/:";  // no final newline
    char name[64];
    ASSERT_TRUE(user_name_in(passwd.data(), passwd.size(), 1001, name, sizeof name));
    EXPECT_STREQ(name, "alice");
    ASSERT_TRUE(user_name_in(passwd.data(), passwd.size(), 0, name, sizeof name));
    EXPECT_STREQ(name, "root");
    ASSERT_TRUE(user_name_in(passwd.data(), passwd.size(), 7, name, sizeof name));
    EXPECT_STREQ(name, "last");
    EXPECT_FALSE(user_name_in(passwd.data(), passwd.size(), 12, name, sizeof name));
    EXPECT_FALSE(user_name_in(passwd.data(), passwd.size(), 1215752191, name, sizeof name))
        << "99999999999 wrapped to 32 bits";
    EXPECT_FALSE(user_name_in(passwd.data(), passwd.size(), 1001, name, 5)) << "no room";
}

}  // namespace
}  // namespace nvshare::preload

// ---- array sizes (issue 20: arrays are counted) -------------------------------------

TEST(ArraySize, FromTheDescriptor)
{
    using nvshare::preload::array_bytes;
    EXPECT_EQ(array_bytes(CU_AD_FORMAT_FLOAT, 4, 1024, 1024, 0), 16ull << 20);
    EXPECT_EQ(array_bytes(CU_AD_FORMAT_FLOAT, 1, 64, 64, 64), 1ull << 20);
    EXPECT_EQ(array_bytes(CU_AD_FORMAT_UNSIGNED_INT8, 1, 1000, 0, 0), 1000u);  // 1D
    EXPECT_EQ(array_bytes(CU_AD_FORMAT_HALF, 2, 10, 10, 1), 400u);
    EXPECT_EQ(array_bytes(CU_AD_FORMAT_FLOAT, 4, UINT64_MAX / 2, 4, 0), UINT64_MAX);
}

TEST(ArraySize, MipmappedSumsItsLevels)
{
    using nvshare::preload::mipmapped_array_bytes;
    // 512x512 RGBA8: 1 MiB + 256 KiB.
    EXPECT_EQ(mipmapped_array_bytes(CU_AD_FORMAT_UNSIGNED_INT8, 4, 512, 512, 0, 2),
              (1ull << 20) + (256ull << 10));
    // Levels past 1x1 stay 1x1.
    EXPECT_EQ(mipmapped_array_bytes(CU_AD_FORMAT_UNSIGNED_INT8, 1, 2, 0, 0, 4), 2u + 1 + 1 + 1);
}
