#include "daemon/journal.h"

#include <sys/stat.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include <cctype>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

#include "daemon/message_ids.h"

namespace nvshare::daemon {

const char* message_id(EventKind kind)
{
    switch (kind) {
        case EventKind::Registered:
            return message_ids::kRegistered;
        case EventKind::Granted:
            return message_ids::kGranted;
        case EventKind::Waiting:
            return message_ids::kWaiting;
        case EventKind::Drop:
            return message_ids::kDrop;
        case EventKind::Revoked:
            return message_ids::kRevoked;
        case EventKind::Released:
            return message_ids::kReleased;
        case EventKind::SettingChanged:
            return message_ids::kSettingChanged;
        case EventKind::Gone:
            return message_ids::kGone;
    }
    return "";
}

const char* event_name(EventKind kind)
{
    switch (kind) {
        case EventKind::Registered:
            return "registered";
        case EventKind::Granted:
            return "granted";
        case EventKind::Waiting:
            return "waiting";
        case EventKind::Drop:
            return "drop";
        case EventKind::Revoked:
            return "revoked";
        case EventKind::Released:
            return "released";
        case EventKind::SettingChanged:
            return "setting-changed";
        case EventKind::Gone:
            return "gone";
    }
    return "";
}

std::string subject_text(const ClientInfo& info)
{
    return "pid " + std::to_string(info.pid) + " (" + info.comm + ", uid " +
           std::to_string(info.uid) + ")";
}

EventSubject event_subject(const Scheduler& scheduler, const ClientRecord& client, GpuSet gpus)
{
    EventSubject who{client.id, client.info, {}};
    for (GpuIndex g : client.gpus)
        if (gpus == 0 || (gpus & gpu_bit(g)) != 0)
            who.gpu_uuids.push_back(scheduler.gpus()[g].description.uuid);
    return who;
}

std::string holders_text(const Scheduler& scheduler, const ClientRecord& client)
{
    std::string holders;
    for (GpuIndex g : client.gpus) {
        if ((client.wanted & gpu_bit(g)) == 0)
            continue;
        for (ClientId h : scheduler.gpus()[g].holders)
            if (const ClientRecord* holder = scheduler.client(h))
                holders += (holders.empty() ? "" : ", ") + subject_text(holder->info);
    }
    return holders.empty() ? "nobody (not yet switched)" : holders;
}

std::vector<std::string> journal_fields(EventKind kind, LogLevel level, const EventSubject* subject,
                                        const EventDetails& details, const std::string& message)
{
    std::vector<std::string> f{
        "MESSAGE=" + message,
        std::string("MESSAGE_ID=") + message_id(kind),
        "PRIORITY=" + std::to_string(static_cast<int>(level)),
        "SYSLOG_IDENTIFIER=nvshared",
    };
    if (subject != nullptr) {
        f.push_back("NVSHARE_CLIENT=" + std::to_string(subject->client));
        f.push_back("NVSHARE_PID=" + std::to_string(subject->info.pid));
        // journald adds the OBJECT_ fields of that process (its unit among
        // them) to a record from root: `journalctl -u UNIT` shows nvshared's
        // records about the unit's processes.
        f.push_back("OBJECT_PID=" + std::to_string(subject->info.pid));
        f.push_back("NVSHARE_UID=" + std::to_string(subject->info.uid));
        f.push_back("NVSHARE_COMM=" + subject->info.comm);
        if (!subject->info.command.empty())
            f.push_back("NVSHARE_COMMAND=" + subject->info.command);
        // A field may repeat: one per GPU the event concerns.
        for (const auto& uuid : subject->gpu_uuids)
            f.push_back("NVSHARE_GPU_UUID=" + uuid);
    }
    for (const auto& [name, value] : details) {
        std::string field = "NVSHARE_";
        for (const char ch : name)
            field += static_cast<char>(toupper(static_cast<unsigned char>(ch)));
        f.push_back(field + "=" + value);
    }
    return f;
}

bool stderr_is_journal()
{
    const char* e = getenv("JOURNAL_STREAM");
    if (e == nullptr)
        return false;
    uintmax_t dev = 0, ino = 0;
    if (sscanf(e, "%ju:%ju", &dev, &ino) != 2)
        return false;
    struct stat st {};
    // Inherited by a child, JOURNAL_STREAM no longer describes its stderr
    // unless dev and inode still match.
    return fstat(STDERR_FILENO, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

void EventLog::emit(EventKind kind, LogLevel level, const EventSubject* subject,
                    const EventDetails& details, const char* format, ...)
{
    const bool logged = static_cast<int>(level) <= static_cast<int>(log_level());
    if (!logged && !observer_)
        return;
    va_list ap;
    va_start(ap, format);
    const std::string what = format_message(format, ap);
    va_end(ap);
    if (observer_)
        observer_(Event{kind, subject, details, what});
    if (!logged)
        return;
    const std::string line = subject == nullptr ? what : subject_text(subject->info) + ": " + what;
    if (!journal_) {
        log(level, "%s", line.c_str());
        return;
    }
    const auto fields = journal_fields(kind, level, subject, details, line);
    std::vector<iovec> iov;
    iov.reserve(fields.size());
    for (const auto& field : fields)
        iov.push_back({const_cast<char*>(field.data()), field.size()});
    // Never lose the line: the stream is still there if the socket is not.
    if (sd_journal_sendv(iov.data(), static_cast<int>(iov.size())) < 0)
        log(level, "%s", line.c_str());
}

bool EventLog::waiting(ClientId id, TimePoint since)
{
    if (watched_.count(id) != 0 || announced_.count(id) != 0)
        return false;  // a Request that keeps its place in the queue keeps its wait
    const TimePoint due = since + wait_threshold_;
    watched_[id] = due;
    due_.insert({due, id});
    return true;
}

bool EventLog::not_waiting(ClientId id)
{
    if (auto it = watched_.find(id); it != watched_.end()) {
        due_.erase({it->second, id});
        watched_.erase(it);
    }
    return announced_.erase(id) != 0;
}

std::optional<TimePoint> EventLog::next_wait_deadline() const
{
    if (due_.empty())
        return std::nullopt;
    return due_.begin()->first;
}

std::vector<ClientId> EventLog::due_waits(TimePoint now)
{
    std::vector<ClientId> ids;
    while (!due_.empty() && due_.begin()->first <= now) {
        const ClientId id = due_.begin()->second;
        due_.erase(due_.begin());
        watched_.erase(id);
        announced_.insert(id);
        ids.push_back(id);
    }
    return ids;
}

}  // namespace nvshare::daemon
