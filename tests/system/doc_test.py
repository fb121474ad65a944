#!/usr/bin/env python3
"""Documentation completeness: everything that exists is in its man page.

  nvshared    every option of `nvshared --help` in OPTIONS of nvshared(8); every
              NVSHARE_* variable of nvshare.service or daemon/*.cpp in its
              ENVIRONMENT
  nvsharectl  every option and command (with its verbs) of `nvsharectl --help`
              and every option of `nvsharectl COMMAND --help`, every exit
              code of cli/exit_codes.h (EXIT STATUS), every NVSHARE_*
              variable of cli/*.cpp (ENVIRONMENT), every property and wait
              reason of schema/status.schema.json (JSON OUTPUT), every
              --query field of cli/status_query.cpp (QUERY FIELDS) and every
              event of daemon/journal.cpp and cli/monitor.cpp in nvsharectl(1)
  libnvshare  every NVSHARE_* variable named in preload/*.cpp and *.h in
              ENVIRONMENT of libnvshare(8)
  dbus        every interface, method, property and signal of dbus/*.xml,
              every event name the Event signal carries (daemon/journal.cpp),
              and every polkit action of polkit/*.policy, in
              org.nvshare.Scheduler1(5)
  protocol    every message type, error code, mode, constant, payload
              structure (with its size) and field of common/protocol.h in
              nvshare-protocol(7)
  ranges      every duration range stated in man/*.scd, dbus/*.xml,
              `nvshared --help` and the range strings of the headers is the
              time quantum's (kMinTimeQuantum to kMaxTimeQuantum of
              common/time_quantum.h) or the wait logging threshold's (0 to
              kMaxTimeQuantum) or nvshare-device-plugin's poll interval's
              (kMinPollInterval to kMaxPollInterval of deviceplugin/options.h),
              and each setting of that range states it
  numbers     every other number a page states of nvshare's behaviour (a
              default, limit, size, duration, rate, share or file mode) is
              the code's: doc_numbers.py lists each with the constant or
              expression that holds it
  numbers-coverage  every number with a unit or a tuning meaning that a page
              states is held by one of the checks above, or exempt in
              doc_coverage.EXEMPT with its reason (doc_coverage.py)
  deviceplugin every option of `nvshare-device-plugin --help` in OPTIONS of
              nvshare-device-plugin(8) (skipped where the plugin is not built)
  selftest    each check above fails on a page with one item taken out, and
              the ranges and numbers checks on a page or a constant changed,
              the coverage check on a page given an unheld number

A term counts as documented when the page shows it in bold (*term*), fields
in underline (_field_). A page still holding the "; nvshare-stub" placeholder
is skipped (exit 77) until its owner writes it.

usage: doc_test.py CHECK   (paths come from the environment set by meson)
"""
import glob
import os
import re
import subprocess
import sys

import doc_coverage
import doc_numbers

SKIP = 77
SOURCE = os.environ["NVSHARE_SOURCE_ROOT"]
MAN = os.path.join(SOURCE, "man")


def page(name):
    with open(os.path.join(MAN, name + ".scd"), encoding="utf-8") as f:
        return f.read()


def is_stub(text):
    return "; nvshare-stub" in text


def sections(text):
    """{'OPTIONS': '...', ...} from scdoc's '# NAME' headings."""
    out, current = {}, None
    for line in text.split("\n"):
        m = re.match(r"# (.+)$", line)
        if m:
            current = m.group(1).strip()
            out[current] = ""
        elif current is not None:
            out[current] += line + "\n"
    return out


def bold(text):
    return set(re.findall(r"(?<!\\)\*([^*\n]+?)\*", text))


def underlined(text):
    return set(re.findall(r"(?<![A-Za-z0-9\\])_([^_\n][^\n]*?)_(?![A-Za-z0-9])", text))


def help_text(binary):
    r = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        sys.exit(f"{binary} --help failed: {r.stderr}")
    return r.stdout


def help_options(text):
    """Options from the indented option lines of --help output."""
    options = []
    for line in text.split("\n"):
        if re.match(r"\s+-", line):
            spec = re.split(r"\s{2,}", line.strip())[0]
            options += re.findall(r"(?:^|[\s,])(--?[A-Za-z][A-Za-z0-9-]*)", spec)
    return options


def env_names(paths):
    """Variables a program reads: NVSHARE_* in a string literal (getenv's
    argument) or in a unit's Environment= / ${...}; not the build-config.h
    macros."""
    names = set()
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            data = f.read()
        names |= set(re.findall(r'"(NVSHARE_[A-Z0-9_]+)"', data))
        names |= set(re.findall(r"^Environment=(NVSHARE_[A-Z0-9_]+)=", data, re.M))
        names |= set(re.findall(r"\$\{(NVSHARE_[A-Z0-9_]+)\}", data))
    return sorted(names)


def section_missing(text, section, terms, form=bold):
    body = sections(text).get(section)
    if body is None:
        return [f"section {section}"] if terms else []
    have = form(body)
    return [t for t in terms if t not in have]


# ---- the checks: each returns what `text` fails to document ---------------------------

