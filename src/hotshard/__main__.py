"""`python -m hotshard` and the ``hotshard`` command run the CLI.

The CLI's import (click, the command table) takes a moment; a Ctrl-C that lands in it,
before ``cli.main`` handles interruptions, ends the run as one would later (one line, exit
130) instead of a traceback."""

import sys


def run() -> int:
    """Import the CLI, then run it; a Ctrl-C during the import is an interrupted run."""
    try:
        from hotshard.cli import main
    except KeyboardInterrupt:
        sys.stderr.write("hotshard: interrupted\n")
        return 130
    return main()


if __name__ == "__main__":
    sys.exit(run())
