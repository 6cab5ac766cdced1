#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Error returns below the fronts follow the rule (docs/architecture.md,
"Error returns"): 0 or a negative errno, a count or a negative errno.

  check_errors.py check SRCDIR
  check_errors.py selftest SRCDIR

In core/, wire/, net/, obj/ and engine/ a function does not return -1,
errno or a positive errno constant (`return EINVAL;`), and does not set
errno to say what went wrong (`errno = E...`), unless the docs' list of
exceptions names it (EXCEPT below, the same list).  Each violation is
one line "FILE:LINE: FUNCTION: TEXT (RULE)"; exit 1 if any.  The
selftest plants each kind in a copy of a clean function and expects it
reported, and the exceptions not to be.
"""
import os
import re
import sys

LAYERS = ("core", "wire", "net", "obj", "engine")
# (file, function): docs/architecture.md says why
EXCEPT = {
    ("engine/progress.c", "uroce_progress_wait"),
    ("engine/progress.c", "wait_spin"),
    ("engine/progress.c", "wait_sleep"),
    ("engine/progress.c", "uroce_progress_poll_fds"),
    ("engine/recv.c", "parse"),
}
BAD = [
    (re.compile(r"\breturn\s+-1\s*;"), "-1: return a negative errno"),
    (re.compile(r"\breturn\s+errno\s*;"), "errno: return its negative"),
    (re.compile(r"\breturn\s+E[A-Z0-9]+\s*;"),
     "a positive errno: return its negative"),
    (re.compile(r"\berrno\s*=\s*E[A-Z0-9]+\s*;"),
     "errno set: return the negative errno instead"),
]
# a function's first line: at column 0, a name and "(", no ";"
FUNC = re.compile(r"^[A-Za-z_][^;=]*?\b([A-Za-z_]\w*)\s*\([^;]*$")


def check_file(path, rel):
    out = []
    func = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for no, line in enumerate(f, 1):
            m = FUNC.match(line)
            if m and not line.startswith(("#", "typedef", "struct ", "union ",
                                          "enum ")):
                func = m.group(1)
            code = line.split("//")[0]
            for pat, why in BAD:
                if pat.search(code) and (rel, func) not in EXCEPT:
                    out.append("%s:%d: %s: %s (%s)" %
                               (rel, no, func, line.strip(), why))
    return out


def check(src):
    out = []
    for layer in LAYERS:
        for root, _, files in os.walk(os.path.join(src, layer)):
            for name in sorted(files):
                if name.endswith((".c", ".h")):
                    path = os.path.join(root, name)
                    out += check_file(path, os.path.relpath(path, src))
    return out


def selftest(src):
    import tempfile
    ok = True
    plants = ["return -1;", "return errno;", "return EINVAL;",
              "errno = ENOSPC;"]
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "net"))
        os.makedirs(os.path.join(tmp, "engine"))
        for i, p in enumerate(plants):
            with open(os.path.join(tmp, "net", "p%d.c" % i), "w") as f:
                f.write("static int planted(int x)\n{\n\tif (x)\n\t\t%s\n"
                        "\treturn 0;\n}\n" % p)
        with open(os.path.join(tmp, "engine", "recv.c"), "w") as f:
            f.write("static int parse(int x)\n{\n\treturn -1;\n}\n")
        got = check(tmp)
        for i, p in enumerate(plants):
            if not any(g.startswith("net/p%d.c:4: planted:" % i) for g in got):
                print("selftest: %r not reported" % p)
                ok = False
        if any(g.startswith("engine/recv.c") for g in got):
            print("selftest: an exception reported")
            ok = False
    if check(src):
        print("selftest: the tree itself fails")
        ok = False
    return ok


def main(argv):
    if len(argv) != 3 or argv[1] not in ("check", "selftest"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if argv[1] == "selftest":
        return 0 if selftest(argv[2]) else 1
    bad = check(argv[2])
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
