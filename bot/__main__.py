"""`python -m bot`: the interpreter is checked first, so an unsupported one gets one clear line.

The bot needs Python 3.11: camel-oasis 0.2.5 installs only below 3.12, and the bot reads its
configuration with ``tomllib`` (new in 3.11). This file runs before anything that needs 3.11 is
imported, so it keeps to syntax that old interpreters parse (no f-strings, no annotations).
"""
import sys

SUPPORTED = (3, 11)


def unsupported_python(version=sys.version_info):
    """The one-line error for an interpreter other than 3.11, or None."""
    if tuple(version[:2]) == SUPPORTED:
        return None
    return ("error: worldbot needs Python %d.%d (camel-oasis supports no newer one, and the "
            "configuration reader needs 3.11); this is Python %d.%d.%d. Create the virtual "
            "environment with python3.11." % (SUPPORTED + tuple(version[:3])))


if __name__ == "__main__":
    problem = unsupported_python()
    if problem:
        sys.stderr.write(problem + "\n")
        sys.exit(1)
    from bot.cli import main

    sys.exit(main())