def nvshared_missing(text):
    options = help_options(help_text(os.environ["NVSHARE_NVSHARED"]))
    assert options, "no options found in nvshared --help"
    unit = os.path.join(SOURCE, "systemd", "nvshare.service.in")
    variables = env_names([unit] + glob.glob(os.path.join(SOURCE, "daemon", "*.cpp")))
    with open(os.path.join(SOURCE, "daemon", "message_ids.h"), encoding="utf-8") as f:
        ids = re.findall(r'"([0-9a-f]{32})"', f.read())
    metrics = set()
    for path in glob.glob(os.path.join(SOURCE, "metrics", "*.cpp")):
        with open(path, encoding="utf-8") as f:
            metrics.update(re.findall(r'"(nvshare_[a-z_]+)', f.read()))
    metrics = sorted(metrics)
    assert ids and metrics, "no MESSAGE_IDs or metrics found in the sources"
    # Each name of a "*a*, *b*" line counts: bold() sees them one by one.
    return (section_missing(text, "OPTIONS", options) +
            section_missing(text, "ENVIRONMENT", variables) +
            section_missing(text, "LOGGING", ids) +
            section_missing(text, "METRICS", metrics))


def exit_codes():
    with open(os.path.join(SOURCE, "cli", "exit_codes.h")) as f:
        return re.findall(r"^\s*k\w+\s*=\s*(\d+)", f.read(), re.M)


def schema_terms():
    """Every property name of the status schema, and the wait reasons."""
    import json
    with open(os.path.join(SOURCE, "schema", "status.schema.json")) as f:
        schema = json.load(f)
    names, reasons = [], []

    def walk(node):
        if isinstance(node, dict):
            for name, sub in node.get("properties", {}).items():
                if name not in names:
                    names.append(name)
                walk(sub)
            walk(node.get("items"))
    walk(schema)
    reasons = schema["properties"]["clients"]["items"]["properties"]["wait_reason"]["enum"]
    return names + [r for r in reasons if r]


def query_fields():
    with open(os.path.join(SOURCE, "cli", "status_query.cpp")) as f:
        return re.findall(r'^\s*\{"(\w+)",\s*$|^\s*\{"(\w+)", \{', f.read(), re.M)


def event_names(sources):
    """The names returned by event_name() (daemon) and given to monitor's own events."""
    names = []
    for path in sources:
        with open(os.path.join(SOURCE, path)) as f:
            data = f.read()
        if path.endswith("journal.cpp"):
            body = data.split("const char* event_name(")[1].split("\n}\n")[0]
            names += re.findall(r'return "([a-z-]+)";', body)
        else:
            names += re.findall(r'e\.event = (?:started \? )?"([a-z-]+)"(?: : "([a-z-]+)")?', data)
    flat = []
    for n in names:
        for x in (n if isinstance(n, tuple) else (n,)):
            if x and x not in flat:
                flat.append(x)
    return flat


def subcommand_options(binary, commands):
    options = []
    for command in commands:
        r = subprocess.run([binary, command, "--help"], capture_output=True, text=True, timeout=60)
        if r.returncode == 0 and "Options:" in r.stdout:
            for o in help_options(r.stdout.split("Options:")[1]):
                for spelling in re.split(r",\s*", o):
                    if spelling.startswith("--") and spelling not in options:
                        options.append(spelling)
    return options


def nvsharectl_missing(text):
    help_ = help_text(os.environ["NVSHARE_NVSHARECTL"])
    options = help_options(help_.split("Options:")[1])
    commands = []
    for line in help_.split("Options:")[0].split("Commands:")[1].split("\n"):
        words = line.split()
        if not words:
            continue
        commands.append(words[0])
        # Verbs of a synopsis such as "enable|disable|status|merge".
        if len(words) > 1 and "|" in words[1]:
            commands += [v for v in re.split(r"[|\[\]{}]", words[1]) if re.fullmatch(r"[a-z-]+", v)]
    codes = exit_codes()
    assert options and commands and codes
    variables = env_names(glob.glob(os.path.join(SOURCE, "cli", "*.cpp")))
    everywhere = bold(text)
    fields = [a or b for a, b in query_fields()]
    events = event_names(["daemon/journal.cpp", "cli/monitor.cpp"])
    assert fields and len(events) >= 10
    sub_options = [o for o in subcommand_options(os.environ["NVSHARE_NVSHARECTL"], commands)
                   if o != "--help"]
    return (section_missing(text, "OPTIONS", options) +
            [c for c in commands if c not in everywhere] +
            [o for o in sub_options if o not in everywhere] +
            section_missing(text, "EXIT STATUS", codes) +
            section_missing(text, "ENVIRONMENT", variables) +
            section_missing(text, "JSON OUTPUT", schema_terms()) +
            section_missing(text, "QUERY FIELDS", fields) +
            [f"event {e}" for e in events if e not in everywhere])


def libnvshare_missing(text):
    sources = glob.glob(os.path.join(SOURCE, "preload", "*.cpp")) + \
        glob.glob(os.path.join(SOURCE, "preload", "*.h"))
    return section_missing(text, "ENVIRONMENT", env_names(sources))


def dbus_terms():
    terms = []
    for xml in sorted(glob.glob(os.path.join(SOURCE, "dbus", "*.xml"))):
        with open(xml) as f:
            data = f.read()
        terms += re.findall(r"<(?:interface|method|property|signal)\s+name=\"([^\"]+)\"", data)
    for policy in sorted(glob.glob(os.path.join(SOURCE, "polkit", "*.policy"))):
        with open(policy) as f:
            terms += re.findall(r"<action\s+id=\"([^\"]+)\"", f.read())
    return terms


