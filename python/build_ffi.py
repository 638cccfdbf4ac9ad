"""build_ffi.py: write the C source of the dlock package's cffi extension.

    build_ffi.py HEADER OUT.c CC [CC_ARGS...]

cffi's API mode, out of line: the declarations (cdef) come from dlock.h
itself, run through the C compiler's preprocessor so that the error list's
X-macro expands into the enum, and the integer macros (DLOCK_CAP_*,
DLOCK_LOG_*, ...) are declared as "#define NAME ..." so that the compiler
gives their values. Nothing is copied by hand, so the package cannot drift
from the header: a function or constant added to dlock.h appears in
dlock._dlock at the next build, and one removed fails the compile of the
generated C file, which includes the same header. Meson compiles OUT.c
into the extension module (python/dlock/meson.build).

Only Debian's python3-cffi is needed (cffi's own parser, pycparser);
nothing is compiled here.
"""
import re
import subprocess
import sys

import cffi

# Callbacks from C into Python (@ffi.def_extern in dlock/_client.py and
# dlock/_elect.py).
CALLBACKS = {
    'dlock_lost_fn': 'extern "Python" void _dlock_py_on_lost(dlock_lock *, '
                     'int, const char *, void *);',
    'dlock_log_fn': 'extern "Python" void _dlock_py_log(int, const char *, '
                    'void *);',
    'dlock_done_fn': 'extern "Python" void _dlock_py_done(dlock_lock *, int, '
                     'void *);',
    'dlock_elect_fn': 'extern "Python" void _dlock_py_on_change('
                      'dlock_election *, int, uint64_t, const char *, '
                      'void *);',
}
# Macros that are not integer constants a program uses.
SKIP = re.compile(r'^DLOCK_(API|DLOCK_H|XX_|ERROR_MAP|VERSION_STRING)$|_INIT$')


def declarations(header, cc):
    """The header's declarations, preprocessed, without system headers."""
    with open(header, encoding='utf-8') as f:
        text = f.read()
    # cffi knows size_t and the <stdint.h> types: the system headers'
    # compiler extensions would only trip its parser.
    body = re.sub(r'^#\s*include\s*<[^>]*>\s*$', '', text, flags=re.M)
    out = subprocess.run(cc + ['-E', '-P', '-x', 'c', '-'], input=body,
                         capture_output=True, text=True, check=True).stdout
    return text, out


def integer_macros(text):
    """#define NAME ... for each object-like integer macro of the header."""
    names = []
    for m in re.finditer(r'^#define\s+(DLOCK_\w+)[ \t]+([^\n]*)$', text,
                         flags=re.M):
        name, value = m.group(1), m.group(2).strip()
        if SKIP.search(name) or value.endswith('\\') or value.startswith(
                ('"', '{')):
            continue
        names.append('#define %s ...' % name)
    return names


def main(argv):
    if len(argv) < 4:
        sys.exit('usage: build_ffi.py HEADER OUT.c CC [CC_ARGS...]')
    header, out_c, cc = argv[1], argv[2], argv[3:]
    text, decls = declarations(header, cc)
    cdef = [decls] + integer_macros(text)
    cdef += [cb for typ, cb in CALLBACKS.items()
             if re.search(r'\b%s\b' % typ, decls)]
    ffi = cffi.FFI()
    ffi.cdef('\n'.join(cdef))
    ffi.set_source('dlock._dlock', '#include <dlock/dlock.h>')
    ffi.emit_c_code(out_c)


if __name__ == '__main__':
    main(sys.argv)
