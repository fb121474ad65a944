"""No number a man page states goes unheld.

A number with a unit or a tuning meaning (a duration, size, rate, share,
file mode, ordinal or count such as "twice" or "at most 16") that a page
states must be held to the code by a doc test: a statement of
doc_numbers.py, doc_test.py's engine or policy statements, a range checked
by doc-ranges, or a protocol size checked by doc-numbers or doc-protocol.
What is not held must be listed below in EXEMPT, with the reason it needs
no code behind it; a section named EXAMPLE or EXAMPLES holds examples of use
only. An exemption that no longer matches its page is an error too, so the
table stays as small as the pages need.

doc_test.py runs this (doc-numbers-coverage) with the spans the checks hold;
its self-test inserts an unheld number into each page and requires a failure.
"""
import re

NUMBER_WORDS = r"(?:one|two|three|four|five|six|seven|eight|nine|ten|twelve|twenty)"
UNIT = (r"(?:ns|us|ms|s|min|h|d|seconds?|minutes?|hours?|days?|bytes?|KiB|MiB|GiB|TiB|"
        r"GB/s|MiB/s|GiB/s|KB|MB|GB|TB|%|times|x|characters|threads|a\s+second|per\s+second|a\s+minute)")
# Each alternative has one named group: the number's own span.
CANDIDATE = re.compile(
    r"(?<![\w.\-/^])(?P<unit>\d+(?:\.\d+)?)\s?" + UNIT + r"(?![\w/])"
    r"|\b(?P<word>twice|half|quarter|three quarters|a third|"
    r"once(?=\s+a\s+second|\s+every)|" + NUMBER_WORDS + r"\s+(?:times\b|" + UNIT + r"(?![\w/])))"
    r"|\b(?:at\s+most|at\s+least|up\s+to|below|above|more\s+than|less\s+than|fewer\s+than|"
    r"faster\s+than|every|over|beyond|within|after|last|first|default:?|to|table\s+of|bursts\s+of)"
    r"\s+(?P<count>\d+(?:\.\d+)?)\b(?![./^:]?\d|/)"
    r"|(?<![\w.])(?P<mode>0[0-7]{3})\b"
    r"|(?<![\w.])1/(?P<share>\d+)\b"
    r"|\b(?P<ordinal>\d+)(?:st|nd|rd|th)\b"
    r"|\b(?P<hex>0x[0-9a-fA-F]+)\b"
    r"|\b2\^(?P<power>\d+)")

REASONS = {
    "example": "an example value of a syntax or of a situation, not a setting",
    "external": "a fact of another program (the kubelet, systemd), not nvshare's",
    "definition": "a numbering's definition (place 1 is next), not a quantity",
    "range floor": "the smallest value of a size range whose ceiling doc-numbers holds",
    "not a quantity": "a word that reads as a count but counts nothing of the behaviour",
}


class Exempt:
    def __init__(self, page, phrase, reason):
        assert reason in REASONS, reason
        self.page, self.phrase, self.reason = page, phrase, reason

    def pattern(self):
        return re.compile(self.phrase.replace(" ", r"\s+"))


LIB, DAEMON, CONF, CTL = "man/libnvshare.8.scd", "man/nvshared.8.scd", "man/nvshare.conf.5.scd", \
    "man/nvsharectl.1.scd"
BUS, PROTO, OVERVIEW = "man/org.nvshare.Scheduler1.5.scd", "man/nvshare-protocol.7.scd", \
    "man/nvshare.7.scd"
PLUGIN = "man/nvshare-device-plugin.8.scd"

