// The journal records nvshared sends (daemon/journal.*): their fields, and
// when a wait is due to be logged. The records on the wire are checked end
// to end by tests/system/journal_test.py.
#include "daemon/journal.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "daemon/message_ids.h"

using namespace nvshare;
using namespace nvshare::daemon;
using namespace std::chrono_literals;

namespace {

bool has(const std::vector<std::string>& fields, const std::string& field)
{
    return std::find(fields.begin(), fields.end(), field) != fields.end();
}

TEST(Journal, FieldsNameTheEventAndTheClient)
{
    EventSubject who{7, {4242, 1000, "train.py"}, {"GPU-a", "GPU-b"}};
    who.info.command = "python3 train.py --epochs 3";
    const auto f =
        journal_fields(EventKind::Revoked, LogLevel::Info, &who, {{"cause", "admin"}}, "revoked");
    EXPECT_TRUE(has(f, "MESSAGE=revoked"));
    EXPECT_TRUE(has(f, std::string("MESSAGE_ID=") + message_ids::kRevoked));
    EXPECT_TRUE(has(f, "PRIORITY=6"));
    EXPECT_TRUE(has(f, "NVSHARE_PID=4242"));
    EXPECT_TRUE(has(f, "NVSHARE_UID=1000"));
    EXPECT_TRUE(has(f, "NVSHARE_COMM=train.py"));
    EXPECT_TRUE(has(f, "NVSHARE_COMMAND=python3 train.py --epochs 3"));
    // The process itself, for journald's OBJECT_ fields (journalctl -u UNIT).
    EXPECT_TRUE(has(f, "OBJECT_PID=4242"));
    EXPECT_TRUE(has(f, "NVSHARE_GPU_UUID=GPU-a"));
    EXPECT_TRUE(has(f, "NVSHARE_GPU_UUID=GPU-b"));
    EXPECT_TRUE(has(f, "NVSHARE_CAUSE=admin"));
}

TEST(Journal, EveryKindHasItsOwnId)
{
    std::set<std::string> ids;
    for (auto k :
         {EventKind::Registered, EventKind::Granted, EventKind::Waiting, EventKind::Drop,
          EventKind::Revoked, EventKind::Released, EventKind::SettingChanged, EventKind::Gone}) {
        EXPECT_EQ(strlen(message_id(k)), 32u);
        ids.insert(message_id(k));
    }
    EXPECT_EQ(ids.size(), 8u);
}

TEST(Journal, StreamMustMatchStderr)
{
    struct stat st {};
    ASSERT_EQ(fstat(2, &st), 0);
    const std::string mine = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
    setenv("JOURNAL_STREAM", mine.c_str(), 1);
    EXPECT_TRUE(stderr_is_journal());
    // Inherited from a parent whose stderr was the journal: not ours.
    setenv("JOURNAL_STREAM", (std::to_string(st.st_dev) + ":1").c_str(), 1);
    EXPECT_FALSE(stderr_is_journal());
    unsetenv("JOURNAL_STREAM");
    EXPECT_FALSE(stderr_is_journal());
}

TEST(Journal, WaitsAreDueOnceAfterTheThreshold)
{
    EventLog log;
    log.set_wait_threshold(1s);
    TimePoint t{};
    log.waiting(1, t);
    log.waiting(2, t + 500ms);
    log.waiting(1, t + 900ms);  // a repeated Request keeps the first wait
    EXPECT_EQ(log.next_wait_deadline(), t + 1s);
    EXPECT_TRUE(log.due_waits(t + 999ms).empty());
    EXPECT_EQ(log.due_waits(t + 1s), std::vector<ClientId>{1});
    log.waiting(1, t + 1s);            // already announced: not again
    EXPECT_FALSE(log.not_waiting(2));  // granted before its wait was due
    EXPECT_FALSE(log.next_wait_deadline().has_value());
    EXPECT_TRUE(log.not_waiting(1));  // its grant says it waited long
}

// One event, two renderings: the log's record and the observer's (the bus's
// Event signal), each once, with the same details; below the log level only
// the observer hears of it.
TEST(Journal, AnEventReachesTheLogAndTheObserverOnceEach)
{
    unsetenv("JOURNAL_STREAM");  // the "<N>" line on stderr, not sd-journal
    EventLog log;
    struct Seen {
        EventKind kind;
        ClientId client;
        EventDetails details;
        std::string what;
    };
    std::vector<Seen> seen;
    log.set_observer([&](const Event& e) {
        seen.push_back({e.kind, e.subject != nullptr ? e.subject->client : 0, e.details, e.what});
    });
    const LogLevel level = log_level();
    set_log_level(LogLevel::Info);
    const EventSubject who{7, {4242, 1000, "train.py"}, {"GPU-a"}};

    ::testing::internal::CaptureStderr();
    log.emit(EventKind::Revoked, LogLevel::Info, &who, {{"cause", "admin"}},
             "revoked the lock on %s", "GPU-a");
    std::string out = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(out, "<6>pid 4242 (train.py, uid 1000): revoked the lock on GPU-a\n");
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].kind, EventKind::Revoked);
    EXPECT_EQ(seen[0].client, 7u);
    EXPECT_EQ(seen[0].details, (EventDetails{{"cause", "admin"}}));
    EXPECT_EQ(seen[0].what, "revoked the lock on GPU-a");

    ::testing::internal::CaptureStderr();
    log.emit(EventKind::Released, LogLevel::Debug, &who, {}, "released %s", "GPU-a");
    out = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(out, "");
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen[1].kind, EventKind::Released);
    set_log_level(level);
}

}  // namespace