def dbus_missing(text):
    have = bold(text)
    events = event_names(["daemon/journal.cpp"])
    return [t for t in dbus_terms() if t not in have] + \
        [f"event {e}" for e in events if e not in have]


def protocol_missing(text):
    with open(os.path.join(SOURCE, "common", "protocol.h")) as f:
        header = f.read()
    missing = []
    have_bold, have_fields = bold(text), underlined(text)
    flat = " ".join(text.split())

    def enum(name):
        body = re.search(r"enum class " + name + r"\s*:\s*\w+\s*\{(.*?)\};", header, re.S).group(1)
        return re.findall(r"(\w+)\s*=\s*(\d+)", body)

    for name, value in enum("MsgType"):
        if not re.search(r"\*" + name + r"\* \(type " + value + r"\b", flat):
            missing.append(f"message {name} (type {value})")
    for name, value in enum("ErrorCode"):
        if not re.search(r"\*" + name + r"\* \(" + value + r"\)", flat):
            missing.append(f"error code {name} ({value})")
    for kind in ("WaitReason", "RevokeCauseCode"):
        for name, value in enum(kind):
            if not re.search(r"\*" + name + r"\* \(" + value + r"\)", flat):
                missing.append(f"{kind} {name} ({value})")
    for name, value in enum("Mode"):
        if not re.search(value + r" = \*" + name + r"\*", flat):
            missing.append(f"mode {name} = {value}")
    for name in re.findall(r"inline constexpr \w+ (k[A-Z]\w*)", header):
        if name not in have_bold:
            missing.append(f"constant {name}")
    sizes = dict(re.findall(r"static_assert\(sizeof\((\w+)\) == (\d+)\)", header))
    for struct, body in re.findall(r"struct (\w+) \{(.*?)\};", header, re.S):
        if struct not in have_bold:
            missing.append(f"structure {struct}")
        size = sizes.get(struct)
        if size and not re.search(r"\*" + struct + r"\*, " + size + " bytes", flat):
            missing.append(f"size of {struct} ({size} bytes)")
        for field in re.findall(r"^\s*\w+\s+(\w+)(?:\[\w+\])?;", body, re.M):
            if field not in have_fields:
                missing.append(f"field {struct}.{field}")
    return missing


def device_plugin():
    """The built nvshare-device-plugin, or "" where the build has none."""
    return os.environ.get("NVSHARE_DEVICE_PLUGIN", "")


def deviceplugin_missing(text):
    options = help_options(help_text(device_plugin()))
    assert options, "no options found in nvshare-device-plugin --help"
    return section_missing(text, "OPTIONS", options)


# ---- duration ranges: the pages against common/time_quantum.h --------------------------

US = {"us": 1, "ms": 1000, "s": 10**6, "min": 60 * 10**6, "h": 3600 * 10**6}
CHRONO = {"microseconds": "us", "milliseconds": "ms", "seconds": "s", "minutes": "min",
          "hours": "h"}
DURATION = r"(\d+(?:\.\d+)?) ?(us|ms|s|min|h)\b"
# "1000 (1 ms) to 86400000000 (24 h)": microseconds, each with its reading.
USEC_RANGE = r"(\d+) \(" + DURATION + r"\) to (\d+) \(" + DURATION + r"\)"
# "1ms to 24h", "0 to 24h".
RANGE = r"(?<![\w.])(\d+(?:\.\d+)?)(?: ?(us|ms|s|min|h)\b)? to " + DURATION

# The items that set a value of each range, and so must state it: (file,
# the line that opens the item). Each is read up to its next blank line.
TIME_QUANTUM_ITEMS = [
    ("man/nvshared.8.scd", "*-q*, *--time-quantum*"),
    ("man/nvshared.8.scd", "*-g*, *--grace*"),
    ("man/nvshared.8.scd", "*--quantum-ceiling*"),
    ("man/nvshare.conf.5.scd", "*time-quantum =*"),
    ("man/nvshare.conf.5.scd", "*grace =*"),
    ("man/nvsharectl.1.scd", "*set-tq*"),
    ("man/org.nvshare.Scheduler1.5.scd", "*TimeQuantumUSec*"),
    ("dbus/org.nvshare.Scheduler1.xml", '<property name="TimeQuantumUSec"'),
    ("common/time_quantum.h", "inline constexpr const char* kTimeQuantumRange"),
]
POLL_INTERVAL_ITEMS = [
    ("man/nvshare-device-plugin.8.scd", "*--poll-interval*"),
    ("deviceplugin/options.h", "inline constexpr const char* kPollIntervalRange"),
]
WAIT_LOG_ITEMS = [
    ("man/nvshared.8.scd", "*--log-waits-after*"),
    ("man/nvshare.conf.5.scd", "*log-waits-after =*"),
    ("daemon/settings.h", "inline constexpr const char* kWaitLogRange"),
]


def read_source(path):
    with open(os.path.join(SOURCE, path), encoding="utf-8") as f:
        return f.read()


