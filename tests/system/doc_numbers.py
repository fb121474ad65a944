"""The numbers the man pages state, held to the code that has them.

Each statement names a page, the phrase that states the number (the value
in group v, its unit in group u or the statement's `unit`; a space matches
any run of white space, since the pages wrap anywhere) and where the code
has it: a constant, or a product or quotient of constants, by name in one
source file (`NAME = EXPR;`, `NAME{EXPR};`, std::chrono durations too), or,
where the number is written inline, a regular expression whose group v is
that expression. Both sides are compared in seconds, bytes or plain numbers.

nvshare-protocol(7) also states each payload field's size and offset, each
payload's size and each fixed-size message's: those are held to
common/protocol.h's structures (field_errors, size_errors).

doc_test.py runs these (doc-numbers) and its self-test changes each number
on the page, and each constant in the code, and requires the check to fail.
"""
import math
import os
import re

PAGE_UNITS = {
    None: 1, "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1, "seconds": 1, "second": 1,
    "min": 60, "minutes": 60, "minute": 60, "h": 3600,
    "bytes": 1, "byte": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
    "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12,
}
WORDS = {"one": 1, "once": 1, "two": 2, "four": 4, "five": 5, "eight": 8, "nine": 9, "ten": 10,
         "twice": 2, "half": 2, "quarter": 4, "three quarters": 0.75}
CHRONO_SECONDS = {"hours": 3600, "minutes": 60, "seconds": 1, "milliseconds": 1e-3,
                  "microseconds": 1e-6, "nanoseconds": 1e-9}
