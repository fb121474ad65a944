// The I/O shell of nvshared: one sd-event loop that serves clients on the
// lock socket (taken by listener.h, read and written through connection.h),
// turns their frames into scheduler events and the scheduler's actions into
// frames (dispatch.h). One thread, never blocking; all decisions are the
// Scheduler's. (NVML's per-process readings come from memory_watch's own
// thread, through the loop.)
#pragma once

#include <sys/socket.h>
#include <systemd/sd-event.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/codec.h"
#include "daemon/connection.h"
#include "daemon/dispatch.h"
#include "daemon/host_readings.h"
#include "daemon/journal.h"
#include "daemon/listener.h"
#include "daemon/memory_watch.h"
#include "daemon/notify.h"
#include "daemon/options.h"
#include "daemon/principals.h"
#include "daemon/rates_store.h"
#include "daemon/scheduler.h"
#include "daemon/settings_target.h"
#include "daemon/status_line.h"
#include "daemon/status_service.h"

namespace nvshare::daemon {

class Server final : public SettingsTarget {
public:
    explicit Server(Options options);
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // Sets up the loop and the socket; false (logged) on failure.
    bool init();
    // Runs until SIGTERM/SIGINT or idle exit; returns the exit status.
    int run();

    // For the control plane (D-Bus): the state.
    sd_event* event() const { return event_; }
    const Scheduler& scheduler() const { return scheduler_; }
    bool revoke(ClientId id);
    // SettingsTarget (settings_target.h), for the settings' owner
    // (SettingsControl) alone.
    Scheduler& settings_scheduler() override { return scheduler_; }
    void after_settings_change(const SettingChange& change) override;
    void set_admin_rules(std::vector<PriorityRule> rules, Duration grace,
                         Duration log_waits_after) override;
    // What SIGHUP runs (systemctl reload): re-reads the configuration.
    void set_reload_handler(std::function<void()> handler) { reload_ = std::move(handler); }
    // Called after every batch of changes (client events, timers, settings).
    void set_state_observer(std::function<void()> observer) { observer_ = std::move(observer); }
    size_t connection_count() const { return connections_.size(); }
    // Who subordinate uids are charged to, from /etc/subuid (at start and
    // on reload); connections made before keep what they were charged to.
    void set_principals(Principals principals) { principals_ = std::move(principals); }
    // Status queries share one rate per user (principal) and one rendered
    // document, whichever way they come (the lock socket, D-Bus):
    // status_service.h.
    Duration status_wait(uint32_t uid, TimePoint now) { return status_.wait(uid, now); }
    const std::string& status_document(TimePoint now)
    {
        return status_.document(connections_.size(), now);
    }
    // What happens to clients and settings, as the journal records it.
    void set_event_observer(std::function<void(const Event&)> observer)
    {
        events_.set_observer(std::move(observer));
    }

private:
    static int on_connection(sd_event_source* s, int fd, uint32_t revents, void* conn);
    static int on_timer(sd_event_source* s, uint64_t usec, void* self);
    static int on_reload_signal(sd_event_source* s, const struct signalfd_siginfo* si, void* self);
    static int on_idle_timer(sd_event_source* s, uint64_t usec, void* self);
    static int on_connection_timer(sd_event_source* s, uint64_t usec, void* conn);
    static int on_process_exit(sd_event_source* s, int fd, uint32_t revents, void* conn);
    // A new connection from the listener: set up, or refused (too many).
    void on_accepted(int fd, const ucred& peer, uint32_t principal, TimePoint now);
    void process_input(Connection& c);
    bool handle_frame(Connection& c, const proto::FrameHeader& h, const uint8_t* payload);
    // False (the connection paused until its user's rate allows) when a
    // StatusQuery must wait; root is never paused.
    bool status_allowed(Connection& c, TimePoint now);
    // Bytes `principal`'s connections have not read yet.
    size_t unread_of(uint32_t principal) const;
    void send_status(Connection& c, TimePoint now);
    bool admit(Connection& c);
    void on_hello(Connection& c, const proto::Hello& hello);
    bool on_memory(Connection& c, const ClientRecord& client, const proto::MemoryPayload& m,
                   TimePoint now);
    bool on_stats(Connection& c, const ClientRecord& client, const proto::StatsPayload& st,
                  TimePoint now);
    bool on_rates(Connection& c, const ClientRecord& client, const proto::RatesPayload& p);
    // A GPU that knows no rates yet takes those kept from before a restart.
    void take_kept_rates(GpuIndex gpu);
    // Whether the rates measured on `g` are kept in rates.json: a GPU the
    // host lists, or whose size a client of root gave.
    static bool kept_across_restarts(const Gpu& g);
    // The rates of every such GPU that has some, and those kept of GPUs not
    // seen since the restart, to rates.json.
    void save_rates();
    // One KnownRates a GPU of the client's, after its Welcome.
    void send_known_rates(Connection& c);
    // What NVML and the processes' host memory confirm of the memory of
    // clients of users other than root (MemoryWatch), handed to the
    // scheduler.
    void on_memory_readings(const MemoryWatch::Readings& readings);
    void on_request(Connection& c, const ClientRecord& client, GpuSet gpus, TimePoint now);
    void on_released(const ClientRecord& client, GpuSet gpus, TimePoint now);
    void fail(Connection& c, proto::ErrorCode code, const std::string& message);
    void send_settings(Connection& c, bool welcome);
    void broadcast_settings();
    void after_change();  // dispatch, re-arm timers, notify observer, reap
    void reap();
    void destroy(Connection& c);
    // True if `c` holds GPUs and its process is still exiting: its memory
    // comes back only as it ends, so destroy() waits for that.
    bool await_exit(Connection& c);
    void rearm_timer();
    void update_idle_timer();
    void log_due_waits(TimePoint now);

    Options options_;
    Scheduler scheduler_;
    RatesStore rates_store_{options_.state_dir};
    std::map<std::string, MeasuredRates> kept_rates_;  // by GPU UUID, as rates.json had them
    bool rates_unsaved_ = false;                       // changed since the last save_rates()
    sd_event* event_ = nullptr;
    sd_event_source* timer_source_ = nullptr;
    sd_event_source* idle_source_ = nullptr;
    Connections connections_;
    uint64_t next_serial_ = 1;
    std::vector<uint64_t> doomed_;  // connections to close at the next reap
    std::function<void()> observer_;
    std::function<void()> reload_;
    Notifier notifier_;
    StatusLine status_line_{notifier_};  // systemd's STATUS=
    Principals principals_;
    Listener listener_{principals_,
                       {[this](int fd, const ucred& peer, uint32_t principal, TimePoint now) {
                            on_accepted(fd, peer, principal, now);
                        },
                        [this] { after_change(); }}};
    std::map<uint32_t, size_t> connections_per_principal_;
    StatusService status_{scheduler_, principals_};
    EventLog events_;
    std::unique_ptr<MemoryWatch> memory_watch_;
    WatchSet watched_;  // the GPUs and processes it reads
};

}  // namespace nvshare::daemon