def range_sources():
    """{path: text} of everything that states a range; nvshared's --help too."""
    paths = sorted(os.path.relpath(p, SOURCE) for p in
                   glob.glob(os.path.join(MAN, "*.scd")) +
                   glob.glob(os.path.join(SOURCE, "dbus", "*.xml")))
    texts = {p: read_source(p) for p in paths + ["common/time_quantum.h", "daemon/settings.h",
                                                 "deviceplugin/options.h"]}
    texts["nvshared --help"] = help_text(os.environ["NVSHARE_NVSHARED"])
    return texts


def chrono_constant(text, name):
    """A `NAME = std::chrono::UNIT(N);` constant in microseconds."""
    m = re.search(name + r" = std::chrono::(\w+)\((\d+)\);", text)
    assert m and m.group(1) in CHRONO, f"{name} not found"
    return int(m.group(2)) * US[CHRONO[m.group(1)]]


def time_quantum_limits(header):
    """(kMinTimeQuantum, kMaxTimeQuantum) in microseconds, as the header defines them."""
    return chrono_constant(header, "kMinTimeQuantum"), chrono_constant(header, "kMaxTimeQuantum")


def poll_interval_limits(options_header):
    """(kMinPollInterval, kMaxPollInterval) of deviceplugin/options.h, in microseconds."""
    return (chrono_constant(options_header, "kMinPollInterval"),
            chrono_constant(options_header, "kMaxPollInterval"))


def usec(number, unit):
    return round(float(number) * US[unit or "s"])


def stated_ranges(text):
    """[(lowest, highest, as written)] in microseconds, for every range in text."""
    flat = " ".join(text.replace("*", "").split())
    found = []
    for m in re.finditer(USEC_RANGE, flat):
        lo, lo_n, lo_u, hi, hi_n, hi_u = m.groups()
        if int(lo) != usec(lo_n, lo_u) or int(hi) != usec(hi_n, hi_u):
            found.append((None, None, m.group(0)))  # the readings disagree
        else:
            found.append((int(lo), int(hi), m.group(0)))
    flat = re.sub(USEC_RANGE, " ", flat)
    for m in re.finditer(RANGE, flat):
        lo_n, lo_u, hi_n, hi_u = m.groups()
        found.append((usec(lo_n, lo_u), usec(hi_n, hi_u), m.group(0)))
    return found


def item_text(text, opening):
    """The item that opens with `opening`: its lines up to the next blank one;
    an XML property's comment, which stands just before it."""
    if opening.startswith("<property"):
        m = re.search(r"<!--((?:(?!-->).)*)-->\s*" + re.escape(opening), text, re.S)
        return m.group(1) if m else None
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith(opening):
            end = next((j for j in range(i, len(lines)) if not lines[j].strip()), len(lines))
            return "\n".join(lines[i:end])
    return None


def range_errors(texts, header):
    lo, hi = time_quantum_limits(header)
    poll = poll_interval_limits(texts["deviceplugin/options.h"])
    allowed = {(lo, hi): "the time quantum's", (0, hi): "the wait logging threshold's",
               poll: "the device plugin's poll interval's"}
    known = ", ".join(f"{name} ({a} to {b} us)" for (a, b), name in allowed.items())
    errors = []
    for path, text in texts.items():
        for a, b, written in stated_ranges(text):
            if (a, b) not in allowed:
                errors.append(f"{path} states the range '{written}', which is none of {known}")
    for items, want in ((TIME_QUANTUM_ITEMS, (lo, hi)), (WAIT_LOG_ITEMS, (0, hi)),
                        (POLL_INTERVAL_ITEMS, poll)):
        for path, opening in items:
            item = item_text(texts.get(path, ""), opening)
            if item is None:
                errors.append(f"{path} has no item {opening!r}")
            elif want not in [(a, b) for a, b, _ in stated_ranges(item)]:
                errors.append(f"{path}: {opening!r} does not state {allowed[want]} range "
                              f"({want[0]} to {want[1]} us)")
    return errors


# What nvshared(8)'s SCHEDULING section says of the policy's constants
# (daemon/turn_policy.h): the constant and the phrase that states it.
POLICY_STATEMENTS = [
    ("kShortBurst", r"if its bursts are short \((\d+) (ms|s) or less\)"),
    ("kInteractivePreempt", r"to (\d+) (ms|s) for an \*interactive\*"),
    ("kUsageHalfLife", r"halving every (\d+)\s+(ms|s)"),
    ("kShareRebalance", r"asked to let go after (\d+) (ms|s)"),
    ("kStartupSettle", r"its memory has not grown for (\d+) (ms|s)"),
    ("kStartupWindow", r"at most until (\d+) (ms|s) after its first"),
]


def policy_errors(page, header):
    errors = []
    for name, phrase in POLICY_STATEMENTS:
        m = re.search(phrase, page)
        if not m:
            errors.append(f"nvshared.8 no longer states {name} (looked for /{phrase}/)")
        elif usec(m.group(1), m.group(2)) != chrono_constant(header, name):
            errors.append(f"nvshared.8 says {m.group(0)!r}, but daemon/turn_policy.h's {name} "
                          "is another value")
    return errors


