"""How ``dml-ep`` writes its reports and outputs: all or nothing, never over what it reads.

A regular file is written to a temporary name beside it and renamed into place once every file of
the command is written, so that a failure (or Ctrl-C, or SIGTERM: the CLI turns it into an
exception) leaves neither a partial file nor a mix of new and old ones. A symbolic link is written
through, as editors and ``cp`` do: its target is replaced, the link stays. New files and folders get
the user's umask (a temporary name is made 0600); a file replaced keeps its mode. A path that is
also an input of the same command is refused before any work. A folder a command writes whole
(``export``'s DxDispatch model, Model Explorer's node data) must be new or empty, and is staged
the same way: written in a temporary folder beside it, renamed into place (:func:`write_directory`).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable
from typing import BinaryIO

Writer = Callable[[BinaryIO], object]


def check_writable(path: str, directory: bool = False, inputs: Iterable[str] = ()) -> None:
    """Fail before the work, not after it: the file ``path`` needs an existing, writable directory
    (or, for a device or FIFO, to be writable itself; ``-`` is stdout); with ``directory``, ``path``
    is that directory, made later if missing (then its nearest existing ancestor must be writable).
    ``inputs`` are the paths the command reads: ``path`` must not be one of them."""
    if not directory:
        check_not_input(path, inputs)
    if not directory and in_place(path):
        if path == "-" or os.access(path, os.W_OK):
            return
        raise OSError(f"cannot write {path}: no permission")
    target = path if directory else os.path.realpath(path)
    folder = os.path.abspath(target) if directory else os.path.dirname(target)
    while directory and not os.path.exists(folder):
        folder = os.path.dirname(folder)
    check_folder(path, folder)


def check_folder(path: str, folder: str) -> None:
    """``folder``, where ``path`` is to be made, exists and can be written in."""
    if not os.path.isdir(folder):
        reason = f"{folder} is not a directory" if os.path.exists(folder) else f"no such directory {folder}"
    elif not os.access(folder, os.W_OK | os.X_OK):
        reason = f"no permission to write in {folder}"
    else:
        return
    raise OSError(f"cannot write {path}: {reason}")


def check_not_input(path: str, inputs: Iterable[str]) -> None:
    """Refuse to write ``path`` over a file the same command reads (``compare M --json M``), by
    any name (a link, ``./M``)."""
    if path == "-" or not os.path.exists(path):
        return
    for source in inputs:
        if os.path.exists(source) and os.path.samefile(path, source):
            raise OSError(f"cannot write {path}: it is an input of this command ({source}); give another path")


def check_distinct(outputs: list[tuple[str, str]], folders: Iterable[str] = ()) -> None:
    """``outputs``, each (what writes it, e.g. ``--json``; its path), are distinct files by any name
    (``a.json`` and ``./a.json``, a link and its target): one would replace the other. None is inside
    one of ``folders``, the outputs written whole, which must be new or empty. ``-`` is stdout."""
    real = [(what, path, os.path.realpath(path)) for what, path in outputs if path != "-"]
    whole = [(what, path, resolved) for what, path, resolved in real if what in folders]
    for index, (what, path, resolved) in enumerate(real):
        for other, _, other_resolved in real[:index]:
            if resolved == other_resolved:
                raise OSError(f"{other} and {what} both write {path}: give each its own path")
        for folder, folder_path, folder_resolved in whole:
            if folder != what and os.path.commonpath([resolved, folder_resolved]) == folder_resolved:
                raise OSError(f"{what} writes {path} inside {folder} {folder_path}, which must be new or empty: give a path outside it")


def in_place(path: str) -> bool:
    """Whether ``path`` is written as it is, not renamed over: ``-`` (stdout), or something that
    exists and is not a regular file (/dev/stdout, /dev/null, a FIFO), which a rename would replace."""
    return path == "-" or os.path.exists(path) and not os.path.isfile(path)


def write_files(writers: dict[str, Writer]) -> None:
    """Write each ``path: write(binary_file)``, all or none (see the module's docstring); ``-``
    and devices are written in place. Errors name the path."""
    staged: list[tuple[str, str]] = []
    renamed: list[str] = []
    path = None
    try:
        for path, write in writers.items():
            if path == "-":
                sys.stdout.flush()
                write(sys.stdout.buffer)
                sys.stdout.buffer.flush()
            elif in_place(path):
                with open(path, "wb") as f:
                    write(f)
            else:
                target = os.path.realpath(path)  # through a symbolic link
                fd, temp = tempfile.mkstemp(dir=os.path.dirname(target), suffix=".tmp")
                staged.append((temp, target))
                os.chmod(temp, stat.S_IMODE(os.stat(target).st_mode) if os.path.exists(target) else new_mode())
                with os.fdopen(fd, "wb") as f:
                    write(f)
        for temp, target in staged:
            os.replace(temp, target)
            renamed.append(target)
    except OSError as exc:
        if path == "-":
            raise  # stdout's reader went away (``| head``): main's quiet BrokenPipeError
        for done in renamed:
            os.remove(done)
        raise OSError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        for temp, _ in staged:
            if os.path.exists(temp):
                os.remove(temp)


def check_new_directory(directory: str, command: str) -> str:
    """The absolute path of ``directory``, which must be absent or empty (nothing of anyone else's
    is replaced, and no file of an earlier run mixes with this one's), in a writable directory.
    ``command`` names what writes it, for the error. A symbolic link is written through, as a file's
    is: the path returned is its target's."""
    directory = os.path.realpath(directory)
    if os.path.exists(directory) and (not os.path.isdir(directory) or os.listdir(directory)):
        what = "a directory that is not empty" if os.path.isdir(directory) else "a file"
        raise OSError(f"{directory} is {what}: {command} writes a new directory (give one that does not exist)")
    check_folder(directory, os.path.dirname(directory))
    if len(os.fsencode(os.path.basename(directory))) > NAME_MAX:
        raise OSError(f"cannot write {directory}: its name is longer than a file name can be ({NAME_MAX} bytes)")
    return directory


NAME_MAX = 255  # bytes of a file name: Linux's, macOS's and (in UTF-16 units) Windows'


def write_directory(directory: str, writers: dict[str, Writer], command: str, empty: Iterable[str] = ()) -> None:
    """Write each ``path: write(binary_file)`` (paths relative to ``directory``) and the ``empty``
    folders into ``directory``, which must be absent or empty (:func:`check_new_directory`): staged in
    a temporary folder beside it, then renamed into place, so that all appear at once or none."""
    directory = check_new_directory(directory, command)
    staging = tempfile.mkdtemp(dir=os.path.dirname(directory), prefix=f".{os.path.basename(directory)[:64]}-")  # a name that fits
    try:
        os.chmod(staging, new_mode(directory=True))  # mkdtemp's 0700, as a new folder would not be
        for folder in empty:
            os.makedirs(os.path.join(staging, folder), exist_ok=True)
        for path, write in writers.items():
            target = os.path.join(staging, path)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                write(f)
        if os.path.isdir(directory):
            os.rmdir(directory)  # empty, checked above
        os.rename(staging, directory)
    except OSError as exc:
        raise OSError(f"cannot write {directory}: {exc.strerror or exc}") from None
    finally:
        if os.path.isdir(staging):
            shutil.rmtree(staging)


def new_mode(directory: bool = False) -> int:
    """The mode ``open`` or ``mkdir`` would give a new file or folder under the user's umask."""
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if directory else 0o666) & ~umask


def bytes_writer(data: bytes) -> Writer:
    return lambda f: f.write(data)


def text_writer(text: str) -> Writer:
    return lambda f: f.write(text.encode())


def json_writer(data) -> Writer:
    return lambda f: f.write(json.dumps(data, indent=2, default=str).encode())
