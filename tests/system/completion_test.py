#!/usr/bin/env python3
"""Shell completion of nvsharectl, loaded into a real shell:
  bash  shell-completion/bash/nvsharectl with the system's bash-completion:
        COMPREPLY for command lines set up as bash sets them up on Tab
  zsh   shell-completion/zsh/_nvsharectl: its syntax, and the matches Tab
        offers in an interactive zsh on a pseudo-terminal, after compinit
        (exit 77 without zsh)
Both check the commands, options and --query fields they offer against the
built nvsharectl (--help, and the list of valid fields --query prints), so a
change to nvsharectl that the completion misses fails here.

usage: completion_test.py CHECK SOURCE_ROOT NVSHARECTL
"""
import os
import pty
import re
import select
import shlex
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
CHECK, SOURCE, NVSHARECTL = sys.argv[1:4]
BASH_FILE = os.path.join(SOURCE, "shell-completion", "bash", "nvsharectl")
ZSH_FILE = os.path.join(SOURCE, "shell-completion", "zsh", "_nvsharectl")
BASH_COMPLETION = "/usr/share/bash-completion/bash_completion"

from checks import check, finish  # beside this script


# ---- what nvsharectl itself accepts --------------------------------------------------

def nvsharectl(*args):
    return subprocess.run([NVSHARECTL, *args], capture_output=True, text=True, timeout=30)


def help_section(text, title):
    """The lines of one section of a --help text ("Commands:", "Options:")."""
    lines = text.split("\n")
    start = lines.index(title) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def options_of(section):
    """The option names of --help lines such as "  -s, --socket PATH  lock socket"."""
    names = []
    for line in section:
        spelling = re.split(r"\s{2,}", line.strip())[0]
        names += re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", spelling)
    return names


TOP_HELP = nvsharectl("--help").stdout
COMMANDS = [line.split()[0] for line in help_section(TOP_HELP, "Commands:")]
GLOBAL_OPTIONS = options_of(help_section(TOP_HELP, "Options:"))
# Those that may follow a command, as its --help's footer says.
COMMAND_GLOBAL_OPTIONS = ["--json", "-s", "--socket"]
STATUS_OPTIONS = options_of(help_section(nvsharectl("status", "--help").stdout, "Options:"))
# The commands with --gpu (a GPU's own setting), and their options.
GPU_COMMANDS = ["set-tq", "anti-thrashing", "reset"]
GPU_COMMAND_OPTIONS = {
    command: options_of(help_section(nvsharectl(command, "--help").stdout, "Options:"))
    for command in GPU_COMMANDS}


def synopsis_choices(command):
    """The values a command's synopsis lists: "anti-thrashing [on|off|auto]"."""
    line = next(line for line in help_section(TOP_HELP, "Commands:")
                if line.split()[0] == command)
    return re.search(r"\[?([a-z]+(?:\|[a-z]+)+)\]?", line.split()[1]).group(1).split("|")


def query_fields():
    """The fields --query accepts, from the error an unknown one gives."""
    r = nvsharectl("status", "--query=?")
    match = re.search(r"\(valid: ([\w,]+)\)", r.stderr)
    check(r.returncode == 2 and match, f"nvsharectl status --query=? did not list the fields: {r}")
    return match.group(1).split(",") if match else []


FIELDS = query_fields()


# ---- bash ----------------------------------------------------------------------------

WORDBREAKS = "\"'><=;|&(:"


def comp_words(line):
    """COMP_WORDS as bash splits the line: word-break characters (here = and :)
    are words of their own, and a trailing blank starts an empty word."""
    words = re.findall(r"[=:]+|[^\s=:]+", line)
    if not words or line[-1].isspace():
        words.append("")
    return words