# What libnvshare(8) says of the swap engine's tuning numbers
# (preload/swap/tuning.h): the constant (or a product of two) and the phrase
# that states it, with the value in group v and its unit in group u. Spaces
# match any run of white space (the page wraps anywhere).
ENGINE_STATEMENTS = [
    ("kMaxChunk", r"physical chunks of at most (?P<v>\d+) (?P<u>MiB)"),
    ("kLargeChunk", r"or (?P<v>\d+) (?P<u>MiB) on a GPU of \d+ GiB or more"),
    ("kLargeChunk*kLargeChunkShare", r"MiB on a GPU of (?P<v>\d+) (?P<u>GiB) or more"),
    ("kSmallSlab", r"carved out of slabs of (?P<v>\d+) (?P<u>MiB)"),
    ("kAssumedSwapEngineRate", r"it assumes (?P<v>\d+) (?P<u>GB/s) each way for swappable memory"),
    ("kAssumedEvictRate", r"(?P<v>\d+) (?P<u>GB/s) out and \d+ GB/s in for managed memory"),
    ("kAssumedSwapInRate", r"\d+ GB/s out and (?P<v>\d+) (?P<u>GB/s) in for managed memory"),
    ("kAssumedPinRate", r"not yet made at (?P<v>\d+) (?P<u>GB/s)"),
    ("kKeepHeadroomShare", r"keeps a (?P<v>\d+)(?:st|nd|rd|th) of the GPU's capacity"),
    ("kKeepHeadroomMax", r"capacity \(at most (?P<v>\d+) (?P<u>GiB)\) less than nvshared allows"),
    ("kRoomPollFastNs", r"tries again, every (?P<v>\d+) (?P<u>ms) while the room grows"),
    ("kRoomPollNs", r"and every (?P<v>\d+) (?P<u>ms) while it does not"),
    ("kRoomWaitNs", r"until it has not grown for (?P<v>[\d.]+) (?P<u>s), for at most"),
    ("kRoomWaitMaxNs", r"for at most (?P<v>\d+) (?P<u>s)\. Only what still finds no room"),
    ("kAwaitRoomNs", r"has not grown for (?P<v>\d+) (?P<u>s) goes to host memory"),
    ("kDriverReserveShare", r"it leaves a (?P<v>\d+)(?:st|nd|rd|th) of the GPU's memory"),
    ("kDriverReserveMax", r"GPU's memory \(at most (?P<v>\d+) (?P<u>MiB)\) free for the driver"),
    ("kPromotePollNs", r"asks the driver every (?P<v>\d+) (?P<u>ms) whether the GPU has room"),
    ("kPromoteRoom", r"now \((?P<v>\d+) (?P<u>MiB) free beside the driver.s\)"),
    ("kStrandedPatienceNs", r"Where no room came for (?P<v>\d+) (?P<u>s)"),
    ("kHostPinShare", r"each of at most a (?P<v>quarter) of what is"),
    ("kHostReserveShare", r"a reserve of 1/(?P<v>\d+) of the host's memory"),
    ("kHostReserveLeast", r"\(at least (?P<v>\d+) (?P<u>GiB)\), read again"),
    ("kHostLowShare", r"while less than 1/(?P<v>\d+) of the host's"),
    ("kSettleBeforePrestageNs", r"once it has not changed for (?P<v>\d+) (?P<u>ms)"),
    ("kShrinkAhead", r"for (?P<v>\d+) (?P<u>GiB) beyond that"),
    ("kPrestageChunks", r"that of (?P<v>\d+) chunks at a step"),
    ("kQuantumLeadMakes", r"ends within (?P<v>twice) the\s+time making it takes"),
    ("kQuantumLeadNs", r"twice the\s+time making it takes and (?P<v>\d+) (?P<u>s)"),
    ("kPauseLookNs", r"until then it looks again every (?P<v>\d+) (?P<u>ms)"),
    ("kSwapInGateLimitNs", r"waits for data the library evicted, at most (?P<v>\d+) (?P<u>s)"),
    ("kShortHoldFloorNs", r"and at least (?P<v>\d+) (?P<u>ms), also when it has"),
    ("kPauseLookNs", r"it looks at least every (?P<v>\d+) (?P<u>ms)"),
]
ENGINE_UNITS = {None: 1, "ms": 10**6, "s": 10**9, "MiB": 1 << 20, "GiB": 1 << 30, "GB/s": 10**9}
ENGINE_WORDS = {"quarter": 4, "half": 2, "twice": 2}


def engine_constants(header):
    """{name: value} of tuning.h's constants (nanoseconds, bytes, bytes/s, shares)."""
    values = {}
    for name, expr in re.findall(r"inline constexpr (?:uint64_t|double) (\w+) = ([^;]+);", header):
        expr = re.sub(r"(\d)ull\b", r"\1", expr)
        values[name] = eval(expr, {}, dict(values))  # pylint: disable=eval-used
    return values


def engine_value(values, name):
    result = 1
    for part in name.split("*"):
        result *= values[part]
    return result


def engine_errors(page, header):
    values, errors = engine_constants(header), []
    for name, phrase in ENGINE_STATEMENTS:
        m = re.search(phrase.replace(" ", r"\s+"), page)
        if not m:
            errors.append(f"libnvshare.8 no longer states {name} (looked for /{phrase}/)")
            continue
        v = m.group("v")
        stated = ENGINE_WORDS[v] if v in ENGINE_WORDS else float(v)
        stated *= ENGINE_UNITS[m.groupdict().get("u")]
        if abs(stated - engine_value(values, name)) > 1e-6 * max(1, stated):
            errors.append(f"libnvshare.8 says {' '.join(m.group(0).split())!r}, but "
                          f"preload/swap/tuning.h's {name} is {engine_value(values, name):g}")
    return errors


