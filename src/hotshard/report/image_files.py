"""Image files of figures: the formats a file name may ask for, and the one atomic way every
plot command writes one, with matplotlib's numeric warnings kept off the terminal.

Its own module so that each figure module (profile, observations, diff, report) uses it and none
imports another to save a file.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from hotshard._atomic import atomic_write, check_writable
from hotshard.errors import InputError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["IMAGE_FORMATS", "image_format", "quiet_numerics", "save_figure"]

IMAGE_FORMATS = ("png", "svg", "pdf")


def image_format(path: str | os.PathLike[str]) -> str:
    """The image format a file name asks for, by its extension; an error for any other."""
    suffix = os.path.splitext(str(path))[1].lower().lstrip(".")
    if suffix not in IMAGE_FORMATS:
        shown = f".{suffix}" if suffix else "(no extension)"
        raise InputError(f"cannot draw {path}: unknown image type {shown}; "
                         "name a .png, .svg or .pdf file")
    return suffix


@contextlib.contextmanager
def quiet_numerics() -> Iterator[None]:
    """Drawing without numeric warnings on the user's terminal: an absurd but valid value
    (a p99 of 1e300 ms on a log axis) overflows inside matplotlib's transforms, which is
    drawn as well as it can be and says nothing the numbers in the text do not."""
    import warnings

    import numpy as np

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", UserWarning)
        yield


def save_figure(path: str | os.PathLike[str], draw: Callable[[], Figure]) -> None:
    """Write the figure ``draw`` returns to ``path`` (PNG, SVG or PDF by its name), atomically.

    The name and the directory are checked before drawing, so a wrong path costs no drawing
    and a failed write leaves no file. The one way every ``plot_*`` here writes an image.

    Raises
    ------
    InputError
        The file name is not .png, .svg or .pdf, or the file cannot be written.
    """
    fmt = image_format(path)
    check_writable(path)  # fail before drawing
    import matplotlib

    matplotlib.use("Agg")
    with quiet_numerics():
        fig = draw()
        with atomic_write(path, "wb") as handle:
            fig.savefig(handle, format=fmt)
