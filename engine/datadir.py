"""The data folder and database file the configuration names, checked before anything uses them.

Without these checks a bad ``bot.data_dir`` or ``database.path`` surfaces deep inside a
feature as a traceback (FileExistsError when the folder is a file, NotADirectoryError,
PermissionError). ``check_storage`` raises ``StorageError``: one line naming the key, the path
and what to do. Writability is proved by writing a probe file, not by ``os.access``: root
passes ``os.access`` on any folder, while a read-only file system refuses root too.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from engine.config import Config, ConfigError


class StorageError(ConfigError):
    """A folder or database file the configuration points at cannot be used."""


def _blocking_file(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` that is not a folder."""
    for parent in [path, *path.parents]:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


def ensure_writable_folder(path: Path, key: str) -> Path:
    """Create ``path`` (with parents) and prove the bot can write in it; ``key`` names the setting."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = _blocking_file(path)
        what = f"{path} is a file" if blocker in (None, path) else f"{blocker} (part of {path}) is a file"
        raise StorageError(f"{key}: {what}, not a folder; name a folder or move the file away") from None
    except OSError as err:
        raise StorageError(f"{key}: cannot create the folder {path} ({err.strerror or err}); "
                           "create it with write access for the bot's user, or choose another") from None
    try:
        with tempfile.TemporaryFile(dir=path, prefix=".write-probe-"):
            pass
    except OSError as err:
        raise StorageError(f"{key}: cannot write in {path} ({err.strerror or err}); give the bot's user "
                           "write access to it, or choose another folder") from None
    return path


def check_storage(config: Config) -> None:
    """The data folder is a writable folder; the database file, if it exists, is a file in a
    writable folder (a read-only database file is found when it is opened: engine.db)."""
    ensure_writable_folder(config.data_dir, "bot.data_dir")
    if config.uses_postgres:
        return   # the server's storage: a connection failure is reported by engine.db
    key = "database.path" if config.database.path else "bot.data_dir"
    db_path = config.db_path
    if db_path.is_dir():
        raise StorageError(f"{key}: the database {db_path} is a folder; name a file (or leave "
                           "database.path empty for <data_dir>/bot.sqlite3)")
    ensure_writable_folder(db_path.parent, key)