def run_ranges():
    texts = range_sources()
    errors = range_errors(texts, texts["common/time_quantum.h"])
    errors += policy_errors(read_source("man/nvshared.8.scd"), read_source("daemon/turn_policy.h"))
    errors += engine_errors(read_source("man/libnvshare.8.scd"), read_source("preload/swap/tuning.h"))
    for e in errors:
        print(e)
    if not errors:
        print("every range stated is one of common/time_quantum.h's or deviceplugin/options.h's")
    return 1 if errors else 0


CHECKS = {
    "nvshared": ("nvshared.8", nvshared_missing),
    "nvsharectl": ("nvsharectl.1", nvsharectl_missing),
    "libnvshare": ("libnvshare.8", libnvshare_missing),
    "dbus": ("org.nvshare.Scheduler1.5", dbus_missing),
    "protocol": ("nvshare-protocol.7", protocol_missing),
    "deviceplugin": ("nvshare-device-plugin.8", deviceplugin_missing),
}


def run_numbers():
    errors = doc_numbers.number_errors(doc_numbers.reader(SOURCE))
    for e in errors:
        print(e)
    if not errors:
        print(f"each of the {len(doc_numbers.STATEMENTS)} numbers held is the code's")
    return 1 if errors else 0


def spans_of(m):
    return [m.span(i) for i in range(1, m.re.groups + 1) if m.group(i) is not None]


def flat_with_index(text):
    """text without '*' and with each run of white space one space, and each
    of its characters' index in text."""
    out, index = [], []
    for i, c in enumerate(text):
        if c == "*" or (c.isspace() and out and out[-1] == " "):
            continue
        out.append(" " if c.isspace() else c)
        index.append(i)
    return "".join(out), index


def held_spans(path, text):
    """The spans of the numbers of page path that the checks above hold."""
    spans = []
    for s in doc_numbers.STATEMENTS:
        m = s.pattern().search(text) if s.page == path else None
        spans += spans_of(m) if m else []
    if path == "man/libnvshare.8.scd":
        for _, phrase in ENGINE_STATEMENTS:
            m = re.search(phrase.replace(" ", r"\s+"), text)
            spans += spans_of(m) if m else []
    if path == "man/nvshared.8.scd":
        for _, phrase in POLICY_STATEMENTS:
            m = re.search(phrase, text)
            spans += spans_of(m) if m else []
    if path == doc_numbers.PROTO:
        spans += [s for *_, m in doc_numbers.field_statements(text) for s in spans_of(m)]
        spans += [m.span("size") for *_, m in doc_numbers.size_statements(text)]
    # Every range is one of the allowed ones, or doc-ranges fails.
    flat, index = flat_with_index(text)
    for pattern in (USEC_RANGE, RANGE):
        for m in re.finditer(pattern, flat):
            spans += [(index[a], index[b - 1] + 1) for a, b in spans_of(m)]
    return spans


def man_pages():
    return {os.path.relpath(p, SOURCE): read_source(os.path.relpath(p, SOURCE))
            for p in sorted(glob.glob(os.path.join(MAN, "*.scd")))}


def run_coverage():
    errors, counts = doc_coverage.coverage(man_pages(), held_spans)
    for page, c in counts.items():
        exempt = ", ".join(f"{n} {r}" for r, n in sorted(c["exempt"].items()))
        print(f"{page}: {c['stated']} numbers stated, {c['held']} held, "
              f"{sum(c['exempt'].values())} exempt ({exempt or 'none'})")
    for e in errors:
        print(e)
    if not errors:
        print("every number the pages state is held or exempt with its reason")
    return 1 if errors else 0


def coverage_selftest():
    """The coverage check must notice an unheld number on any page."""
    pages, failures = man_pages(), 0
    if doc_coverage.coverage(pages, held_spans)[0]:
        print("note: the pages already state an unheld number (see doc-numbers-coverage)")
        return 1
    changes = doc_coverage.insertion_mutations(pages)
    if len(changes) != len(pages):
        print(f"FAIL: only {len(changes)} of {len(pages)} pages could be given a number")
        failures += 1
    for path, text in changes:
        if not doc_coverage.coverage({**pages, path: text}, held_spans)[0]:
            print(f"FAIL: the coverage check does not notice an unheld number in {path}")
            failures += 1
    # An exemption that no longer matches is an error, so the table stays small.
    stale = doc_coverage.Exempt(doc_numbers.LIB, r"no page says this", "example")
    if not doc_coverage.coverage(pages, held_spans, doc_coverage.EXEMPT + [stale])[0]:
        print("FAIL: the coverage check does not notice a stale exemption")
        failures += 1
    return failures