def bash_complete(line, setup=""):
    """COMPREPLY for the command line `line` with the cursor at its end, and
    whether the completion asked for no space after it."""
    words = comp_words(line)
    script = f"""
set -u
source {shlex.quote(BASH_COMPLETION)}
source {shlex.quote(BASH_FILE)}
# Outside a real Tab compopt has nothing to change: note what was asked.
nospace=0
compopt() {{ [[ "$*" == "-o nospace" ]] && nospace=1; return 0; }}
{setup}
COMP_WORDBREAKS={shlex.quote(WORDBREAKS + " " + chr(9) + chr(10))}
COMP_WORDS=({" ".join(shlex.quote(w) for w in words)})
COMP_CWORD={len(words) - 1}
COMP_LINE={shlex.quote(line)}
COMP_POINT={len(line)}
COMPREPLY=()
complete -p nvsharectl >/dev/null || {{ echo "no complete -F for nvsharectl"; exit 1; }}
_nvsharectl nvsharectl {shlex.quote(words[-1])} {shlex.quote(words[-2] if len(words) > 1 else "")}
echo "nospace=$nospace"
for reply in "${{COMPREPLY[@]}}"; do printf 'reply=%s\\n' "$reply"; done
"""
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], capture_output=True,
                       text=True, timeout=30, env={"PATH": os.environ["PATH"], "LC_ALL": "C"})
    if not check(r.returncode == 0 and not r.stderr, f"bash failed for {line!r}: {r}"):
        return [], False
    out = r.stdout.split("\n")
    replies = [line[len("reply="):] for line in out if line.startswith("reply=")]
    return sorted(replies), "nospace=1" in out


def expect(line, wanted, nospace=False, setup=""):
    got, got_nospace = bash_complete(line, setup)
    check(got == sorted(wanted), f"{line!r} completes to {got}, not {sorted(wanted)}")
    check(got_nospace == nospace, f"{line!r}: nospace is {got_nospace}, not {nospace}")


