#include "preload/lock/wait_notice.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace nvshare::preload {

namespace {

// Appends to a NUL-terminated buffer; silently cut at its end.
struct Line {
    char* out;
    size_t size;
    size_t len = 0;

    void add(const char* format, ...) __attribute__((format(printf, 2, 3)))
    {
        if (len + 1 >= size)
            return;
        va_list args;
        va_start(args, format);
        const int n = vsnprintf(out + len, size - len, format, args);
        va_end(args);
        if (n > 0)
            len = len + static_cast<size_t>(n) < size ? len + static_cast<size_t>(n) : size - 1;
    }
};

// Seconds with one decimal: "9.1".
void add_seconds(Line& l, uint64_t ns)
{
    const uint64_t tenths = ns / 100000000ull;
    l.add("%llu.%llu s", static_cast<unsigned long long>(tenths / 10),
          static_cast<unsigned long long>(tenths % 10));
}

const char* ordinal_suffix(uint32_t n)
{
    if (n % 100 >= 11 && n % 100 <= 13)
        return "th";
    switch (n % 10) {
        case 1:
            return "st";
        case 2:
            return "nd";
        case 3:
            return "rd";
        default:
            return "th";
    }
}

const char* reason_text(uint32_t reason)
{
    switch (static_cast<proto::WaitReason>(reason)) {
        case proto::WaitReason::Oversubscribed:
            return "its memory is oversubscribed, processes take turns";
        case proto::WaitReason::ModeOn:
            return "mode on, processes take turns";
        case proto::WaitReason::Priority:
            return "a process of higher priority goes first";
        case proto::WaitReason::Turns:
            return "auto mode takes turns at the end of the holder's burst";
    }
    return "processes take turns";
}

}  // namespace

size_t format_waiting(char* out, size_t size, const proto::WaitingPayload* w,
                      const WaitContext& ctx)
{
    if (size == 0)
        return 0;
    out[0] = '\0';
    Line l{out, size};
    l.add("waiting for GPU %d (%s, %s) for ", ctx.ordinal, ctx.gpu_name, ctx.gpu_uuid);
    add_seconds(l, ctx.waited_ns);
    if (w == nullptr) {
        l.add(" (nvshared does not say why)");
        return l.len;
    }
    if (w->holder_pid != 0) {
        char comm[proto::kCommBytes + 1] = {};
        memcpy(comm, w->holder_comm, proto::kCommBytes);
        l.add(": held by pid %d (%s, ", static_cast<int>(w->holder_pid), comm);
        if (ctx.holder_user[0] != '\0')
            l.add("user %s) for ", ctx.holder_user);
        else
            l.add("uid %u) for ", w->holder_uid);
        add_seconds(l, w->held_us * 1000 + ctx.since_frame_ns);
        l.add(" of its ");
        add_seconds(l, w->quantum_us * 1000);
        l.add(" quantum");
    } else if (w->place > 1) {
        l.add(": processes ahead in line");
    } else {
        l.add(": free, but this process waits for its other GPUs");
    }
    // Beyond the named places the place is as nvshared last told it.
    l.add("; %u%s in line%s; why: %s", w->place, ordinal_suffix(w->place),
          w->place > proto::kNamedPlaces ? " as last told" : "", reason_text(w->reason));
    return l.len;
}

size_t format_got(char* out, size_t size, int ordinal, uint64_t waited_ns)
{
    if (size == 0)
        return 0;
    out[0] = '\0';
    Line l{out, size};
    l.add("got GPU %d after ", ordinal);
    add_seconds(l, waited_ns);
    return l.len;
}

const char* revoke_cause_text(uint32_t cause)
{
    switch (static_cast<proto::RevokeCauseCode>(cause)) {
        case proto::RevokeCauseCode::GraceExpired:
            return "not released within the grace period";
        case proto::RevokeCauseCode::Admin:
            return "revoked by an administrator (nvsharectl revoke)";
    }
    return "no cause given";
}

bool user_name_in(const char* passwd, size_t length, uint32_t uid, char* out, size_t size)
{
    // name:password:uid:...
    size_t line = 0;
    while (line < length) {
        size_t end = line;
        while (end < length && passwd[end] != '\n')
            ++end;
        const char* p = passwd + line;
        const size_t n = end - line;
        size_t c1 = 0;
        while (c1 < n && p[c1] != ':')
            ++c1;
        size_t c2 = c1 + 1;
        while (c2 < n && p[c2] != ':')
            ++c2;
        size_t c3 = c2 + 1;
        while (c3 < n && p[c3] != ':')
            ++c3;
        if (c3 < n && c3 > c2 + 1 && c1 > 0 && c1 < size) {
            uint64_t value = 0;
            bool digits = true;
            for (size_t i = c2 + 1; i < c3 && digits; ++i) {
                digits = p[i] >= '0' && p[i] <= '9';
                value = value * 10 + static_cast<uint64_t>(p[i] - '0');
                digits = digits && value <= UINT32_MAX;
            }
            if (digits && value == uid) {
                memcpy(out, p, c1);
                out[c1] = '\0';
                return true;
            }
        }
        line = end + 1;
    }
    return false;
}

}  // namespace nvshare::preload