def numbers_selftest():
    """The numbers check must notice a page, or a constant, changed."""
    read = doc_numbers.reader(SOURCE)
    if doc_numbers.number_errors(read):
        print("note: the pages already misstate a number (see doc-numbers)")
        return 1
    failures = 0
    page_changes = doc_numbers.page_mutations(read)
    code_changes = doc_numbers.source_mutations(read)
    for what, changes in (("page", page_changes), ("code", code_changes)):
        if len(changes) != len(doc_numbers.STATEMENTS):
            print(f"FAIL: only {len(changes)} of {len(doc_numbers.STATEMENTS)} numbers could be "
                  f"changed in the {what}")
            failures += 1
        for statement, path, text in changes:
            def changed(p, path=path, text=text):
                return text if p == path else read(p)
            if text == read(path) or not doc_numbers.number_errors(changed):
                print(f"FAIL: the numbers check does not notice {path} changed "
                      f"({statement.expr} of {statement.page})")
                failures += 1
    # The payloads' fields: a size or offset on the page, a field's type in the header.
    page, header = read(doc_numbers.PROTO), read(doc_numbers.PROTOCOL)
    for what, changes, check in (
            ("page", doc_numbers.field_page_mutations(page),
             lambda p: doc_numbers.field_errors(p, header)),
            ("header", doc_numbers.field_header_mutations(header),
             lambda h: doc_numbers.field_errors(page, h)),
            ("page", doc_numbers.size_page_mutations(page),
             lambda p: doc_numbers.size_errors(p, header))):
        if len(changes) < 10:
            print(f"FAIL: only {len(changes)} field sizes could be changed in the {what}")
            failures += 1
        for i, text in enumerate(changes):
            if not check(text):
                print(f"FAIL: the numbers check does not notice the {what}'s field change {i}")
                failures += 1
    return failures


def run_check(name):
    if name == "ranges":
        return run_ranges()
    if name == "numbers":
        return run_numbers()
    if name == "numbers-coverage":
        return run_coverage()
    page_name, find_missing = CHECKS[name]
    text = page(page_name)
    if is_stub(text):
        print(f"SKIP: man/{page_name}.scd is still a placeholder")
        return SKIP
    if name == "deviceplugin" and not device_plugin():
        print("SKIP: nvshare-device-plugin is not built (-Ddevice_plugin)")
        return SKIP
    if name == "dbus" and not dbus_terms():
        print("SKIP: no dbus/*.xml yet")
        return SKIP
    missing = find_missing(text)
    for m in missing:
        print(f"man/{page_name}.scd does not document: {m}")
    if not missing:
        print(f"man/{page_name}.scd documents everything it should")
    return 1 if missing else 0


def selftest():
    """The checks must notice a page with one documented item taken out.

    A mutation counts as noticed when the mutated page misses something the
    page itself does not: an incomplete page fails its own doc-CHECK test,
    and must not make this one blame the check."""
    failures = 0
    mutations = [
        ("nvshared", r"\*--idle-exit\*", "--idle-exit"),
        ("nvshared", r"\*NVSHARE_IDLE_EXIT\*", "NVSHARE_IDLE_EXIT"),
        ("nvshared", r"\*--state-dir\*", "--state-dir"),
        ("nvshared", r"\*70d9a67400864cf9a15b71eb736c7b82\*", "70d9a67400864cf9a15b71eb736c7b82"),
        ("nvshared", r"\*nvshare_grants_total\*", "nvshare_grants_total"),
        ("nvsharectl", r"\*merge\*", "merge"),
        ("nvsharectl", r"\*NVSHARE_PRELOAD_ENTRY\*", "NVSHARE_PRELOAD_ENTRY"),
        ("nvsharectl", r"\*quantum_left_us\*", "quantum_left_us"),
        ("nvsharectl", r"\*bytes_swapped_in\*", "bytes_swapped_in"),
        ("nvsharectl", r"\*quantum_left_s\*", "quantum_left_s"),
        ("nvsharectl", r"\*--format\*", "--format"),
        ("nvsharectl", r"\*gpu-added\*", "gpu-added"),
        ("nvsharectl", r"\*revoked\*", "revoked"),
        ("dbus", r"\*setting-changed\*", "setting-changed"),
        ("libnvshare", r"\*NVSHARE_SOCKET\*", "NVSHARE_SOCKET"),
        ("dbus", r"\*ListClients\*", "ListClients"),
        ("dbus", r"\*org\.nvshare\.Scheduler1\.Gpu\*", "org.nvshare.Scheduler1.Gpu"),
        ("protocol", r"\*Refused\* \(8\)", "Refused (8)"),
        ("protocol", r"_grace_us_", "grace_us"),
        ("protocol", r"\*DropPayload\*, 24 bytes", "DropPayload, 24 bytes"),
        ("protocol", r"\*Contended\* \(type 21", "Contended (type 21"),
    ]
    if device_plugin():
        mutations.append(("deviceplugin", r"\*--poll-interval\*", "--poll-interval"))
    for check, pattern, replacement in mutations:
        page_name, find_missing = CHECKS[check]
        text = page(page_name)
        mutated, n = re.subn(pattern, replacement, text)
        if n == 0:
            print(f"FAIL: man/{page_name}.scd does not show {replacement!r} in the form "
                  f"the {check} check requires, so the self-test cannot take it out")
            failures += 1
            continue
        already = set(find_missing(text))
        if already:
            print(f"note: man/{page_name}.scd already misses {sorted(already)} "
                  f"(see doc-{check})")
        if not set(find_missing(mutated)) - already:
            print(f"FAIL: the {check} check does not notice a missing {replacement!r}")
            failures += 1
    # nvsharectl's exit codes: a page listing all but the last must fail.
    codes = exit_codes()
    fake = "nvsharectl(1)\n\n# EXIT STATUS\n\n" + "".join(f"*{c}*\n\tx\n\n" for c in codes[:-1])
    if not section_missing(fake, "EXIT STATUS", codes):
        print("FAIL: the exit code check does not notice a missing code")
        failures += 1
    failures += ranges_selftest()
    failures += numbers_selftest()
    failures += coverage_selftest()
    print("selftest:", "failed" if failures else "every check notices a missing item")
    return 1 if failures else 0