def check_bash():
    if not os.path.exists(BASH_COMPLETION):
        print(f"{BASH_COMPLETION} missing: install bash-completion")
        sys.exit(SKIP)
    not_help = [c for c in COMMANDS if c != "help"]
    status_options = COMMAND_GLOBAL_OPTIONS + STATUS_OPTIONS

    # The commands and options, as nvsharectl --help lists them.
    check(len(COMMANDS) >= 10 and "help" in COMMANDS, f"nvsharectl --help lists {COMMANDS}")
    expect("nvsharectl ", COMMANDS)
    expect("nvsharectl s", [c for c in COMMANDS if c.startswith("s")])
    expect("nvsharectl pre", ["preload"])
    expect("nvsharectl -", GLOBAL_OPTIONS)
    expect("nvsharectl --j", ["--json"])
    expect("nvsharectl --json ", COMMANDS)
    expect("nvsharectl -s /run/x.sock ", COMMANDS)
    expect("nvsharectl status -", status_options)
    expect("nvsharectl --json status --f", ["--full", "--format"])
    for command in GPU_COMMANDS:
        check("--gpu" in GPU_COMMAND_OPTIONS[command], f"nvsharectl {command} has no --gpu")
        expect(f"nvsharectl {command} -", COMMAND_GLOBAL_OPTIONS + GPU_COMMAND_OPTIONS[command])
    expect("nvsharectl set-capacity -", COMMAND_GLOBAL_OPTIONS + ["-h", "--help"])
    expect("nvsharectl help -", ["-h", "--help"])

    # The values of status's options; --query's is a comma-separated list.
    expect("nvsharectl status --format ", ["csv", "csv,noheader"])
    expect("nvsharectl status --format=", ["csv", "csv,noheader"])
    expect("nvsharectl status --format=csv,", ["csv,noheader"])
    check(len(FIELDS) > 10 and "pid" in FIELDS, f"nvsharectl's --query fields: {FIELDS}")
    expect("nvsharectl status --query ", FIELDS, nospace=True)
    expect("nvsharectl status --query=", FIELDS, nospace=True)
    expect("nvsharectl status --query=pid,", ["pid," + f for f in FIELDS if f != "pid"],
           nospace=True)
    expect("nvsharectl status --query=pid,u", ["pid,uid", "pid,user"], nospace=True)
    expect("nvsharectl status --query=id,pid,q", ["id,pid,quantum_left_s", "id,pid,queue_position"],
           nospace=True)
    expect("nvsharectl status --query=pid,nosuch", [], nospace=True)
    expect("nvsharectl status --query=pid,uid --format=csv ", [])

    # Each command's arguments.
    expect("nvsharectl anti-thrashing ", synopsis_choices("anti-thrashing"))
    check(synopsis_choices("anti-thrashing") == ["on", "off", "auto"],
          "anti-thrashing's synopsis changed: " + str(synopsis_choices("anti-thrashing")))
    expect("nvsharectl anti-thrashing o", ["on", "off"])
    expect("nvsharectl anti-thrashing on ", [])
    # --gpu's value (known only to nvshared) is no argument.
    expect("nvsharectl anti-thrashing --gpu ", [])
    expect("nvsharectl anti-thrashing --gpu 1 ", ["on", "off", "auto"])
    expect("nvsharectl anti-thrashing --gpu=GPU-1 o", ["on", "off"])
    expect("nvsharectl preload ", synopsis_choices("preload"))
    expect("nvsharectl --json preload st", ["status"])
    expect("nvsharectl preload enable ", [])
    expect("nvsharectl help ", not_help)
    expect("nvsharectl help set", ["set-tq", "set-capacity"])
    expect("nvsharectl help status ", [])
    expect("nvsharectl revoke ", ["pid:"], nospace=True)
    expect("nvsharectl revoke p", ["pid:"], nospace=True)
    expect("nvsharectl revoke pid:", [])
    expect("nvsharectl revoke 3", [])
    for command in ["set-tq", "set-capacity", "reset", "monitor", "socket-status", "status"]:
        expect(f"nvsharectl {command} ", [])
    expect("nvsharectl nosuch ", [])

    # --socket takes a file name, wherever it stands.
    with tempfile.TemporaryDirectory(prefix="nvshare-completion-") as tmp:
        socket_file = os.path.join(tmp, "nvshare.sock")
        open(socket_file, "w").close()
        for line in [f"nvsharectl -s {tmp}/nv", f"nvsharectl --socket {tmp}/nv",
                     f"nvsharectl status --socket={tmp}/nv"]:
            expect(line, [socket_file])
    finish()


# ---- zsh ----------------------------------------------------------------------------

# The .zshrc of an interactive zsh (with -d, the only startup file it reads
# but /etc/zsh/zshenv): compinit with the completion first in $fpath, a
# compadd that prints every match the completion offers, and an exit once the
# completion is done, so that the output ends.
ZSHRC = r"""
PS1='' PROMPT='' RPROMPT=''
fpath=(%(dir)s $fpath)
autoload -Uz compinit && compinit -u -d $ZDOTDIR/.zcompdump
print -r -- $'\x01'"COMPS $_comps[nvsharectl]"
bindkey '^I' complete-word
zstyle ':completion:*' insert-tab false
_nvshare_test_done() { print -r -- $'\x01'END; exit }
comppostfuncs=(_nvshare_test_done)
compadd() {
    # -O, -A and -D only ask for the matches (the callers filter with them).
    if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then
        builtin compadd "$@"
        return
    fi
    local -a __matches
    builtin compadd -A __matches "$@"
    local __match
    for __match in $__matches; do
        print -r -- $'\x01'"MATCH $__match"
    done
    builtin compadd "$@"
}
"""


