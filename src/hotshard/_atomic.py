"""Atomic output: write to a temporary file beside the target, then rename over it.

A crash, an error or a signal half-way leaves no partially written file that looks complete,
and no temporary file either. The finished file gets the permissions any new file of the user
gets (0666 less the umask), not the 0600 of a temporary file.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from hotshard.errors import InputError

__all__ = ["atomic_write", "check_writable", "is_special", "why_not_a_directory"]


def is_special(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` (links followed) exists and is not a regular file: a device such as
    /dev/null, a named pipe, a socket. Those are written in place, never replaced."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def why_not_a_directory(directory: str | os.PathLike[str]) -> str:
    """Why ``directory`` (which is not one) cannot hold a file: it or an ancestor is a file,
    or it does not exist. "does not exist" for ``notes.txt/out/`` would send the user looking
    for a directory to create, when a file is in the way."""
    d = Path(directory)
    for ancestor in (d, *d.parents):
        if ancestor.exists():
            if ancestor.is_dir():
                break
            return f"{ancestor} is a file, not a directory"
    return f"directory {d} does not exist (create it first, or name a file in an existing one)"


def check_writable(path: str | os.PathLike[str]) -> Path:
    """Fail early, before any work, when ``path`` cannot become an output file.

    Raises
    ------
    InputError
        ``path`` is a directory, its directory does not exist, or it is not writable.
    """
    target = Path(path)
    if target.is_symlink():  # a link is written through, not replaced
        target = Path(os.path.realpath(target))
    if is_special(target):
        return target
    if target.is_dir():
        raise InputError(f"cannot write {target}: it is a directory; name a file inside it")
    directory = target.parent
    if not directory.is_dir():
        raise InputError(f"cannot write {target}: {why_not_a_directory(directory)}")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise InputError(f"cannot write {target}: no permission to write in {directory}")
    if target.exists() and not os.access(target, os.W_OK):
        raise InputError(f"cannot write {target}: the file is read-only")
    return target


# the temporary files being written now: what a process ended by force removes first
# (``remove_in_progress``), so no partial output is left even then
IN_PROGRESS: set[str] = set()


def remove_in_progress() -> None:
    """Remove every temporary output still being written (a forced end of the process)."""
    for name in list(IN_PROGRESS):
        with contextlib.suppress(OSError):
            os.unlink(name)
        IN_PROGRESS.discard(name)


def _create_temporary(target: Path) -> tuple[int, str]:
    """A new hidden file beside ``target``, created 0666 so the system applies the umask."""
    directory = target.parent
    for _ in range(100):
        name = str(directory / f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
            IN_PROGRESS.add(name)
            return fd, name
        except FileExistsError:
            continue
        except OSError as exc:
            raise InputError(f"cannot write {target}: {exc.strerror}") from exc
    raise InputError(f"cannot write {target}: no free temporary name in {directory}")


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO]:
    """Open a temporary file next to ``path``; on success rename it onto ``path``.

    On any exception (including KeyboardInterrupt) the temporary file is removed and ``path``
    is left untouched. A symbolic link is followed (its target is replaced, the link kept); a
    device, pipe or socket (``/dev/null``, ``/dev/stdout``, a FIFO) is written in place.
    """
    target = check_writable(path)
    if is_special(target):
        with open(target, mode) as handle:
            yield handle
        return
    fd, tmp_name = _create_temporary(target)
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    finally:
        IN_PROGRESS.discard(tmp_name)