def ranges_selftest():
    """The ranges check must notice a page, or a constant, changed."""
    texts = range_sources()
    header = texts["common/time_quantum.h"]
    failures = 0
    mutations = [
        ("man/nvshare.conf.5.scd", r"revoked\. 1ms to 24h", "revoked. 1ms to 12h"),
        ("man/nvshare.conf.5.scd", r"0 to 24h;", "0 to 1h;"),
        ("man/nvsharectl.1.scd", r"valid values are 1ms to 24h", "valid values are 2ms to 24h"),
        ("man/nvshared.8.scd", r"revoked: 1ms to 24h\.", "revoked."),
        ("man/org.nvshare.Scheduler1.5.scd", r"86400000000\s+\(24 h\)", "86400000000 (12 h)"),
        ("dbus/org.nvshare.Scheduler1.xml", r"1000 \(1 ms\)", "1 (1 us)"),
        ("common/time_quantum.h", r'"1ms to 24h"', '"1ms to 1440h"'),
        ("daemon/settings.h", r'"0 to 24h"', '"1ms to 24h"'),
        ("man/nvshare-device-plugin.8.scd", r"10ms to 1h", "10ms to 2h"),
        ("deviceplugin/options.h", r'"10ms to 1h"', '"1ms to 1h"'),
    ]
    if range_errors(texts, header):
        print("note: the pages already state a wrong range (see doc-ranges)")
        return 1
    for path, pattern, replacement in mutations:
        mutated, n = re.subn(pattern, replacement, texts[path])
        if n == 0:
            print(f"FAIL: {path} does not show {pattern!r}, so the self-test cannot change it")
            failures += 1
        elif not range_errors({**texts, path: mutated}, header):
            print(f"FAIL: the ranges check does not notice {path} saying {replacement!r}")
            failures += 1
    # A constant changed: the pages, as they are, must then be wrong.
    for name, value in (("kMinTimeQuantum", "milliseconds(2)"), ("kMaxTimeQuantum", "hours(12)")):
        changed = re.sub(name + r" = std::chrono::\w+\(\d+\)",
                         f"{name} = std::chrono::{value}", header)
        if not range_errors(texts, changed):
            print(f"FAIL: the ranges check does not notice {name} changed to {value}")
            failures += 1
    plugin = texts["deviceplugin/options.h"]
    changed = re.sub(r"kMaxPollInterval = std::chrono::\w+\(\d+\)",
                     "kMaxPollInterval = std::chrono::hours(2)", plugin)
    if changed == plugin or not range_errors({**texts, "deviceplugin/options.h": changed}, header):
        print("FAIL: the ranges check does not notice kMaxPollInterval changed to hours(2)")
        failures += 1
    # The scheduling policy's constants, stated in nvshared(8).
    page, policy = read_source("man/nvshared.8.scd"), read_source("daemon/turn_policy.h")
    if policy_errors(page, policy):
        print("note: nvshared.8 already misstates the policy (see doc-ranges)")
        return failures + 1
    for name, phrase in POLICY_STATEMENTS:
        m = re.search(phrase, page)
        wrong = page[:m.start(1)] + str(int(m.group(1)) + 1) + page[m.end(1):]
        if not policy_errors(wrong, policy):
            print(f"FAIL: the ranges check does not notice nvshared.8 misstating {name}")
            failures += 1
        changed = re.sub(name + r" = std::chrono::(\w+)\((\d+)\)",
                         lambda c: f"{name} = std::chrono::{c.group(1)}({int(c.group(2)) * 2})",
                         policy)
        if changed == policy or not policy_errors(page, changed):
            print(f"FAIL: the ranges check does not notice {name} changed")
            failures += 1
    # The swap engine's tuning numbers, stated in libnvshare(8).
    page, tuning = read_source("man/libnvshare.8.scd"), read_source("preload/swap/tuning.h")
    if engine_errors(page, tuning):
        print("note: libnvshare.8 already misstates the swap engine (see doc-ranges)")
        return failures + 1
    for name, phrase in ENGINE_STATEMENTS:
        m = re.search(phrase.replace(" ", r"\s+"), page)
        v = m.group("v")
        other = ({"quarter": "half", "twice": "three times"}.get(v)
                 or str(float(v) + 1).removesuffix(".0"))
        wrong = page[:m.start("v")] + other + page[m.end("v"):]
        if not engine_errors(wrong, tuning):
            print(f"FAIL: the ranges check does not notice libnvshare.8 misstating {name}")
            failures += 1
        first = name.split("*")[0]
        changed = re.sub(r"(inline constexpr (?:uint64_t|double) " + first + r" = )([^;]+);",
                         lambda c: f"{c.group(1)}({c.group(2)}) * 2;", tuning)
        if changed == tuning or not engine_errors(page, changed):
            print(f"FAIL: the ranges check does not notice {first} changed")
            failures += 1
    return failures


if __name__ == "__main__":
    sys.exit(selftest() if sys.argv[1] == "selftest" else run_check(sys.argv[1]))
