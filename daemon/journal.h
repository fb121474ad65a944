// nvshared's event log: one record for each thing that happens to a client
// (registered, granted, waiting long, asked to release, revoked, released,
// gone) or to the settings. Under journald (stderr is the journal's stream)
// a record goes through sd-journal with the event's MESSAGE_ID
// (daemon/message_ids.h) and the client's NVSHARE_* fields, so that
// `journalctl MESSAGE_ID=… NVSHARE_UID=1000` finds it; elsewhere it is the
// usual "<N>" line on stderr.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "daemon/log.h"
#include "daemon/scheduler.h"

namespace nvshare::daemon {

enum class EventKind {
    Registered,
    Granted,
    Waiting,
    Drop,
    Revoked,
    Released,
    SettingChanged,
    Gone
};

const char* message_id(EventKind kind);
// "granted", "waiting", "setting-changed": the event's name on D-Bus and in
// nvsharectl monitor.
const char* event_name(EventKind kind);

// Whom an event is about; none for a setting.
struct EventSubject {
    ClientId client = 0;
    ClientInfo info;
    std::vector<std::string> gpu_uuids;
};

// "pid 4242 (train.py, uid 1000)": who, at the head of each message about a client.
std::string subject_text(const ClientInfo& info);
// The subject of an event about `client`, naming those of its GPUs in
// `gpus` (0: all of them).
EventSubject event_subject(const Scheduler& scheduler, const ClientRecord& client, GpuSet gpus);
// Who holds the GPUs a waiting client wants: "pid 7 (train.py, uid 1000)".
std::string holders_text(const Scheduler& scheduler, const ClientRecord& client);

// What an event says beyond its subject, typed once: (name, value) pairs,
// the name in lower case ("cause", "waited_us"). The journal writes each as
// the field NVSHARE_NAME (journal_fields), the bus passes them on as the
// Event signal's details as they are: one vocabulary, nothing re-parsed.
using EventDetails = std::vector<std::pair<std::string, std::string>>;

// One event, as observers see it: `what` is the message without its subject.
struct Event {
    EventKind kind;
    const EventSubject* subject;  // null for a setting
    const EventDetails& details;
    const std::string& what;
};

// The fields of one journal record, "NAME=value" each (pure: for the tests).
std::vector<std::string> journal_fields(EventKind kind, LogLevel level, const EventSubject* subject,
                                        const EventDetails& details, const std::string& message);

// Whether stderr is the journal's stream (JOURNAL_STREAM names its device
// and inode), as systemd sets it up for StandardError=journal.
bool stderr_is_journal();

class EventLog {
public:
    EventLog() : journal_(stderr_is_journal()) {}

    // `details`: what the event says beyond its subject ({"cause", "admin"}:
    // the journal field NVSHARE_CAUSE=admin). The message is the subject's
    // text, then the formatted `what`. Observers get every event, whatever
    // the log level.
    void emit(EventKind kind, LogLevel level, const EventSubject* subject,
              const EventDetails& details, const char* format, ...)
        __attribute__((format(printf, 6, 7)));

    // One observer (the D-Bus service, which signals each event).
    void set_observer(std::function<void(const Event&)> observer)
    {
        observer_ = std::move(observer);
    }

    // Waits are logged once they pass the threshold: the server says when
    // a client starts and stops waiting, and asks which waits are due.
    void set_wait_threshold(Duration threshold) { wait_threshold_ = threshold; }
    // True when this starts a wait (not a Request that keeps its place).
    bool waiting(ClientId id, TimePoint since);
    // Stops watching; true when its wait was logged (went over the threshold).
    bool not_waiting(ClientId id);
    std::optional<TimePoint> next_wait_deadline() const;
    std::vector<ClientId> due_waits(TimePoint now);

private:
    bool journal_;
    std::function<void(const Event&)> observer_;
    Duration wait_threshold_ = std::chrono::seconds(1);
    std::map<ClientId, TimePoint> watched_;  // id -> when its wait is due
    std::set<std::pair<TimePoint, ClientId>> due_;
    std::set<ClientId> announced_;
};

}  // namespace nvshare::daemon