# Each exempts every number inside the first match of its phrase.
EXEMPT = [
    Exempt(DAEMON, r"e\.g\. 30s, 500ms, 2min, 1\.5", "example"),
    Exempt(DAEMON, r"\(\*--grace=5s\*; \*-g5s\*", "example"),
    Exempt(DAEMON, r"ten processes do not get ten times another user's", "example"),
    Exempt(DAEMON, r"So of three processes of 40% of the GPU's memory", "example"),
    Exempt(DAEMON, r"so that a framework's 1 GiB blocks", "example"),
    Exempt(DAEMON, r"for that GPU, without one for every GPU\. 1 byte", "range floor"),
    Exempt(CONF, r"1ms to 24h, written \*30s\*, \*500ms\*, \*2min\*, \*1h\*", "example"),
    Exempt(CONF, r"written \*16G\*, \*512M\*, \*80GiB\* or in bytes, 1 byte", "example"),
    Exempt(CTL, r"_DURATION_ is written \*30s\*, \*500ms\*, \*2min\*, \*1h\*", "example"),
    Exempt(CTL, r"time quantum set to 45s", "example"),
    Exempt(CTL, r"written \*16G\*, \*512M\* or in bytes, 1 byte", "range floor"),
    Exempt(BUS, r"a write must be 1 byte", "range floor"),
    Exempt(PLUGIN, r"_DURATION_ as \*5s\*, \*500ms\*, \*1min\*", "example"),
    Exempt(PLUGIN, r"the kubelet's directory \(mode 0750\) and _kubelet\.sock_ \(0755\)",
           "external"),
    Exempt(LIB, r"\(\*1st\* = next\)", "definition"),
    Exempt(PROTO, r"in the GPU's queue, 1 = next", "definition"),
    Exempt(PROTO, r"A GPU named twice is an error", "not a quantity"),
    Exempt(PROTO, r"the same GPU named twice", "not a quantity"),
    Exempt(OVERVIEW, r"an entry listed twice is used once", "not a quantity"),
]
EXAMPLE_SECTIONS = ("EXAMPLE", "EXAMPLES")


def candidates(text):
    """[(start, end, as written)]: each number the text states, its own span."""
    out = []
    for m in CANDIDATE.finditer(text):
        group = next(k for k, v in m.groupdict().items() if v is not None)
        out.append((*m.span(group), " ".join(m.group(0).split())))
    return out


def example_spans(text):
    """The spans of the sections named EXAMPLE or EXAMPLES (outside code blocks)."""
    spans, start, fenced, pos = [], None, False, 0
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"# [A-Z][A-Z ]*$", line):
            if start is not None:
                spans.append((start, pos))
            start = pos if line[2:] in EXAMPLE_SECTIONS else None
        pos += len(line) + 1
    if start is not None:
        spans.append((start, len(text)))
    return spans


def exempt_spans(page, text, exemptions):
    """({reason: [spans]}, [errors]) of the exemptions of page."""
    spans, errors = {}, []
    for e in exemptions:
        if e.page != page:
            continue
        m = e.pattern().search(text)
        if m is None:
            errors.append(f"{page}: the exemption /{e.phrase}/ ({e.reason}) no longer matches; "
                          "take it out of doc_coverage.EXEMPT")
            continue
        spans.setdefault(e.reason, []).append(m.span())
    spans.setdefault("example", []).extend(example_spans(text))
    return spans, errors


def overlaps(span, spans):
    return any(span[0] < b and a < span[1] for a, b in spans)


def coverage(pages, held, exemptions=None):
    """(errors, {page: counts}): pages is {path: text}; held(path, text) gives
    the spans the doc tests hold. counts: stated, held, exempt by reason."""
    exemptions = EXEMPT if exemptions is None else exemptions
    errors, counts = [], {}
    for page, text in sorted(pages.items()):
        held_spans = held(page, text)
        exempt, stale = exempt_spans(page, text, exemptions)
        errors += stale
        c = {"stated": 0, "held": 0, "exempt": {}}
        for start, end, written in candidates(text):
            c["stated"] += 1
            if overlaps((start, end), held_spans):
                c["held"] += 1
                continue
            reason = next((r for r, s in exempt.items() if overlaps((start, end), s)), None)
            if reason:
                c["exempt"][reason] = c["exempt"].get(reason, 0) + 1
                continue
            line = text.count("\n", 0, start) + 1
            errors.append(f"{page}:{line}: states {written!r}, which no doc test holds to the "
                          "code: add a statement to doc_numbers.py, or an exemption with its "
                          "reason to doc_coverage.EXEMPT, or take the number out")
        counts[page] = c
    return errors, counts


def insertion_mutations(pages):
    """[(page, text)]: each page with an unheld number inserted after its first heading."""
    out = []
    for page, text in sorted(pages.items()):
        at = text.find("\n\n", text.find("\n# ") + 1)
        at = at if at >= 0 else len(text)
        out.append((page, text[:at] + "\nIt tries again every 37 ms." + text[at:]))
    return out
