#include "preload/env.h"

#include <fcntl.h>
#include <strings.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "build-config.h"
#include "common/protocol.h"
#include "preload/exclusion.h"
#include "preload/log.h"
#include "preload/ownership.h"

namespace nvshare::preload {

bool parse_policy(const char* text, Policy* out)
{
    *out = Policy::Auto;
    if (text != nullptr && strcasecmp(text, "auto") == 0)
        return true;
    switch (parse_flag(text)) {
        case Flag::On:
            *out = Policy::On;
            return true;
        case Flag::Off:
            *out = Policy::Off;
            return true;
        default:
            return false;
    }
}

Flag parse_flag(const char* text)
{
    if (text == nullptr)
        return Flag::Unset;
    static const char* const kOn[] = {"1", "true", "yes", "on"};
    static const char* const kOff[] = {"", "0", "false", "no", "off"};
    for (const char* s : kOn)
        if (strcasecmp(text, s) == 0)
            return Flag::On;
    for (const char* s : kOff)
        if (strcasecmp(text, s) == 0)
            return Flag::Off;
    return Flag::Invalid;
}

bool parse_swap(const char* text, bool* engine)
{
    *engine = true;
    if (text == nullptr || *text == '\0' || strcasecmp(text, "auto") == 0)
        return true;
    if (strcasecmp(text, "managed") == 0) {
        *engine = false;
        return true;
    }
    return false;
}

bool parse_priority(const char* text, proto::Priority* out)
{
    *out = proto::Priority::Unset;
    if (text == nullptr || *text == '\0')
        return true;
    *out = proto::parse_priority(text, strlen(text));
    return *out != proto::Priority::Unset;
}

bool parse_millis(const char* text, uint32_t max, uint32_t* out)
{
    if (text == nullptr || *text == '\0')
        return false;
    uint64_t v = 0;
    for (const char* p = text; *p != '\0'; ++p) {
        if (*p < '0' || *p > '9')
            return false;
        v = v * 10 + static_cast<uint64_t>(*p - '0');
        if (v > max)
            return false;
    }
    *out = static_cast<uint32_t>(v);
    return true;
}

namespace {

Config g_config;
std::atomic<int> g_state{0};  // 0 unread, 1 reading, 2 ready

// Problems are reported once the config is published, so that no thread
// waits for it while they are written.
struct Problems {
    static constexpr int kMax = 13;  // one for each variable that can be invalid
    const char* names[kMax];
    const char* values[kMax];
    int count = 0;
    void add(const char* name, const char* value)
    {
        if (count < kMax) {
            names[count] = name;
            values[count] = value;
            ++count;
        }
    }
};

Policy read_policy(const char* name, Problems* problems)
{
    const char* v = getenv(name);
    Policy p = Policy::Auto;
    if (v != nullptr && !parse_policy(v, &p))
        problems->add(name, v);
    return p;
}

bool read_flag(const char* name, bool fallback, Problems* problems)
{
    const char* v = getenv(name);
    switch (parse_flag(v)) {
        case Flag::On:
            return true;
        case Flag::Off:
            return false;
        case Flag::Invalid:
            problems->add(name, v);
            return fallback;
        case Flag::Unset:
            break;
    }
    return fallback;
}

// The process as the admin's lists name it: its executable and its name.
struct Identity {
    char exe[4096];
    char comm[32];
    bool has_exe;
};

void read_identity(Identity* id)
{
    const ssize_t n = readlink("/proc/self/exe", id->exe, sizeof id->exe - 1);
    id->exe[n > 0 ? n : 0] = '\0';
    id->has_exe = n > 0;
    id->comm[0] = '\0';
    const int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        const ssize_t m = read(fd, id->comm, sizeof id->comm - 1);
        close(fd);
        id->comm[m > 0 ? m : 0] = '\0';
        if (char* nl = strchr(id->comm, '\n'))
            *nl = '\0';
    }
}

// Read once, at the first CUDA call of the process.
bool listed_by_admin(const Identity& id, const char* path, bool exclusion)
{
    char list[nvshare_exclusion_list_max];
    nvshare_load_exclusion_list(path, list, sizeof list);
    const char* exe = id.has_exe ? id.exe : nullptr;
    return exclusion ? nvshare_is_excluded(exe, id.comm, list)
                     : nvshare_is_listed(exe, id.comm, list);
}

void load(Problems* problems)
{
    Config c;
    c.disabled = read_flag("NVSHARE_DISABLE", false, problems);
    if (const Ownership own = process_ownership(); !own.owner) {
        c.disabled = true;
        c.second_copy = true;
        c.owner_protocol = own.owner_protocol;
    }
    c.debug = read_flag("NVSHARE_DEBUG", false, problems);
    c.single_oversub = read_flag("NVSHARE_ENABLE_SINGLE_OVERSUB", false, problems);
    c.prefetch = read_policy("NVSHARE_PREFETCH", problems);
    c.evict = read_policy("NVSHARE_EVICT", problems);
    if (const char* v = getenv("NVSHARE_SWAP"); !parse_swap(v, &c.swap_engine))
        problems->add("NVSHARE_SWAP", v);
    if (const char* v = getenv("NVSHARE_IDLE_RELEASE_MS")) {
        uint32_t ms = 0;
        if (parse_millis(v, 3600 * 1000, &ms))
            c.idle_release_ms = ms;
        else
            problems->add("NVSHARE_IDLE_RELEASE_MS", v);
    }
    if (const char* v = getenv("NVSHARE_WAIT_NOTICE_MS")) {
        uint32_t ms = 0;
        if (parse_millis(v, 3600 * 1000, &ms))
            c.wait_notice_ms = ms;
        else
            problems->add("NVSHARE_WAIT_NOTICE_MS", v);
    }
    if (const char* v = getenv("NVSHARE_PRIORITY"); !parse_priority(v, &c.priority))
        problems->add("NVSHARE_PRIORITY", v);
    const char* path = getenv("NVSHARE_SOCKET");
    if (path != nullptr && (path[0] != '/' || strlen(path) >= sizeof c.socket_path)) {
        problems->add("NVSHARE_SOCKET", path);
        path = nullptr;
    }
    if (path == nullptr)
        path = NVSHARE_DEFAULT_SOCKET;
    strncpy(c.socket_path, path, sizeof c.socket_path - 1);
    const Flag managed = parse_flag(getenv("NVSHARE_MANAGED"));
    if (managed == Flag::Invalid)
        problems->add("NVSHARE_MANAGED", getenv("NVSHARE_MANAGED"));
    if (!c.disabled) {
        // nvshared itself and what the admin excludes are left alone; the
        // variable beats the admin's plain-memory list: it is the user's
        // explicit choice for this one process.
        Identity id;
        read_identity(&id);
        if (listed_by_admin(id, nvshare_exclusion_list_path, true)) {
            c.disabled = true;
            c.excluded = true;
        } else if (managed == Flag::On || managed == Flag::Off) {
            c.managed = managed == Flag::On;
        } else {
            c.managed = !listed_by_admin(id, nvshare_plain_list_path, false);
        }
    }
    g_config = c;
}

}  // namespace

const Config& config()
{
    if (g_state.load(std::memory_order_acquire) == 2)
        return g_config;
    int expected = 0;
    if (g_state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
        Problems problems;
        load(&problems);
        set_debug_logging(g_config.debug);  // before a waiting thread goes on
        g_state.store(2, std::memory_order_release);
        if (g_config.second_copy) {
            log_debug(
                "another copy of libnvshare.so owns this process; this one passes every "
                "call to the driver");
            if (g_config.owner_protocol != proto::kVersion)
                log_warn(
                    "two versions of libnvshare.so are loaded (protocol %u owns the process, "
                    "this copy speaks %u); the first one loaded is used",
                    g_config.owner_protocol, proto::kVersion);
        }
        for (int i = 0; i < problems.count; ++i)
            log_warn("ignoring %s=%s: not a valid value", problems.names[i], problems.values[i]);
        return g_config;
    }
    // Another thread is reading the environment: a few microseconds.
    while (g_state.load(std::memory_order_acquire) != 2) {
    }
    return g_config;
}

}  // namespace nvshare::preload
