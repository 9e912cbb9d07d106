"""hotshard: make load tests of partitioned stores tell the truth about hot keys.

Importing the package is instant and has no side effects: every capability lives in its own
subpackage (``hotshard.profile``, ...) and heavy dependencies are imported where they are used.
"""

from hotshard.errors import FitError, HotshardError, InputError

__version__ = "0.1.0"
__all__ = ["FitError", "HotshardError", "InputError", "__version__"]
