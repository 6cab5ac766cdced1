#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A reference to docs/ points at a file and a section that exist.

  check_doc_refs.py check ROOT [-x PATH]... PATH...
        PATHs relative to ROOT: files or folders to search; -x PATH: a
        file or folder not to search (the checks' own examples)
  check_doc_refs.py selftest ROOT

A reference is "docs/NAME.md", optionally followed by a quoted section
title ("docs/transport.md, "Held ACKs""), which may run over two comment
lines.  The file must exist in ROOT/docs; the title must begin a heading
of it or a paragraph's lead-in (a line that starts with the title, bold
or not).  Each dangling reference is one line "FILE:LINE: ..."; exit 1 if
any.  The selftest plants a reference to a missing file, one to a missing
section and a valid one in a scratch tree, and expects exactly the first
two reported.
"""
import os
import re
import sys
import tempfile

REF = re.compile(r'docs/([A-Za-z0-9_-]+\.md)'
                 r'(?:[,:]?[ \t]*(?:\n[ \t]*(?:\*|#|//)?[ \t]*)?'
                 r'"([^"]+)")?')
LEADER = re.compile(r'[ \t]*\n[ \t]*(?:\*|#|//)?[ \t]*')


def starts(path):
    """the line starts a reference may name: headings and lead-ins"""
    out = []
    for line in open(path, encoding="utf-8"):
        s = line.strip()
        s = re.sub(r"^#+\s*", "", s)
        s = re.sub(r"^(?:[-*]|\d+\.)\s+", "", s)
        s = s.lstrip("*")
        if s:
            out.append(s)
    return out


def files_under(root, paths, skip=()):
    skip = {os.path.normpath(os.path.join(root, p)) for p in skip}
    for p in paths:
        full = os.path.normpath(os.path.join(root, p))
        if full in skip:
            continue
        if os.path.isfile(full):
            yield full
            continue
        for d, dirs, names in os.walk(full):
            dirs[:] = [x for x in dirs if not x.startswith(".")
                       and x != "__pycache__"
                       and os.path.join(d, x) not in skip]
            for n in sorted(names):
                if os.path.join(d, n) not in skip:
                    yield os.path.join(d, n)


def dangling(root, paths, skip=()):
    cache, out = {}, []
    for f in files_under(root, paths, skip):
        try:
            text = open(f, encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            continue
        for m in REF.finditer(text):
            name, title = m.group(1), m.group(2)
            where = "%s:%d" % (os.path.relpath(f, root),
                               text.count("\n", 0, m.start()) + 1)
            doc = os.path.join(root, "docs", name)
            if not os.path.isfile(doc):
                out.append("%s: docs/%s does not exist" % (where, name))
                continue
            if not title:
                continue
            title = LEADER.sub(" ", title).strip()
            if doc not in cache:
                cache[doc] = starts(doc)
            if not any(s.startswith(title) for s in cache[doc]):
                out.append('%s: docs/%s has no section "%s"'
                           % (where, name, title))
    return out


def check(root, args):
    paths, skip = [], []
    while args:
        if args[0] == "-x" and len(args) > 1:
            skip.append(args[1])
            args = args[2:]
        else:
            paths.append(args[0])
            args = args[1:]
    bad = dangling(root, paths, skip)
    for b in bad:
        print(b)
    return 1 if bad else 0


def selftest(root):
    with tempfile.TemporaryDirectory() as tmp:
        os.mkdir(os.path.join(tmp, "docs"))
        os.mkdir(os.path.join(tmp, "src"))
        with open(os.path.join(tmp, "docs", "real.md"), "w") as f:
            f.write("# Real\n\n## A section\n\n**A lead-in.** text\n")
        with open(os.path.join(tmp, "src", "a.c"), "w") as f:
            f.write('/* fine (docs/real.md, "A section"), fine too\n'
                    ' * (docs/real.md, "A\n * lead-in"), and\n'
                    ' * docs/gone.md, and docs/real.md "No such" */\n')
        got = dangling(tmp, ["src"])
    want = ["src/a.c:4: docs/gone.md does not exist",
            'src/a.c:4: docs/real.md has no section "No such"']
    if got != want:
        print("selftest: expected %r, got %r" % (want, got))
        return 1
    print("selftest: the missing file and section reported, the rest not")
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3:]))
    if len(sys.argv) == 3 and sys.argv[1] == "selftest":
        sys.exit(selftest(sys.argv[2]))
    sys.exit("usage: check_doc_refs.py check ROOT PATH... | selftest ROOT")
