#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Run pyverbs test modules over our libibverbs.so.1.

usage: run.py MODULE [MODULE...]      (e.g. run.py test_ud test_cq)
       run.py MODULE.Class.test_name

Exit status: 0 all passed, 1 a failure, 77 pyverbs is not installed (ctest
reads 77 as SKIP).  The library must come from UROCE_LIBDIR (or the first
LD_LIBRARY_PATH entry): a test run against Debian's libibverbs would prove
nothing, so that is a failure.
"""
import os
import sys
import unittest

SKIP = 77


def loaded_libibverbs():
    with open('/proc/self/maps') as f:
        for line in f:
            path = line.split()[-1]
            if os.path.basename(path).startswith('libibverbs.so'):
                return os.path.realpath(path)
    return None


def main(argv):
    try:
        import pyverbs.device  # noqa: F401  (loads libibverbs.so.1)
    except ImportError as ex:
        print(f'SKIP: pyverbs is not available ({ex}); '
              'install python3-pyverbs', file=sys.stderr)
        return SKIP
    libdir = os.environ.get('UROCE_LIBDIR') or \
        (os.environ.get('LD_LIBRARY_PATH', '').split(':') or [''])[0]
    lib = loaded_libibverbs()
    print(f'libibverbs: {lib}', file=sys.stderr)
    if libdir and (lib is None or
                   not lib.startswith(os.path.realpath(libdir) + os.sep)):
        print(f'FAIL: libibverbs.so.1 was loaded from {lib}, not from '
              f'{libdir}', file=sys.stderr)
        return 1
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    names = argv[1:] or sorted(
        f[:-3] for f in os.listdir(os.path.dirname(os.path.abspath(__file__)))
        if f.startswith('test_') and f.endswith('.py'))
    suite = unittest.defaultTestLoader.loadTestsFromNames(names)
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    sys.stdout.flush()
    return 0 if result.wasSuccessful() else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv))
