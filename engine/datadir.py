"""The data folder and database file the configuration names: private, and checked before anything uses them.

Without these checks a bad ``bot.data_dir`` or ``database.path`` surfaces deep inside a
feature as a traceback (FileExistsError when the folder is a file, NotADirectoryError,
PermissionError). ``check_storage`` raises ``StorageError``: one line naming the key, the path
and what to do. Writability is proved by writing a probe file, not by ``os.access``: root
passes ``os.access`` on any folder, while a read-only file system refuses root too.

They hold private chat memory, documents and simulations, so they are their user's only:
``private_files`` sets the process's umask to 077 (every folder it creates is 0700, every file
0600: the database, downloads, outgoing files, simulation folders), and ``make_private`` closes
a data folder or database file an earlier version left readable by others. A simulation run's
child process (and its Ray actor, on a node of its own) sets the same umask.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from engine.config import Config, ConfigError

PRIVATE_UMASK = 0o077   # folders 0700, files 0600


class StorageError(ConfigError):
    """A folder or database file the configuration points at cannot be used."""


def private_files() -> None:
    """Everything this process creates from now on is readable by its user only."""
    os.umask(PRIVATE_UMASK)


def make_private(config: Config) -> list[Path]:
    """Close the data folder (0700) and an SQLite database with its journal files (0600) to
    other users where they are open to them; returns what was changed. Files of another user
    (a shared folder set up by hand) are left as they are, and so is a file that is no SQLite
    database (database.path naming the user's notes by mistake: startup refuses it, unchanged)."""
    targets = [(config.data_dir, 0o700)]
    if not config.uses_postgres and _maybe_sqlite(config.db_path):
        db = config.db_path
        targets += [(db, 0o600), (db.with_name(db.name + "-wal"), 0o600), (db.with_name(db.name + "-shm"), 0o600)]
    changed = []
    for path, mode in targets:
        try:
            info = path.stat()
            if info.st_mode & PRIVATE_UMASK and info.st_uid == os.getuid():
                path.chmod(mode)
                changed.append(path)
        except OSError:   # not there yet (created private), or not ours to change
            continue
    return changed


def _maybe_sqlite(path: Path) -> bool:
    """Whether ``path`` is missing, empty or starts with SQLite's header."""
    try:
        with path.open("rb") as f:
            head = f.read(16)
    except OSError:
        return True
    return head in (b"", b"SQLite format 3\0")


def _blocking_file(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` that is not a folder."""
    for parent in [path, *path.parents]:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


def shown(path: Path, limit: int = 200) -> str:
    """``path`` for a message: at most ``limit`` characters of it, control characters escaped, so
    a 100 kB setting still gives one short line."""
    text = str(path)
    text = text if len(text) <= limit else text[:limit] + "…"
    return text if text.isprintable() else repr(text)


def ensure_writable_folder(path: Path, key: str) -> Path:
    """Create ``path`` (with parents) and prove the bot can write in it; ``key`` names the setting."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = _blocking_file(path)
        what = (f"{shown(path)} is a file" if blocker in (None, path)
                else f"{shown(blocker)} (part of {shown(path)}) is a file")
        raise StorageError(f"{key}: {what}, not a folder; name a folder or move the file away") from None
    except OSError as err:
        raise StorageError(f"{key}: cannot create the folder {shown(path)} ({err.strerror or err}); "
                           "create it with write access for the bot's user, or choose another") from None
    except ValueError:   # pathlib's "embedded null byte"
        raise StorageError(f"{key}: {shown(path)} holds a NUL character, which no file name may; "
                           "choose another folder") from None
    try:
        with tempfile.TemporaryFile(dir=path, prefix=".write-probe-"):
            pass
    except OSError as err:
        raise StorageError(f"{key}: cannot write in {shown(path)} ({err.strerror or err}); give the bot's user "
                           "write access to it, or choose another folder") from None
    return path


def check_storage(config: Config) -> None:
    """The data folder is a writable folder; the database file, if it exists, is a file in a
    writable folder (a read-only database file is found when it is opened: engine.db)."""
    ensure_writable_folder(config.data_dir, "bot.data_dir")
    if config.uses_postgres:
        return   # the server's storage: a connection failure is reported by engine.db
    key = "database.path" if config.database.path else "bot.data_dir"
    try:
        db_path = config.db_path
    except ValueError:   # pathlib's "embedded null byte"
        raise StorageError(f"{key}: holds a NUL character, which no file name may; choose another") from None
    if db_path.is_dir():
        raise StorageError(f"{key}: the database {shown(db_path)} is a folder; name a file (or leave "
                           "database.path empty for <data_dir>/bot.sqlite3)")
    ensure_writable_folder(db_path.parent, key)
