#!/usr/bin/env python3
"""The architecture, checked (docs/design.md, "Layers").

    check_arch.py SOURCE_DIR BUILD_DIR

- No include cycle among the files of core/, nor of any backend.
- No call cycle between the files of core/, nor of any backend: from the
  object files of the static library, a file calls another when it uses a
  symbol the other defines (nm), and that graph must have no cycle.
- core/ never includes a backend's header or its client library; a backend
  includes no other backend; the public header names no backend.
- No .c file in core/ or backends/ has more than 900 lines.
- No backend switches on its mode: modes are objects (backend.h).
- Only dlock_* is exported: every global symbol of libdlock.a starts with
  dlock_ (dlock__ for what core's and a backend's files share), and the
  shared library exports dlock_* but no dlock__*, each under the version
  node DLOCK_0 (core/dlock.map).
- Backends as modules (when the build has them): libdlock.so needs no
  server's client library, and each dlock-<name>.so exports only its
  entry point, dlock_module_backend.
- The `dlock` command uses only the public API: no file of tools/ includes
  a client library's header but those of dlock-pitfalls (the program of
  the broken recipes, named pitfalls*), and the dlock executable needs no
  server's client library; of the tools' programs, only dlock-pitfalls
  needs hiredis or libzookeeper_mt.

Prints each violation and exits 1 if there is one.
"""
import os
import re
import subprocess
import sys

MAX_LINES = 900
CLIENT_HEADERS = ("hiredis", "zookeeper", "libpq-fe.h", "mysql.h", "errmsg.h",
                  "mysqld_error.h", "curl", "json-c")

src, build = sys.argv[1], sys.argv[2]
problems = []


def fail(msg):
    problems.append(msg)


def cycles(graph):
    """Every cycle found by a depth-first search, as lists of nodes."""
    found, state, stack = [], {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                found.append(stack[stack.index(m):] + [m])
            elif m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)
    return found


def groups():
    """core, and each backend directory: the units whose files must not
    form cycles."""
    out = {"core": os.path.join(src, "core")}
    bdir = os.path.join(src, "backends")
    for b in sorted(os.listdir(bdir)):
        if os.path.isdir(os.path.join(bdir, b)):
            out["backends/" + b] = os.path.join(bdir, b)
    return out


INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)

for name, d in groups().items():
    files = sorted(f for f in os.listdir(d) if f.endswith((".c", ".h", ".in")))
    graph = {}
    for f in files:
        text = open(os.path.join(d, f), encoding="utf-8").read()
        if f.endswith(".c") and text.count("\n") > MAX_LINES:
            fail(f"{name}/{f}: {text.count(chr(10))} lines (at most {MAX_LINES})")
        deps = set()
        for kind, inc in INCLUDE.findall(text):
            base = os.path.basename(inc)
            if kind == '"' and base in files:
                deps.add(base)
            if name == "core" and (inc.startswith("backends/") or
                                   any(h in inc for h in CLIENT_HEADERS)):
                fail(f"core/{f} includes {inc}: core never names a backend")
            if name.startswith("backends/") and "backends/" in inc:
                fail(f"{name}/{f} includes {inc}: backends never include "
                     "each other")
        graph[f] = deps
        if name.startswith("backends/") and f.endswith(".c"):
            for m in re.finditer(r"switch\s*\(([^)]*\bmode\b[^)]*)\)", text):
                fail(f"{name}/{f}: switch ({m.group(1)}): a backend does not "
                     "switch on its mode; give each mode its own methods")
    for c in cycles(graph):
        fail(f"{name}: include cycle " + " -> ".join(c))

tools = os.path.join(src, "tools")
for f in sorted(os.listdir(tools)):
    if f.endswith((".c", ".h")) and "pitfalls" not in f:
        text = open(os.path.join(tools, f), encoding="utf-8").read()
        for kind, inc in INCLUDE.findall(text):
            if inc == "pitfalls.h" or any(h in inc for h in CLIENT_HEADERS
                                          if h != "json-c"):
                fail(f"tools/{f} includes {inc}: only dlock-pitfalls' "
                     "files (pitfalls*) speak a server's protocol")

dlock_h = open(os.path.join(src, "include/dlock/dlock.h"),
               encoding="utf-8").read()
dlock_h_code = re.sub(r"/\*.*?\*/", "", dlock_h, flags=re.S)
for word in ("redis", "zookeeper", "postgres", "mysql", "hiredis", "libpq"):
    for line in dlock_h_code.splitlines():
        if re.search(r"\b" + word + r"\b", line.split("//")[0], re.I):
            fail(f"include/dlock/dlock.h names a backend in code: {line.strip()}")

# ---- symbols: call graph and exports -------------------------------------
# What the sanitizers' instrumentation adds (ASan's ODR indicators
# "__odr_asan.NAME", module constructors...) is the compiler's, not ours.
SANITIZER_PREFIXES = ("__odr_asan", "__asan", "___asan", "__tsan", "__ubsan",
                      "__sanitizer", "__sancov")


