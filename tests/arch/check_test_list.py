#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every ctest name is in tests/README.md.

  check_test_list.py check README NAMES_FILE   (NAMES_FILE: `ctest -N` output,
                                                or - for stdin)
  check_test_list.py selftest README NAMES_FILE

A name is listed when it appears in backquotes in a table row of README,
literally or through a family pattern written there: `{a,b}` one of the
alternatives, `[x]` optional, `*` any run of characters.  Two rules keep
the patterns honest:
  - a pattern whose wildcard is the whole name, or all of it after the
    tier's prefix (`*_udp`, `conf_*`, `fault.*`, `pyverbs_*_udp`), lists
    nothing: a new test in that tier still needs its own row;
  - NAME_udp, the UROCE_LOCAL=0 twin that CMake makes of a same-host test,
    is listed when NAME is (tests/README.md says so).
Each name not listed is one line "NAME: no row in tests/README.md"; exit 1
if any.  The selftest plants a name no row lists, a name only a catch-all
pattern would match, and a twin whose original has no row, and expects
each to be reported, and the real list to pass.
"""
import re
import sys

CATCH_ALL = re.compile(r"^([a-z]+[._])?\*(_udp)?$")


def pattern_re(tok):
    """the regex of one backquoted token"""
    out, depth = [], 0
    for ch in tok:
        if ch == "{":
            out.append("(?:")
            depth += 1
        elif ch == "}" and depth:
            out.append(")")
            depth -= 1
        elif ch == "," and depth:
            out.append("|")
        elif ch == "[":
            out.append("(?:")
        elif ch == "]":
            out.append(")?")
        elif ch == "*":
            out.append(".*")
        else:
            out.append(re.escape(ch))
    return re.compile("^" + "".join(out) + "$")


def listed_patterns(readme):
    pats = []
    for line in open(readme, encoding="utf-8"):
        if not line.startswith("|"):
            continue
        for tok in re.findall(r"`([^`\s]+)`", line):
            if CATCH_ALL.match(tok):
                continue
            try:
                pats.append(pattern_re(tok))
            except re.error:
                continue
    return pats


def ctest_names(path):
    f = sys.stdin if path == "-" else open(path, encoding="utf-8")
    names = []
    for line in f:
        m = re.match(r"\s*Test\s+#\d+: (\S+)", line)
        if m:
            names.append(m.group(1))
    return names


def unlisted(pats, names):
    def listed(n):
        return any(p.match(n) for p in pats)

    return [n for n in names
            if not listed(n) and not (n.endswith("_udp") and listed(n[:-4]))]


def check(readme, names_file):
    names = ctest_names(names_file)
    if not names:
        print("no test names in the ctest -N output")
        return 1
    missing = unlisted(listed_patterns(readme), names)
    for n in missing:
        print("%s: no row in tests/README.md" % n)
    return 1 if missing else 0


def selftest(readme, names_file):
    names = ctest_names(names_file)
    pats = listed_patterns(readme)
    fail = 0
    if unlisted(pats, names):
        print("selftest: the real list does not pass")
        fail = 1
    planted = ["planted.no_row", "conf_planted_by_catch_all",
               "planted.no_row_udp"]
    got = unlisted(pats, names + planted)
    for n in planted:
        if n not in got:
            print("selftest: %s not reported" % n)
            fail = 1
    if not fail:
        print("selftest: every planted name reported")
    return fail


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("check", "selftest"):
        sys.exit("usage: check_test_list.py check|selftest README NAMES_FILE")
    fn = check if sys.argv[1] == "check" else selftest
    sys.exit(fn(sys.argv[2], sys.argv[3]))
