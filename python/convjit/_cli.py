"""The ``convjit`` console script: runs the command line shipped inside the package."""

import os
import sys


def main():
    program = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "convjit")
    if not os.access(program, os.X_OK):
        sys.stderr.write("convjit: the command line is missing from this installation (%s)\n" % program)
        return 1
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(program, [program] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