def ours(sym):
    return not sym.startswith(SANITIZER_PREFIXES)


archive = os.path.join(build, "libdlock.a")
if not os.path.exists(archive):
    fail(f"no static library in {build}")
else:
    # nm of the archive: a "member.o:" line, then that member's symbols.
    out = subprocess.run(["nm", archive], capture_output=True, text=True,
                         check=True).stdout
    defined, used, member = {}, {}, None
    for line in out.splitlines():
        if line.endswith(".o:"):
            member = line[:-3]  # core_lock.c / backends_redis_conn.c
            defined[member], used[member] = set(), set()
            continue
        parts = line.split()
        if member is None:
            continue
        if len(parts) == 3 and parts[1] in "TDBRCGS" and ours(parts[2]):
            defined[member].add(parts[2])
            if not parts[2].startswith("dlock_"):
                fail(f"{member}: exports {parts[2]} (only dlock_* may be "
                     "global; make it static or prefix it dlock__)")
        elif len(parts) == 2 and parts[0] == "U":
            used[member].add(parts[1])
    if not defined:
        fail(f"nm found no members in {archive}")
    owner = {}
    for f, syms in defined.items():
        for s_ in syms:
            owner[s_] = f
    for name in groups():
        prefix = name.replace("/", "_") + "_"
        nodes = [f for f in defined if f.startswith(prefix)]
        graph = {f: {owner[s_] for s_ in used[f]
                     if s_ in owner and owner[s_] in nodes and owner[s_] != f}
                 for f in nodes}
        for c in cycles(graph):
            fail(f"{name}: call cycle " + " -> ".join(c))

    so = None
    for f in os.listdir(build):
        if f.startswith("libdlock.so.") and f.count(".") == 4:
            so = os.path.join(build, f)
    if so is None:
        fail(f"no shared library in {build}")
    else:
        out = subprocess.run(["nm", "-D", "--defined-only", so],
                             capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) < 3:
                continue
            sym = parts[2].split("@")[0]
            if parts[1] in "TDBRV" and ours(sym) and (
                    not sym.startswith("dlock_") or sym.startswith("dlock__")):
                fail(f"{os.path.basename(so)} exports {sym}")
            elif parts[1] in "TDBRV" and ours(sym) and \
                    not parts[2].endswith("@@DLOCK_0"):
                fail(f"{os.path.basename(so)}: {parts[2]} is not under the "
                     "version node DLOCK_0 (core/dlock.map)")
        modules = sorted(f for f in os.listdir(build)
                         if re.fullmatch(r"dlock-[a-z0-9]+\.so", f))
        needed = subprocess.run(["readelf", "-d", so], capture_output=True,
                                text=True, check=True).stdout
        for lib in re.findall(r"Shared library: \[([^]]+)\]", needed):
            if modules and any(c in lib for c in ("hiredis", "zookeeper",
                                                  "libpq", "mariadb",
                                                  "mysqlclient")):
                fail(f"{os.path.basename(so)} needs {lib}: a server "
                     "backend's client library belongs in its module")
        for m in modules:
            out = subprocess.run(["nm", "-D", "--defined-only",
                                  os.path.join(build, m)],
                                 capture_output=True, text=True,
                                 check=True).stdout
            for line in out.splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[1] in "TDBRV" and \
                        ours(parts[2]) and parts[2] != "dlock_module_backend":
                    fail(f"{m} exports {parts[2]} (only "
                         "dlock_module_backend)")

# ---- the tools' programs: what each one needs ------------------------------
CLIENT_LIBS = ("hiredis", "zookeeper", "libpq", "mariadb", "mysqlclient",
               "libcurl")
tools_build = os.path.join(build, "tools")
if not os.path.exists(os.path.join(tools_build, "dlock")):
    fail(f"no dlock executable in {tools_build}")
for f in sorted(os.listdir(tools_build) if os.path.isdir(tools_build)
                else []):
    path = os.path.join(tools_build, f)
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        continue
    with open(path, "rb") as fh:
        if fh.read(4) != b"\x7fELF":
            continue
    needed = subprocess.run(["readelf", "-d", path], capture_output=True,
                            text=True, check=True).stdout
    for lib in re.findall(r"Shared library: \[([^]]+)\]", needed):
        if f == "dlock" and any(c in lib for c in CLIENT_LIBS):
            fail(f"tools/dlock needs {lib}: the command uses only the "
                 "public API; client libraries belong in the backend "
                 "modules (and the broken recipes in dlock-pitfalls)")
        elif f != "dlock-pitfalls" and any(c in lib for c in
                                           ("hiredis", "zookeeper")):
            fail(f"tools/{f} needs {lib}: of the tools, only "
                 "dlock-pitfalls speaks Redis or ZooKeeper directly")

for p in problems:
    print("arch:", p)
print(f"arch: {len(problems)} problem(s)")
sys.exit(1 if problems else 0)