CODE_UNITS = {None: 1, "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1, "min": 60, "bits": 1 / 8}


class Held:
    def __init__(self, page, phrase, source, expr, code_unit=None, unit=None):
        self.page, self.phrase, self.source = page, phrase, source
        self.expr, self.code_unit, self.unit = expr, code_unit, unit

    def pattern(self):
        return re.compile(self.phrase.replace(" ", r"\s+"))

    def is_regex(self):
        return self.expr.startswith("re:")


def H(page, phrase, source, expr, code_unit=None, unit=None):
    return Held(page, phrase, source, expr, code_unit, unit)


LIB, DAEMON, CONF, CTL = "man/libnvshare.8.scd", "man/nvshared.8.scd", "man/nvshare.conf.5.scd", \
    "man/nvsharectl.1.scd"
BUS, PROTO, OVERVIEW = "man/org.nvshare.Scheduler1.5.scd", "man/nvshare-protocol.7.scd", \
    "man/nvshare.7.scd"
METRICS, PLUGIN = "man/nvshare-metrics.8.scd", "man/nvshare-device-plugin.8.scd"
TUNING, SCHED = "preload/swap/tuning.h", "daemon/scheduler.h"
GPUS, TYPES = "daemon/gpu_table.h", "daemon/scheduler_types.h"
GATE, LISTENER = "daemon/accept_gate.h", "daemon/listener.cpp"
CONNECTION, STATUS = "daemon/connection.h", "daemon/status_service.h"
PROTOCOL, UNIT = "common/protocol.h", "systemd/nvshare.service.in"

STATEMENTS = [
    # libnvshare(8)
    H(LIB, r"\(\*NVSHARE_IDLE_RELEASE_MS\*, (?P<v>\d+) (?P<u>ms) by default\)",
      "preload/env.h", "kDefaultIdleReleaseMs", "ms"),
    H(LIB, r"Milliseconds; default (?P<v>\d+); \*0\* disables early release",
      "preload/env.h", "kDefaultIdleReleaseMs", "ms", "ms"),
    H(LIB, r"Milliseconds; default (?P<v>\d+); \*0\* never says so",
      "preload/env.h", "kDefaultWaitNoticeMs", "ms", "ms"),
    H(LIB, r"one per allocation for its life, from 2\^(?P<v>\d+) up",
      "preload/swap/swappable.h", "log2(kBufferIdBase)"),
    H(LIB, r"host chunks ahead for the last (?P<v>\d+) (?P<u>GiB) of what it left",
      TUNING, "kShrinkAhead"),
    H(LIB, r"keeps the time quantum at least (?P<v>\d+) times the latest swap-in",
      SCHED, "kQuantumPerSwap"),
    H(LIB, r"reconnect \(every (?P<v>[\d.]+) (?P<u>s), backing off", "preload/lock/client.h",
      "kBackoffFirstMs", "ms"),
    H(LIB, r"backing off to (?P<v>\d+) (?P<u>s)\)", "preload/lock/client.cpp", "kBackoffMaxMs",
      "ms"),
    H(LIB, r"the better of the last two of (?P<v>\d+) (?P<u>GiB) or more",
      "preload/swap/swap_plan.h", "kRateSampleBytes"),
    H(LIB, r"A swap-out that spent a (?P<v>quarter) or more of its time pinning",
      "preload/swap/residency.cpp", r"re:making_ns \* (?P<v>\d+) < m\.ns"),
    H(LIB, r"process's last (?P<v>\d+) pauses lasted", "preload/lock/idle_gaps.h", "kRemembered"),
    H(LIB, r"GPU work waits for it \(at most (?P<v>\d+) (?P<u>s)\)", TUNING, "kSwapInGateLimitNs",
      "ns"),
    H(LIB, r"or in the last (?P<v>\d+) (?P<u>minutes): \*nvshared\*\(8\)\)",
      "daemon/turn_policy.h", "kHigherClassIdleRelease"),
    H(LIB, r"the library keeps at most (?P<v>\d+) of its submissions", "preload/lock/run_ahead.h",
      "kQueued"),
    H(LIB, r"and waits, at most (?P<v>\d+) (?P<u>s), for the one \d+ calls back",
      "preload/lock/run_ahead.h", "kWaitLimitNs", "ns"),
    H(LIB, r"for the one (?P<v>\d+) calls back", "preload/lock/run_ahead.h", "kQueued"),
    H(LIB, r"Beyond the (?P<v>\d+)th place", "common/protocol.h", "kNamedPlaces"),
    H(LIB, r"Repeated at most every (?P<v>\d+) (?P<u>s) while the process still waits",
      "preload/lock/wait_announcer.cpp", "kWaitNoticeRepeatNs", "ns"),
    H(LIB, r"pauses since its latest long one, and at least its latest (?P<v>two)",
      "preload/lock/idle_gaps.h", "kRecentShort"),
    H(LIB, r"keeps the lock only for (?P<v>twice) its longest short pause",
      "preload/lock/idle_gaps.cpp", r"re:twice = (?P<v>\d+) \* longest_recent_short"),
    H(LIB, r"for at most (?P<v>three quarters) of the grace period", "preload/lock/holding.cpp",
      r"re:grace_us \* 1000 \* (?P<v>\d+ / \d+);"),
    H(LIB, r"Each block starts at a multiple\s+of (?P<v>\d+) (?P<u>bytes)",
      "preload/swap/small_blocks.h", "kAlign"),
    H(LIB, r"\(at least (?P<v>twice) the reserve\)", "preload/swap/host_budget.cpp",
      r"re:twice_reserve = (?P<v>\d+) \* reserve"),
    H(LIB, r"Up to (?P<v>eight) threads fault the memory in", "preload/swap/host_memory.cpp",
      "kMaxTouchThreads"),
    H(LIB, r"as it enters or leaves the first (?P<v>\d+)", PROTOCOL, "kNamedPlaces"),
    H(LIB, r"at most about (?P<v>twice) its own burst", "daemon/turn_policy.cpp",
      r"re:std::min\((?P<v>\d+) \* burst, quantum\)"),
    # nvshared(8)
    H(DAEMON, r"The directory is created \(mode (?P<v>0\d+)\) and the socket", LISTENER,
      r"re:mkdir\(dir\.c_str\(\), (?P<v>0\d+)\)"),
    H(DAEMON, r"and the socket is made (?P<v>0\d+)\.", LISTENER,
      r"re:chmod\(path\.c_str\(\), (?P<v>0\d+)\);"),
    H(DAEMON, r"A missing directory is created \(mode (?P<v>0\d+), one level",
      "daemon/state_store.cpp",
      r"re:mkdir\(directory_\.c_str\(\), (?P<v>0\d+)\)"),
    H(DAEMON, r"FIFO or device is refused without blocking\) of at most (?P<v>\d+) (?P<u>MiB)",
      "daemon/files.h", "kMaxFileSize"),
    H(DAEMON, r"every GPU without its own\. Default: (?P<v>\d+)(?P<u>s)\.", SCHED, "time_quantum"),
    H(DAEMON, r"revoked: 1ms to 24h\. Default: (?P<v>\d+)(?P<u>s)\.", SCHED, "grace"),
    H(DAEMON, r"for every GPU\. 1 byte to (?P<v>\d+) (?P<u>TiB)\.", TYPES, "kMaxReportedBytes"),
    H(DAEMON, r"Connections served at once \(1 to (?P<v>\d+),", "daemon/options.h",
      "kMaxClientsLimit"),
    H(DAEMON, r"Connections served at once \(1 to \d+, default (?P<v>\d+)\)", "daemon/options.h",
      "max_clients"),
    H(DAEMON, r"\*LimitNOFILE=(?P<v>\d+)\*", UNIT, r"re:^LimitNOFILE=(?P<v>\d+)$"),
    H(DAEMON, r"one user other than root may have at once \(1 to (?P<v>\d+),", "daemon/options.h",
      "kMaxClientsLimit"),
    H(DAEMON, r"one user other than root may have at once \(1 to \d+, default (?P<v>\d+)\)",
      "daemon/options.h", "max_clients_per_user"),
    H(DAEMON, r"\(1ms to 24h, default (?P<v>\d+)(?P<u>s); never below the time quantum\)", SCHED,
      "quantum_ceiling"),
    H(DAEMON, r"lasted this long: 0 to 24h, default (?P<v>\d+)(?P<u>s)\.", "daemon/options.h",
      "log_waits_after"),
    H(DAEMON, r"as long as \*--log-waits-after\* \((?P<v>\d+)(?P<u>s) by default",
      "daemon/options.h", "log_waits_after"),
    H(DAEMON, r"the built-in defaults: (?P<v>\d+)(?P<u>s), \d+s,", SCHED, "time_quantum"),
    H(DAEMON, r"the built-in defaults: \d+s, (?P<v>\d+)(?P<u>s),", SCHED, "grace"),
    H(DAEMON, r"physical memory, (?P<v>\d+)(?P<u>s);", "daemon/options.h", "log_waits_after"),
    H(DAEMON, r"start and on reload \(at most (?P<v>\d+) (?P<u>MiB);", "daemon/files.h",
      "kMaxFileSize"),
    H(DAEMON, r"not within (?P<v>\d+) (?P<u>s) of a \*Shrink\* round", "daemon/room.h",
      "kGrowthRound"),
    H(DAEMON, r"stretched to (?P<v>ten) times the process's own last swap-in", SCHED,
      "kQuantumPerSwap"),
    H(DAEMON, r"last swap-in \(up to (?P<v>\d+) (?P<u>s)\)", SCHED, "quantum_ceiling"),
    H(DAEMON, r"own quantum \(to (?P<v>ten) times its", SCHED, "kQuantumPerSwap"),
    H(DAEMON, r"never beyond (?P<v>four) times its time quantum", SCHED, "kMaxQuantumStretch"),
    H(DAEMON, r"at most (?P<v>once) a second \(the latest line wins\)", "daemon/status_line.h",
      "kStatusLineInterval", unit="s"),
    H(DAEMON, r"to a (?P<v>quarter) for a \*normal\* one behind a \*batch\* holder",
      "daemon/turn_policy.cpp", r"re:kInteractivePreempt : quantum / (?P<v>\d+)\);"),
    H(DAEMON, r"used it in the last (?P<v>\d+) (?P<u>minutes)", "daemon/turn_policy.h",
      "kHigherClassIdleRelease"),
    H(DAEMON, r"holder keeps at most (?P<v>\d+) submissions queued there",
      "preload/lock/run_ahead.h", "kQueued"),
    H(DAEMON, r"least (?P<v>\d+) (?P<u>ms) and less than \d+ s after the last", "daemon/room.h",
      "kAnsweredRound"),
    H(DAEMON, r"least \d+ ms and less than (?P<v>\d+) (?P<u>s) after the last", "daemon/room.h",
      "kGrowthRound"),
    H(DAEMON, r"asks for at least (?P<v>twice) the last round's room", "daemon/room.cpp",
      r"re:std::max\(short_by, (?P<v>\d+) \* r\.room_asked\)"),
    H(DAEMON, r"or at the latest after (?P<v>twice) its own burst", "daemon/turn_policy.cpp",
      r"re:std::min\((?P<v>\d+) \* burst, quantum\)"),
    H(DAEMON, r"where less than (?P<v>\d+) (?P<u>MiB) counts as nothing", "daemon/turn_policy.h",
      "kStartupGrowthFrom"),
    H(DAEMON, r"keeps its GPUs until its process has ended, at most (?P<v>\d+) (?P<u>s)",
      "daemon/process_exit.h", "kExitWaitMax"),
    H(DAEMON, r"_GPU-_ followed by (?P<v>\d+) characters", "common/uuid.h", "kUuidTextSize - 5"),
    H(DAEMON, r"most (?P<v>\d+) by each user other than root", GPUS, "kMaxUnlistedGpusPerUser"),
    H(DAEMON, r"daemon's table of (?P<v>\d+)\.", GPUS, "kMaxGpus"),
    H(DAEMON, r"a memory size below (?P<v>\d+) (?P<u>MiB) or above", GPUS, "kMinGpuMemory"),
    H(DAEMON, r"below \d+ MiB or above (?P<v>\d+) (?P<u>TiB) is refused", TYPES,
      "kMaxReportedBytes"),
    H(DAEMON, r"Memory reports above (?P<v>\d+) (?P<u>TiB) per field", TYPES, "kMaxReportedBytes"),
    H(DAEMON, r"cumulative swap times above 2\^(?P<v>\d+) microseconds", TYPES,
      "log2(kMaxReportedMicroseconds)"),
    H(DAEMON, r"does not confirm counts for others for (?P<v>\d+) (?P<u>seconds)",
      "daemon/claim_grace.h", "kClaimGrace"),
    H(DAEMON, r"first turn on that GPU and (?P<v>\d+) (?P<u>seconds) from that turn's grant",
      "daemon/claim_grace.h", "kClaimGrace"),
    H(DAEMON, r"for at most one turn and (?P<v>\d+) (?P<u>seconds)\s+per user",
      "daemon/claim_grace.h", "kClaimGrace"),
    H(DAEMON, r"bars new graces there for (?P<v>\d+) (?P<u>minutes)", "daemon/claim_grace.h",
      "kClaimDebt"),
    H(DAEMON, r"and GPU in every (?P<v>\d+) (?P<u>minutes)", "daemon/claim_grace.h",
      "kClaimDebt"),
    H(DAEMON, r"on that GPU, for (?P<v>\d+) (?P<u>minutes)", "daemon/claim_grace.h",
      "kClaimDebt"),
    H(DAEMON, r"has not said Hello within (?P<v>\d+) (?P<u>seconds)", CONNECTION,
      "kHelloDeadline"),
    H(DAEMON, r"opens at most (?P<v>\d+) connections a second", GATE, "kConnectionsPerSecond"),
    H(DAEMON, r"a second, in bursts of up to (?P<v>\d+)\.", GATE, "kConnectionBurst"),
    H(DAEMON, r"opens connections faster than (?P<v>\d+) a second", GATE, "kConnectionsPerSecond"),
    H(DAEMON, r"faster than \d+ a second \(bursts of (?P<v>\d+)\)", GATE, "kConnectionBurst"),
    H(DAEMON, r"the refusals are logged at most (?P<v>once) a second per user", GATE,
      "kConnectionLogInterval", unit="s"),
    H(DAEMON, r"most (?P<v>\d+) connections per round of its loop", GATE, "kAcceptsPerRound"),
    H(DAEMON, r"sets up at most (?P<v>\d+) of them", GATE, "kSetupsPerRound"),
    H(DAEMON, r"it accepts nothing for (?P<v>\d+) (?P<u>ms)", GATE, "kAcceptPause"),
    H(DAEMON, r"served at (?P<v>\d+) a second on average", STATUS, "kStatusPerSecond"),
    H(DAEMON, r"on average \(bursts of (?P<v>\d+)\)", STATUS, "kStatusBurst"),
    H(DAEMON, r"connections leave (?P<v>\d+) (?P<u>MiB) or more unread", STATUS,
      "kMaxUnreadPerPrincipal"),
    H(DAEMON, r"(?P<v>\d+) (?P<u>seconds) is disconnected, and its buffer freed", CONNECTION,
      "kUnreadLimit"),
    H(DAEMON, r"at most (?P<v>\d+) (?P<u>ms) stale in its running", STATUS, "kStatusMaxAge"),
    H(DAEMON, r"sent whole, up to (?P<v>\d+) (?P<u>MiB)", PROTOCOL, "kMaxStatusPayload"),
    H(DAEMON, r"A measured rate below (?P<v>\d+) (?P<u>MB/s)", PROTOCOL, "kMinRate"),
    H(DAEMON, r"or above (?P<v>\d+) (?P<u>TB/s) is refused", PROTOCOL, "kMaxRate"),
    H(PROTO, r"below \*kMinRate\* \((?P<v>\d+) (?P<u>MB/s)\)", PROTOCOL, "kMinRate"),
    H(PROTO, r"above \*kMaxRate\* \((?P<v>\d+) (?P<u>TB/s)\)", PROTOCOL, "kMaxRate"),
    H(DAEMON, r"\((?P<v>one) minute in \*nvshare\.service\*\)", UNIT,
      r"re:^WatchdogSec=(?P<v>\d+)min$", "min", "min"),
    H(DAEMON, r"cut at (?P<v>\d+) (?P<u>bytes);", "daemon/process_command.h", "kCommandLineMax"),
    H(DAEMON, r"127\.0\.0\.1:(?P<v>\d+) \(meson option \*metrics_port\*\)", "meson_options.txt",
      r"re:option\('metrics_port'.*value: (?P<v>\d+),"),
    H(DAEMON, r"the (?P<v>\d+) units with the most clients do", "metrics/unit_series.h",
      "kMaxUnitsPerGpu"),
    H(DAEMON, r"\*nvshare\.service\* sets it \(to (?P<v>\d+)(?P<u>min)\)", UNIT,
      r"re:^Environment=NVSHARE_IDLE_EXIT=(?P<v>\d+)min$", "min"),
    # nvshare.conf(5)
    H(CONF, r"for each GPU\. Default: (?P<v>\d+)(?P<u>s)\.", SCHED, "time_quantum"),
    H(CONF, r"is revoked\. 1ms to 24h\. Default: (?P<v>\d+)(?P<u>s)\.", SCHED, "grace"),
    H(CONF, r"in bytes, 1 byte to (?P<v>\d+) (?P<u>TiB)\.", TYPES, "kMaxReportedBytes"),
    H(CONF, r"as it begins\. Default: (?P<v>\d+)(?P<u>s)\.", "daemon/options.h",
      "log_waits_after"),
    # nvsharectl(1)
    H(CTL, r"Command lines longer than (?P<v>\d+) bytes", "cli/status_view.cpp", "kCommandWidth"),
    H(CTL, r"and units longer than (?P<v>\d+) are cut", "cli/status_view.cpp", "kUnitWidth"),
    H(CTL, r"in bytes, 1 byte to (?P<v>\d+) (?P<u>TiB)", TYPES, "kMaxReportedBytes"),
    H(CTL, r"name it gave, at most (?P<v>\d+) (?P<u>bytes)\)", PROTOCOL, "kCommBytes - 1"),
    H(CTL, r"joined by spaces, cut at (?P<v>\d+) (?P<u>bytes)", "daemon/process_command.h",
      "kCommandLineMax"),
    H(CTL, r"create _/etc/ld\.so\.preload\.d_ \(mode (?P<v>0\d+)\)", "cli/preload_files.cpp",
      r"re:if \(mkdir\(dir\.c_str\(\), (?P<v>0\d+)\) == 0\)"),
    H(CTL, r"replace _/etc/ld\.so\.preload_ atomically \(mode (?P<v>0\d+),",
      "cli/preload_files.cpp", r"re:fchmod\(fd, (?P<v>0\d+)\)"),
    H(CTL, r"each replaced atomically \(mode (?P<v>0\d+), owned by root",
      "cli/preload_files.cpp", r"re:fchmod\(fd, (?P<v>0\d+)\)"),
    H(CTL, r"their directories are created \(mode (?P<v>0\d+)\) when missing",
      "cli/preload_files.cpp", r"re:mkdir\(dir\.c_str\(\), (?P<v>0\d+)\) != 0"),
    # org.nvshare.Scheduler1(5)
    H(BUS, r"when the state changed or it is (?P<v>\d+) (?P<u>ms) old", STATUS, "kStatusMaxAge"),
    H(BUS, r"where it would exceed (?P<v>\d+) (?P<u>MiB)", PROTOCOL, "kMaxStatusPayload"),
    H(BUS, r"Manager TimeQuantumUSec t (?P<v>\d+)", SCHED, "time_quantum", unit="us"),
    H(BUS, r"a write must be 1 byte to (?P<v>\d+) (?P<u>TiB)", TYPES, "kMaxReportedBytes"),
    H(BUS, r"it gets (?P<v>\d+) (?P<u>seconds) then", "daemon/polkit.h",
      "kPolkitInteractiveTimeout"),
    H(BUS, r"it gets \d+ seconds then, (?P<v>\d+) otherwise", "daemon/polkit.h", "kPolkitTimeout",
      unit="s"),
    H(BUS, r"After (?P<v>\d+) requests refused by polkit", "daemon/caller_limits.h",
      "kRefusalBurst"),
    H(BUS, r"the refusals fall below (?P<v>one) a second on average", "daemon/caller_limits.h",
      "kRefusalsPerSecond"),
    H(BUS, r"At most (?P<v>\d+) checks of one uid", "daemon/caller_limits.h",
      "kPendingPerCaller"),
    H(BUS, r"checks of one uid, and (?P<v>\d+) of all callers", "daemon/caller_limits.h",
      "kPendingInAll"),
    H(BUS, r"refusals are logged at most (?P<v>once) a second", "daemon/caller_limits.h",
      "kRefusalLogInterval", unit="s"),
    H(BUS, r"status queries: (?P<v>\d+) a second on average", STATUS, "kStatusPerSecond"),
    H(BUS, r"a second on average, (?P<v>\d+) at once", STATUS, "kStatusBurst"),
    H(BUS, r"handles at most (?P<v>\d+) bus messages per round", "daemon/bus_service.cpp",
      "kMessagesPerRound"),
    # nvshare-protocol(7)
    H(PROTO, r"at most (?P<v>\d+) GPUs \(\*kMaxGpusPerClient\*\)", PROTOCOL, "kMaxGpusPerClient"),
    H(PROTO, r"GPU records that follow, at most (?P<v>\d+);", PROTOCOL, "kMaxGpusPerClient"),
    H(PROTO, r"take (?P<v>\d+) (?P<u>bytes) \(\*kUuidBytes\*\)", PROTOCOL, "kUuidBytes"),
    H(PROTO, r"process names (?P<v>\d+) \(\*kCommBytes\*\)", PROTOCOL, "kCommBytes"),
    H(PROTO, r"names (?P<v>\d+) \(\*kGpuNameBytes\*\)", PROTOCOL, "kGpuNameBytes"),
    H(PROTO, r"(?P<v>0x[0-9a-f]+), the bytes \"NVSH\"", PROTOCOL, "kMagic"),
    H(PROTO, r"(?P<v>\d+) \(\*kVersion\*\)", PROTOCOL, "kVersion"),
    H(PROTO, r"at most (?P<v>\d+) (?P<u>bytes) from a client", PROTOCOL, "kMaxClientPayload"),
    H(PROTO, r"at most (?P<v>\d+) (?P<u>MiB) from the daemon", PROTOCOL, "kMaxDaemonPayload"),
    H(PROTO, r"a status reader at most (?P<v>\d+) (?P<u>MiB)", PROTOCOL, "kMaxStatusPayload"),
    H(PROTO, r"none carries more than (?P<v>\d+) (?P<u>bytes)", PROTOCOL,
      r"re:static_assert\(sizeof\(StatsPayload\) == (?P<v>\d+)\)"),
    H(PROTO, r"\(\*kHelloPriorityMask\*, (?P<v>0x[0-9a-f]+)\)", PROTOCOL, "kHelloPriorityMask"),
    H(PROTO, r"at least (?P<v>\d+) times the GPU's latest swap-in", SCHED, "kQuantumPerSwap"),
    H(PROTO, r"\*kGrantExclusive\* \((?P<v>\d+)\)", PROTOCOL, "kGrantExclusive"),
    H(PROTO, r"\*kGrantContended\* \((?P<v>\d+)\)", PROTOCOL, "kGrantContended"),
    H(PROTO, r"\*kGrantOversubscribed\* \((?P<v>\d+)\)", PROTOCOL, "kGrantOversubscribed"),
    H(PROTO, r"\*kKeepEverything\* \((?P<v>0x[0-9A-F]+)\)", PROTOCOL, "kKeepEverything"),
    H(PROTO, r"\*kDropTurnsBegin\* \((?P<v>\d+)\)", PROTOCOL, "kDropTurnsBegin"),
    H(PROTO, r"\*kRunAheadBounded\* \((?P<v>\d+)\)", PROTOCOL, "kRunAheadBounded"),
    H(PROTO, r"\(libnvshare\.so: (?P<v>\d+)\)", "preload/lock/run_ahead.h", "kQueued"),
    H(PROTO, r"\*kGrantBounded\* \((?P<v>\d+)\)", PROTOCOL, "kGrantBounded"),
    H(PROTO, r"exceeds its share by at least (?P<v>\d+) (?P<u>MiB)", "daemon/room.h",
      "kShrinkStep"),
    H(PROTO, r"\*kUnpageableStep\* \((?P<v>\d+) (?P<u>MiB)\)", PROTOCOL, "kUnpageableStep"),
    H(PROTO, r"Beyond the (?P<v>\d+)th place", "common/protocol.h", "kNamedPlaces"),
    H(PROTO, r"its place enters or leaves the first (?P<v>\d+),", PROTOCOL, "kNamedPlaces"),
    H(PROTO, r"the places beyond the (?P<v>\d+)th, or", PROTOCOL, "kNamedPlaces"),
    H(PROTO, r"one event sends at most (?P<v>\d+) frames", PROTOCOL, "2 * kNamedPlaces"),
    H(PROTO, r"1 = next \(beyond (?P<v>\d+): as when", PROTOCOL, "kNamedPlaces"),
    H(PROTO, r"The payload length exceeds (?P<v>\d+) (?P<u>bytes)", PROTOCOL, "kMaxClientPayload"),
    H(PROTO, r"no \*Hello\* within (?P<v>\d+) (?P<u>seconds) of connecting",
      "daemon/connection.h", "kHelloDeadline"),
    H(PROTO, r"Then _gpu_count_ capacities of (?P<v>\d+) (?P<u>bytes) each", "common/codec.h",
      r"re:uint(?P<v>\d+)_t capacities\[", "bits"),
    # nvshare(7)
    H(OVERVIEW, r"_/run/nvshare/nvshare\.sock_ \(mode (?P<v>0\d+):", "systemd/nvshare.socket.in",
      r"re:^SocketMode=(?P<v>0\d+)$"),
    H(OVERVIEW, r"(?P<v>\d+) characters; a longer entry matches", "preload/exclusion.cpp",
      "kCommChars"),
    H(OVERVIEW, r"equal to its first (?P<v>\d+)", "preload/exclusion.cpp", "kCommChars"),
    H(OVERVIEW, r"at most (?P<v>\d+) (?P<u>KiB) of it", "preload/exclusion.h",
      "nvshare_exclusion_list_max"),
    H(OVERVIEW, r"\*NVSHARE_IDLE_EXIT=(?P<v>\d+)(?P<u>min)\*: after", UNIT,
      r"re:^Environment=NVSHARE_IDLE_EXIT=(?P<v>\d+)min$", "min"),
    H(OVERVIEW, r"after (?P<v>five) (?P<u>minutes) without any connected client", UNIT,
      r"re:^Environment=NVSHARE_IDLE_EXIT=(?P<v>\d+)min$", "min"),
    H(OVERVIEW, r"a temporary file in _/etc_, mode (?P<v>0\d+),", "cli/preload_files.cpp",
      r"re:fchmod\(fd, (?P<v>0\d+)\)"),
    # nvshare-metrics(8)
    H(METRICS, r"status\.json if it is at most (?P<v>\d+) (?P<u>second)",
      "metrics/status_cache.h", "kStatusFresh"),
    H(METRICS, r"\(up to (?P<v>\d+) (?P<u>seconds), then they ask", "metrics/status_cache.h",
      "kLockWait"),
    H(METRICS, r"other than root (?P<v>\d+) status queries a second", STATUS, "kStatusPerSecond"),
    H(METRICS, r"a second \(bursts of (?P<v>\d+)\)", STATUS, "kStatusBurst"),
    # nvshare-device-plugin(8)
    H(PLUGIN, r"Devices advertised per GPU, 1 to (?P<v>\d+)", "deviceplugin/options.h",
      "kMaxShares"),
    H(PLUGIN, r"Devices advertised per GPU, 1 to \d+ \(default (?P<v>\d+)\)",
      "deviceplugin/options.h", "shares"),
    H(PLUGIN, r"10ms to 1h \(default (?P<v>\d+)(?P<u>s)\)", "deviceplugin/options.h",
      "poll_interval"),
    H(PLUGIN, r"the library's path, mode (?P<v>0\d+)\)", "cli/preload_files.cpp",
      r"re:fchmod\(fd, (?P<v>0\d+)\)"),
]


def _chrono(kind):
    return lambda n: n * CHRONO_SECONDS[kind]


def _to_python(expr):
    expr = re.sub(r"static_cast<[^>]+>", "", expr)
    expr = re.sub(r"std::chrono::(\w+)\s*[({]", r"_chrono_\1(", expr)
    expr = re.sub(r"\b(?:uint\d+_t|int\d+_t|size_t|unsigned|long|int|double|uid_t)\s*\{", "(",
                  expr)
    expr = expr.replace("{", "(").replace("}", ")")
    expr = re.sub(r"(?<=\d)'(?=\d)", "", expr)
    expr = re.sub(r"\b(0x[0-9a-fA-F]+|\d+)(?:ull|ULL|ul|UL|u|U|ll|LL)\b", r"\1", expr)
    expr = re.sub(r"\b\w+::(?=k)", "", expr)
    return expr


def _definition(text, name):
    """(the declared type's chrono unit or None, the expression) of NAME."""
    m = re.search(r"(?:std::chrono::(\w+)\s+)?\b" + re.escape(name) +
                  r"\s*(?:=\s*([^;]+?)|\{([^;{}]*)\})\s*;", text)
    if not m:
        return None
    return m.group(1), m.group(2) if m.group(2) is not None else m.group(3)


def code_value(text, expr, code_unit=None, _depth=0):
    """expr (names of constants of text, arithmetic, log2) in seconds, bytes or plain."""
    if _depth > 16:
        raise KeyError(f"{expr}: defined in terms of itself")
    env = {"log2": math.log2}
    for kind in CHRONO_SECONDS:
        env["_chrono_" + kind] = _chrono(kind)
    for name in set(re.findall(r"\b(k\w+|[a-z]\w*)\b", expr)) - {"log2"}:
        d = _definition(text, name)
        if d is None:
            raise KeyError(f"no constant {name}")
        chrono_type, body = d
        value = code_value(text, _to_python(body), None, _depth + 1)
        if chrono_type and "_chrono_" not in _to_python(body):
            value *= CHRONO_SECONDS[chrono_type]
        env[name] = value
    value = eval(expr, {"__builtins__": {}}, env)  # pylint: disable=eval-used
    return value * CODE_UNITS[code_unit]


def held_value(statement, text):
    if statement.is_regex():
        m = re.search(statement.expr[3:], text, re.M)
        if not m:
            raise KeyError(f"{statement.source} no longer matches /{statement.expr[3:]}/")
        v = m.group("v")
        # "0666" is a file mode, compared digit for digit; "3 / 4" an expression.
        number = int(v) if v.isdigit() else eval(v, {"__builtins__": {}}, {})  # noqa: S307
        return number * CODE_UNITS[statement.code_unit]
    return code_value(text, statement.expr, statement.code_unit)


def stated_value(statement, m):
    v = " ".join(m.group("v").split())
    unit = m.groupdict().get("u") or statement.unit
    number = WORDS[v] if v in WORDS else (int(v, 16) if v.startswith("0x") else float(v))
    if statement.expr.startswith("log2("):
        return number
    return number * PAGE_UNITS[unit]


def number_errors(read):
    """What the pages state otherwise than the code: read(path) gives a file's text."""
    errors = []
    for s in STATEMENTS:
        m = s.pattern().search(read(s.page))
        if not m:
            errors.append(f"{s.page} no longer states {s.expr} of {s.source} "
                          f"(looked for /{s.phrase}/)")
            continue
        try:
            want = held_value(s, read(s.source))
        except (KeyError, SyntaxError, NameError) as e:
            errors.append(f"{s.source}: {e}")
            continue
        got = stated_value(s, m)
        if abs(got - want) > 1e-12 * max(1.0, abs(want)):
            errors.append(f"{s.page} says {' '.join(m.group(0).split())!r}, but {s.source}'s "
                          f"{s.expr} is {want:g}")
    return errors + field_errors(read(PROTO), read(PROTOCOL)) + \
        size_errors(read(PROTO), read(PROTOCOL))


OTHER_WORD = {"quarter": "half", "half": "quarter", "twice": "ten", "ten": "twice",
              "three quarters": "quarter", "one": "two", "once": "twice",
              "two": "four", "four": "five", "five": "ten", "eight": "nine"}


def page_mutations(read):
    """[(statement, path, mutated page)]: each stated number changed."""
    out = []
    for s in STATEMENTS:
        text = read(s.page)
        m = s.pattern().search(text)
        if not m:
            continue
        v = " ".join(m.group("v").split())
        if v in OTHER_WORD:
            other = OTHER_WORD[v]
        elif v.startswith("0x"):
            other = hex(int(v, 16) ^ 1)
        else:
            other = str(float(v) + 1).removesuffix(".0")
        out.append((s, s.page, text[:m.start("v")] + other + text[m.end("v"):]))
    return out


def source_mutations(read):
    """[(statement, path, mutated source)]: each constant held doubled."""
    out = []
    for s in STATEMENTS:
        text = read(s.source)
        if s.is_regex():
            m = re.search(s.expr[3:], text, re.M)
            if not m:
                continue
            # The expression's last number, one more.
            v = re.sub(r"(\d+)(?!.*\d)", lambda c: str(int(c.group(1)) + 1), m.group("v"))
            changed = text[:m.start("v")] + v + text[m.end("v"):]
            out.append((s, s.source, changed))
            continue
        name = re.findall(r"\b(k\w+|[a-z]\w*)\b", s.expr.replace("log2(", "("))[0]
        changed = re.sub(r"(\b" + re.escape(name) + r"\s*=\s*)([^;]+?)(\s*;)",
                         lambda c: f"{c.group(1)}({c.group(2)}) * 2{c.group(3)}", text, count=1)
        if changed == text:
            changed = re.sub(r"(\b" + re.escape(name) + r"\s*\{)([^;{}]*)(\}\s*;)",
                             lambda c: f"{c.group(1)}({c.group(2)}) * 2{c.group(3)}", text,
                             count=1)
        out.append((s, s.source, changed))
    return out


def reader(root):
    cache = {}

    def read(path):
        if path not in cache:
            with open(os.path.join(root, path), encoding="utf-8") as f:
                cache[path] = f.read()
        return cache[path]
    return read


# ---- the payloads' fields: size and offset, as nvshare-protocol(7) states them ----------

PRIMITIVES = {"uint8_t": 1, "char": 1, "uint16_t": 2, "int32_t": 4, "uint32_t": 4, "uint64_t": 8}


def struct_layouts(header):
    """{struct: {field: (size, offset)}} of common/protocol.h, natural alignment."""
    return _layouts(header)[0]


def struct_sizes(header):
    """{struct: sizeof} of common/protocol.h, natural alignment."""
    return _layouts(header)[1]


def _layouts(header):
    layouts, sizes, aligns = {}, {}, {}
    for struct, body in re.findall(r"struct (\w+) \{(.*?)\};", header, re.S):
        offset, align, fields = 0, 1, {}
        for kind, field, count in re.findall(r"^\s*(\w+)\s+(\w+)(?:\[(\w+)\])?;", body, re.M):
            one = PRIMITIVES.get(kind) or sizes[kind]
            a = PRIMITIVES.get(kind) or aligns[kind]
            n = int(count) if count.isdigit() else int(code_value(header, count)) if count else 1
            offset = (offset + a - 1) // a * a
            fields[field] = (one * n, offset)
            offset += one * n
            align = max(align, a)
        layouts[struct] = fields
        sizes[struct], aligns[struct] = (offset + align - 1) // align * align, align
    return layouts, sizes


FIELD = re.compile(r"_(?P<field>\w+)_\s+\((?P<size>\d+)\s+bytes(?:,\s+offset\s+(?P<offset>\d+))?\)")
OPENS = re.compile(r"\(\*(\w+)\*,\s+\d+\s+bytes")
# A row of the frame header's table: offset, size, field.
HEADER_ROW = re.compile(r"^\|\s+(?P<offset>\d+)\n:\s+(?P<size>\d+)\n:\s+_(?P<field>\w+)_", re.M)


def field_statements(page):
    """[(struct, field, size, offset or None, match)]: the rows of the frame
    header's table, and the fields each payload's paragraph states, from its
    (*Struct*, N bytes) to the next one or item."""
    out = []
    for f in HEADER_ROW.finditer(page):
        out.append(("FrameHeader", f.group("field"), int(f.group("size")),
                    int(f.group("offset")), f))
    opens = list(OPENS.finditer(page))
    for i, o in enumerate(opens):
        end = opens[i + 1].start() if i + 1 < len(opens) else len(page)
        item = page.find("\n*", o.end())
        end = min(end, item if item >= 0 else len(page))
        for f in FIELD.finditer(page, o.end(), end):
            offset = int(f.group("offset")) if f.group("offset") else None
            out.append((o.group(1), f.group("field"), int(f.group("size")), offset, f))
    return out


def field_errors(page, header):
    layouts, errors = struct_layouts(header), []
    stated = field_statements(page)
    if len(stated) < 40:
        errors.append(f"nvshare-protocol.7 states only {len(stated)} fields with their size")
    for struct, field, size, offset, _ in stated:
        have = layouts.get(struct, {}).get(field)
        if have is None:
            errors.append(f"nvshare-protocol.7 states a field _{field}_ of {struct}, which "
                          "common/protocol.h does not have")
        elif size != have[0] or (offset is not None and offset != have[1]):
            errors.append(f"nvshare-protocol.7 says {struct}.{field} is {size} bytes at offset "
                          f"{offset}, common/protocol.h {have[0]} at {have[1]}")
    return errors


def field_page_mutations(page):
    """Each stated size, and each offset, one more."""
    out = []
    for *_, f in field_statements(page):
        for g in ("size", "offset"):
            if f.group(g):
                out.append(page[:f.start(g)] + str(int(f.group(g)) + 1) + page[f.end(g):])
    return out


def field_header_mutations(header):
    """Each struct's first uint32_t field made uint64_t (its size and what follows move)."""
    out = []
    for m in re.finditer(r"struct \w+ \{", header):
        f = re.compile(r"^(\s*)uint32_t(\s+\w+;)", re.M).search(header, m.end())
        if f and f.start() < header.find("};", m.end()):
            out.append(header[:f.start()] + f.group(1) + "uint64_t" + f.group(2) +
                       header[f.end():])
    return out


# ---- the payloads' and messages' sizes, as nvshare-protocol(7) states them -------------

STRUCT_SIZE = re.compile(r"\(\*(?P<struct>\w+)\*,\s+(?P<size>\d+)\s+bytes")
MESSAGE = re.compile(r"^\*(?P<name>\w+)\* \(type \d+, (?P<size>\d+) bytes\)$", re.M)


def size_statements(page):
    """[(struct or None, size, match)]: each (*Struct*, N bytes) a paragraph
    states, and each fixed-size message's item, whose size is its payload's:
    the first (*Struct*, N bytes) of its item, or none (0 bytes)."""
    out = [(m.group("struct"), int(m.group("size")), m) for m in STRUCT_SIZE.finditer(page)]
    for m in MESSAGE.finditer(page):
        end = re.compile(r"^\*\w+\* \(", re.M).search(page, m.end())
        payload = STRUCT_SIZE.search(page, m.end(), end.start() if end else len(page))
        out.append((payload.group("struct") if payload else None, int(m.group("size")), m))
    return out


def size_errors(page, header):
    sizes, errors = struct_sizes(header), []
    stated = size_statements(page)
    if len(stated) < 30:
        errors.append(f"nvshare-protocol.7 states only {len(stated)} payload sizes")
    for struct, size, m in stated:
        want = sizes.get(struct, 0) if struct else 0
        if struct and struct not in sizes:
            errors.append(f"nvshare-protocol.7 states the size of {struct}, which "
                          "common/protocol.h does not have")
        elif size != want:
            errors.append(f"nvshare-protocol.7 says {' '.join(m.group(0).split())!r}, but "
                          f"common/protocol.h's {struct or 'no payload'} is {want} bytes")
    return errors


def size_page_mutations(page):
    """Each stated payload or message size, one more."""
    return [page[:m.start("size")] + str(int(m.group("size")) + 1) + page[m.end("size"):]
            for *_, m in size_statements(page)]
