#!/usr/bin/env python3
"""Write dlock(1) from the command's own help texts.

    gen_man.py DLOCK VERSION OUT

Runs `DLOCK --help` and `DLOCK COMMAND --help` for every command it lists,
so the manual says what this dlock does, and writes roff (man(7)) to OUT.
"""
import re
import subprocess
import sys

from manroff import roff

dlock, version, out = sys.argv[1:4]
# A sanitizer build's dlock runs here too: its leak report is not the page.
env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "ASAN_OPTIONS": "detect_leaks=0"}


def help_of(*args, check=True):
    r = subprocess.run([dlock, *args, "--help"], capture_output=True,
                       text=True, check=check, env=env)
    return r.stdout if r.returncode == 0 else ""


top = help_of()
commands = re.findall(r"^  ([a-z]+)\s{2,}(.*)$", top, re.M)
if not commands:
    sys.exit("gen_man.py: no commands in `dlock --help`")
intro = top.split("\ncommands:")[0].split("\n", 1)[1].strip()
# The one exit-code table, as `dlock --help` prints it.
exits = re.findall(r"^  (\d+)\s+(EX_[A-Z]+)?\s*(.*)$",
                   top.split("\nexit status")[-1], re.M)
if not exits:
    sys.exit("gen_man.py: no exit status table in `dlock --help`")

page = [
    f'.TH DLOCK 1 "" "dlock {version}" "User Commands"',
    ".SH NAME",
    "dlock \\- distributed locks from the command line: file, Redis, "
    "ZooKeeper, PostgreSQL, MySQL",
    ".SH SYNOPSIS",
    ".B dlock",
    ".I COMMAND",
    "[\\fIOPTIONS\\fR]",
]
for name, _ in commands:
    page.append(".br")
    page.append(f".B dlock {name}")
    page.append("[\\fIOPTIONS\\fR] ...")
page += [".SH DESCRIPTION", roff(intro), ".PP",
         "Each command below is described by its own help text, as "
         "\\fBdlock\\fR \\fICOMMAND\\fR \\fB\\-\\-help\\fR prints it.",
         ".SH COMMANDS"]
for name, summary in commands:
    text = help_of(name)
    page += [f".SS {name}", roff(summary) + ".", ".PP", ".nf",
             roff(text.rstrip()), ".fi"]
    # A command with parts of its own ("demos: inventory, pitfalls"): the
    # help of each part that has a text of its own (none from a part that
    # this build has not: dlock-pitfalls needs hiredis or the ZooKeeper
    # client).
    parts = re.search(r"^demos: ([a-z, ]+)", text, re.M)
    for part in parts.group(1).replace(",", " ").split() if parts else []:
        more = help_of(name, part, check=False)
        if more and more != text:
            page += [".PP", ".nf", roff(more.rstrip()), ".fi"]
page += [
    ".SH ENVIRONMENT",
    ".TP",
    ".B DLOCK_URI",
    "The URI of the lock service when \\fB\\-\\-uri\\fR is not given; "
    "without it, a \\fBfile://\\fR directory private to the user.",
    ".TP",
    ".B DLOCK_PASSWORD",
    "The server's password, put into the URI in memory only (see "
    "\\fB\\-\\-password\\-file\\fR); \\fBdlock exec\\fR removes it from "
    "the environment of its command.",
    ".TP",
    ".B DLOCK_LIBEXEC_DIR",
    "Where \\fBdlock demo pitfalls\\fR looks first for the program that "
    "runs it, \\fBdlock\\-pitfalls\\fR (then beside \\fBdlock\\fR, then "
    "in the libexec directory it was built for).",
    ".TP",
    ".B DLOCK_NAME, DLOCK_FENCE, DLOCK_OWNER",
    "Set by \\fBdlock exec\\fR for its command: the lock's name, its "
    "fencing token, and the holder's owner id.",
    ".SH EXIT STATUS",
    "After \\fBflock\\fR(1) and \\fBsysexits\\fR(3), the same for every "
    "command:",
]
for code, name, text in exits:
    page += [".TP", f".B {code}" + (f" ({name})" if name else ""), roff(text)]
page += [
    ".SH SEE ALSO",
    "\\fBflock\\fR(1), \\fBsysexits\\fR(3); the documentation in "
    "/usr/share/doc/dlock (README, docs/tradeoffs.md, docs/design.md).",
]
with open(out, "w") as f:
    f.write("\n".join(page) + "\n")
