#!/usr/bin/env python3
"""Write dlock(3) from the public header's own comments.

    gen_man3.py DLOCK_H VERSION OUT

Every DLOCK_API function of include/dlock/dlock.h, with the comment that
stands before it, and the error codes of its XX() table, so the page says
what the header says.
"""
import re
import sys

from manroff import roff

header, version, out = sys.argv[1:4]
text = open(header).read()


def clean(comment):
    """The text of a /* */ or /** */ comment, without its frame."""
    body = re.sub(r"^/\*\*?|\*/$", "", comment.strip()).strip()
    lines = [re.sub(r"^\s*\* ?", "", l).rstrip() for l in body.splitlines()]
    return "\n".join(lines).strip("\n")


# A comment, then (blank lines allowed) a DLOCK_API declaration to its ';'.
decl = re.compile(r"(/\*(?:[^*]|\*(?!/))*\*/)\s*\n\s*(DLOCK_API[^;]*;)")
funcs = []
for m in decl.finditer(text):
    proto = re.sub(r"\s+", " ", m.group(2).replace("DLOCK_API ", "")).strip()
    name = re.search(r"(dlock_[a-z_0-9]+)\s*\(", proto).group(1)
    funcs.append((name, proto, clean(m.group(1))))
declared = set(re.findall(r"DLOCK_API[^;(]*?\b(dlock_[a-z_0-9]+)\s*\(", text))
missing = declared - {f[0] for f in funcs}
if missing:
    sys.exit("gen_man3.py: no comment before " + ", ".join(sorted(missing)))
errors = re.findall(r'XX\((\w+),\s*(-?\d+),\s*"([^"]*)"\)', text)

page = [
    f'.TH DLOCK 3 "" "dlock {version}" "Library Functions Manual"',
    ".SH NAME",
    "dlock \\- distributed locks behind one C API: file, Redis, ZooKeeper, "
    "PostgreSQL, MySQL",
    ".SH SYNOPSIS",
    ".nf",
    ".B #include <dlock/dlock.h>",
    ".PP",
    "Link with \\fI$(pkg\\-config \\-\\-libs dlock)\\fP.",
    ".fi",
    ".SH DESCRIPTION",
    "A client (\\fBdlock_client_open\\fR) talks to one lock service, "
    "chosen by a URI; a lock handle (\\fBdlock_lock_new\\fR) names one lock "
    "through it. \\fBdlock_acquire\\fR takes it (waiting at most a "
    "timeout), the client's watchdog renews its lease, \\fBon_lost\\fR says "
    "when it is lost, \\fBdlock_held\\fR says whether it is still held, "
    "\\fBdlock_fence\\fR gives its fencing token, and \\fBdlock_release\\fR "
    "gives it back, checking the owner. Every call returns \\fBDLOCK_OK\\fR "
    "(0) or one of the negative codes under ERRORS; the handle's or the "
    "client's message says which argument or what the server said.",
    ".SH FUNCTIONS",
]
for name, proto, doc in funcs:
    page += [f".SS {name}", ".nf", ".B " + roff(proto), ".fi", ".PP",
             ".nf", roff(doc), ".fi"]
page += [".SH ERRORS", ".TP", ".B DLOCK_OK \\fR(0)", "success"]
for name, value, meaning in errors:
    page += [".TP", f".B DLOCK_{name} \\fR({roff(value)})", roff(meaning)]
page += [".SH SEE ALSO",
         "\\fBdlock\\fR(1); examples in /usr/share/doc/dlock/examples; "
         "\\fIdlock/backend.h\\fR for writing a backend."]
with open(out, "w") as f:
    f.write("\n".join(page) + "\n")