def zsh_complete(zsh, line):
    """The matches zsh's completion offers for `line` with the cursor at its
    end (Tab in a real interactive zsh on a pseudo-terminal), sorted, once each."""
    with tempfile.TemporaryDirectory(prefix="nvshare-zsh-") as zdotdir:
        with open(os.path.join(zdotdir, ".zshrc"), "w") as f:
            f.write(ZSHRC % {"dir": shlex.quote(os.path.dirname(ZSH_FILE))})
        leader, follower = pty.openpty()
        shell = subprocess.Popen([zsh, "-d", "-i"], stdin=follower, stdout=follower, stderr=follower,
                                 env={"PATH": os.environ["PATH"], "ZDOTDIR": zdotdir,
                                      "HOME": zdotdir, "TERM": "dumb", "LC_ALL": "C"},
                                 start_new_session=True)
        os.close(follower)
        os.write(leader, (line + "\t").encode())
        out = b""
        # Until the shell exits after the completion; the timeout only keeps
        # a broken completion from hanging the test.
        while select.select([leader], [], [], 30)[0]:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the shell is gone
                break
            if not chunk:
                break
            out += chunk
        os.close(leader)
        try:
            shell.wait(timeout=10)
        except subprocess.TimeoutExpired:
            shell.kill()
            shell.wait()
    text = out.decode(errors="replace")
    check("\x01COMPS _nvsharectl\r\n" in text, f"compinit does not map nvsharectl to _nvsharectl: {text!r}")
    if not check("\x01END\r\n" in text, f"zsh did not finish completing {line!r}: {text!r}"):
        return []
    return sorted(set(re.findall(r"\x01MATCH (.*?)\r\n", text)))


def check_zsh():
    zsh = shutil.which("zsh")
    if not zsh:
        print("zsh not installed")
        sys.exit(SKIP)
    r = subprocess.run([zsh, "-n", ZSH_FILE], capture_output=True, text=True, timeout=30)
    check(r.returncode == 0 and not r.stderr, f"zsh -n {ZSH_FILE}: {r}")

    def expect(line, wanted):
        got = zsh_complete(zsh, line)
        check(got == sorted(set(wanted)), f"{line!r} completes to {got}, not {sorted(set(wanted))}")

    not_help = [c for c in COMMANDS if c != "help"]
    command_options = COMMAND_GLOBAL_OPTIONS + ["-h", "--help"]
    expect("nvsharectl ", COMMANDS)
    expect("nvsharectl -", GLOBAL_OPTIONS)
    expect("nvsharectl -s /run/x.sock ", COMMANDS)
    expect("nvsharectl status -", COMMAND_GLOBAL_OPTIONS + STATUS_OPTIONS)
    expect("nvsharectl --json status --f", ["--full", "--format"])
    for command in GPU_COMMANDS:
        expect(f"nvsharectl {command} -", COMMAND_GLOBAL_OPTIONS + GPU_COMMAND_OPTIONS[command])
    expect("nvsharectl set-capacity -", command_options)
    expect("nvsharectl help -", ["-h", "--help"])
    expect("nvsharectl status --format ", ["csv", "csv,noheader"])
    expect("nvsharectl status --format=", ["csv", "csv,noheader"])
    expect("nvsharectl status --query ", FIELDS)
    expect("nvsharectl status --query=", FIELDS)
    expect("nvsharectl status --query=pid,", [f for f in FIELDS if f != "pid"])
    expect("nvsharectl status --query=pid,u", ["uid", "user"])
    expect("nvsharectl anti-thrashing ", synopsis_choices("anti-thrashing"))
    expect("nvsharectl anti-thrashing --gpu 1 ", ["on", "off", "auto"])
    expect("nvsharectl preload ", synopsis_choices("preload"))
    expect("nvsharectl help ", not_help)
    expect("nvsharectl revoke ", ["pid:"])
    expect("nvsharectl revoke pid:", [])
    expect("nvsharectl set-tq ", [])
    with tempfile.TemporaryDirectory(prefix="nvshare-completion-") as tmp:
        open(os.path.join(tmp, "nvshare.sock"), "w").close()
        expect(f"nvsharectl -s {tmp}/nv", ["nvshare.sock"])
        expect(f"nvsharectl status --socket={tmp}/nv", ["nvshare.sock"])
    finish()


{"bash": check_bash, "zsh": check_zsh}[CHECK]()
