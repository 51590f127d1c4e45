"""Local disk: POSIX calls directly, and a rename that never replaces an existing file."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import itertools
import os
import secrets
import shutil
import stat
from typing import Any

import fsspec

from ..urls import decode_path, encode_path, split_url
from .bindings import OpenedStore, StoreBinding
from .operations import FileStatus, FsspecStore, LinkInPathError, StoreCapabilities

_AT_FDCWD = -100
_RENAME_NOREPLACE = 1

try:
    _renameat2: Any = ctypes.CDLL(None, use_errno=True).renameat2
    _renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
    _renameat2.restype = ctypes.c_int
except (AttributeError, OSError):
    _renameat2 = None


def is_write_in_progress(name: str) -> bool:
    """A temporary file of ``LocalStore.write_bytes`` (``.<name>.<random>.tmp``): a reader listing a directory
    while another process writes into it skips such names."""
    return name.startswith(".") and name.endswith(".tmp")


def _link_then_unlink(source: str, dest: str) -> None:
    # link() fails with EEXIST if dest exists, so no file there is ever replaced.
    os.link(source, dest)
    os.unlink(source)


_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _write_then_replace(path: str, data: bytes, mode: int) -> None:
    """``data`` into a new temporary file beside ``path``, created with ``mode`` less the umask (the kernel applies
    the process's umask; it is neither read nor changed here), then renamed over ``path``."""
    directory, name = os.path.split(path)
    os.makedirs(directory, exist_ok=True)
    for _ in range(100):
        temp = os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")
        try:
            handle = os.open(temp, _TEMP_FLAGS, mode)
        except FileExistsError:
            continue
        break
    else:
        raise FileExistsError(errno.EEXIST, "no unused temporary name", path)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _remove_tree(parent_fd: int | None, name: str) -> None:
    """Delete a directory tree without following symlinks, like ``shutil.rmtree``, with fewer system calls.

    A job's temporary tree is mostly empty directories once its files are renamed away (one per task and
    partition), so each subdirectory is first tried with a bare ``rmdir``: one call where ``rmtree`` makes
    about seven (lstat, open, fstat, getdents, close, rmdir). Only a directory that is not empty is opened
    and walked. A child that vanishes meanwhile is fine; the tree itself missing raises
    ``FileNotFoundError``. Directories are opened relative to their parent's descriptor with ``O_NOFOLLOW``, so a
    symlink swapped in during the walk is never followed.
    """
    fd = os.open(name, _DIRECTORY_FLAGS, dir_fd=parent_fd)
    try:
        with os.scandir(fd) as entries:
            children = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
        for child, is_dir in children:
            with contextlib.suppress(FileNotFoundError):  # gone meanwhile: the goal all the same
                if is_dir:
                    _remove_child_directory(fd, child)
                else:
                    os.unlink(child, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent_fd)


def _is_link(name: str, parent_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _remove_child_directory(parent_fd: int, name: str) -> None:
    try:
        os.rmdir(name, dir_fd=parent_fd)
    except OSError as error:
        if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        _remove_tree(parent_fd, name)


class LocalStore(FsspecStore):
    """Local filesystem; ``rename_file`` is atomic and refuses to replace (``renameat2(RENAME_NOREPLACE)``)."""

    capabilities = StoreCapabilities(
        atomic_rename=True,
        etags_preserved_in_rename=False,
        real_directories=True,
        microsecond_calls=True,
        hidden_checksum_files=True,
        directory_rename=True,
        rename_never_overwrites=True,
        rename_outcome_known=True,
        appendable=True,
        symbolic_links=True,
    )

    def __init__(self, fs: Any) -> None:
        super().__init__(fs, "file")
        self._use_renameat2 = _renameat2 is not None

    def to_url(self, path: str) -> str:
        return "file://" + encode_path(path)

    def from_url(self, url: str) -> str:
        scheme, authority, path = split_url(url)
        if scheme not in ("file", ""):
            raise ValueError(f"{url} is not a file: URL")
        if authority not in ("", "localhost"):
            raise ValueError(f"{url} names a remote host")
        return decode_path(path)

    def info(self, path: str) -> FileStatus | None:
        """What is at ``path``, a symbolic link followed (``is_link`` says it was one; a dangling one is itself)."""
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        is_link = stat.S_ISLNK(st.st_mode)
        if is_link:
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                st = os.stat(path)
        is_dir = stat.S_ISDIR(st.st_mode)
        return FileStatus(
            path=path, size=0 if is_dir else st.st_size, is_dir=is_dir, is_link=is_link, modified=st.st_mtime
        )

    def list_dir(self, path: str) -> list[FileStatus]:
        """A directory's entry carries no time: nothing asks a listed directory's, and its type comes with the
        listing, where a ``stat`` of each of a task's partition directories would cost a system call each."""
        result = []
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    result.append(FileStatus(path=entry.path, size=0, is_dir=True))
                    continue
                st = entry.stat(follow_symlinks=False)
                result.append(
                    FileStatus(
                        path=entry.path, size=st.st_size, is_dir=False, is_link=entry.is_symlink(), modified=st.st_mtime
                    )
                )
        return result

    def mkdirs(self, path: str) -> None:
        """``mkdir`` first: a job commit makes thousands of directories whose parent exists, and
        ``os.makedirs`` probes the parent before each (a ``stat`` and a path split per directory)."""
        try:
            try:
                os.mkdir(path)
            except FileNotFoundError:  # a parent is missing too
                os.makedirs(path, exist_ok=True)
        except FileExistsError:
            if os.path.isdir(path):  # as makedirs(exist_ok=True): a link to a directory counts as one
                return
            raise FileExistsError(errno.EEXIST, "a file is in the way of a directory", path) from None
        except NotADirectoryError:
            raise FileExistsError(errno.ENOTDIR, "a file is in the way of a parent directory", path) from None

    def _rename_noreplace(self, source: str, dest: str) -> bool:
        """``renameat2(RENAME_NOREPLACE)``; ``False`` (and not tried again) where the filesystem lacks it."""
        if not self._use_renameat2:
            return False
        if _renameat2(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(dest), _RENAME_NOREPLACE) == 0:
            return True
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOSYS):
            raise OSError(code, os.strerror(code), source, None, dest)
        self._use_renameat2 = False  # this filesystem lacks RENAME_NOREPLACE
        return False

    def rename_file(self, source: str, dest: str) -> None:
        if not self._rename_noreplace(source, dest):
            _link_then_unlink(source, dest)

    def rename_dir(self, source: str, dest: str) -> None:
        """One ``rename`` of the tree; never onto anything at ``dest`` (``rename`` would replace an empty
        directory there, so without ``RENAME_NOREPLACE`` the name is first claimed with ``mkdir``)."""
        if not os.path.isdir(source):
            raise FileNotFoundError(errno.ENOENT, "rename source is not a directory", source)
        self._move_tree(source, dest)

    def move_dir_holding(self, source: str, name: str, dest: str) -> bool:
        """The directory opened without following a link and read until a second entry shows, then renamed: no
        probe before the listing, no ``stat`` of its entry, no second probe before the rename, where the version
        made of ``info``, ``list_dir`` and ``rename_dir`` makes all three."""
        try:
            handle = os.open(source, _DIRECTORY_FLAGS)
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError as error:
            if error.errno == errno.ELOOP:  # a link: it would be moved as a link, out of the job
                return False
            raise
        try:
            with os.scandir(handle) as entries:
                held = [(entry.name, entry.is_file(follow_symlinks=False)) for entry in itertools.islice(entries, 2)]
        finally:
            os.close(handle)
        if held != [(name, True)]:
            return False
        self._move_tree(source, dest)
        return True

    def _move_tree(self, source: str, dest: str) -> None:
        if self._rename_noreplace(source, dest):
            return
        os.mkdir(dest)  # FileExistsError if taken; then the rename replaces only this empty directory of ours
        try:
            os.rename(source, dest)
        except BaseException:
            with contextlib.suppress(OSError):
                os.rmdir(dest)
            raise

    def delete_file(self, path: str) -> bool:
        try:
            os.unlink(path)
        except FileNotFoundError:
            return False
        return True

    def delete_dir(self, path: str) -> bool:
        try:
            _remove_tree(None, path)
        except FileNotFoundError:
            return False
        except NotADirectoryError:
            os.unlink(path)
        return True

    def remove_empty_dir(self, path: str) -> bool:
        try:
            os.rmdir(path)
        except OSError:
            return False
        return True

    def read_bytes(self, path: str) -> bytes:
        with open(path, "rb") as handle:
            return handle.read()

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write beside ``path``, then replace it: a reader in another process (a heartbeat's, a marker file's)
        never sees the file truncated or half written, which ``open(path, "wb")`` would show it. The file gets
        the mode a data file gets (``0o666`` less the umask): whoever may read the data may read the record."""
        _write_then_replace(path, data, 0o666)

    def append_bytes(self, path: str, data: bytes) -> None:
        """``O_APPEND`` then ``fsync``: the bytes are at the end of the file, on disk, when this returns. Never
        through a link at ``path`` (``O_NOFOLLOW``)."""
        os.makedirs(os.path.dirname(path), exist_ok=True)
        handle = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(handle, view) :]
            os.fsync(handle)
        finally:
            os.close(handle)

    def write_private_bytes(self, path: str, data: bytes) -> None:
        """As ``write_bytes``, the file created 0600 (never wider at any moment) and the mode set again explicitly,
        so that no umask can widen it."""
        _write_then_replace(path, data, 0o600)
        os.chmod(path, 0o600, follow_symlinks=False)

    def read_private_bytes(self, path: str) -> bytes:
        """Read a secret only if this user owns it and nobody else may read or write it (root may read any)."""
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(handle, "rb") as file:
            status = os.fstat(file.fileno())
            euid = os.geteuid()
            if status.st_mode & 0o077 or euid not in (status.st_uid, 0):
                raise PermissionError(
                    errno.EACCES,
                    f"not a private file: mode {status.st_mode & 0o777:o}, owner uid {status.st_uid} (must be "
                    f"0600, owned by uid {euid})",
                    path,
                )
            return file.read()

    def delete_file_below(self, root: str, path: str) -> bool:
        """Open each directory from ``root`` down to ``path``'s parent relative to the last, never following a
        link (``O_NOFOLLOW``), then unlink the name in it: a link swapped in at any moment is never followed."""
        prefix = root.rstrip("/") + "/"
        if not path.startswith(prefix):
            raise LinkInPathError(errno.EXDEV, f"not below {root}", path)
        *directories, name = path[len(prefix) :].split("/")
        handle = os.open(root, _DIRECTORY_FLAGS)
        try:
            for directory in directories:
                try:
                    inner = os.open(directory, _DIRECTORY_FLAGS, dir_fd=handle)
                except (FileNotFoundError, NotADirectoryError):
                    if _is_link(directory, handle):
                        raise LinkInPathError(errno.ELOOP, "a directory on the way is a symbolic link", path) from None
                    return False  # nothing there, or a file where a directory would be: no such file to delete
                except OSError as error:
                    if error.errno == errno.ELOOP:
                        raise LinkInPathError(errno.ELOOP, "a directory on the way is a symbolic link", path) from None
                    raise
                os.close(handle)
                handle = inner
            try:
                os.unlink(name, dir_fd=handle)
            except FileNotFoundError:
                return False
            return True
        finally:
            os.close(handle)

    def copy_file(self, source: str, dest: str) -> None:
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(source, dest)


def open_local_store(url: str, storage_options: dict[str, Any]) -> OpenedStore[LocalStore]:
    """The local store and the absolute path of a plain path or ``file://``/``local://`` URL."""
    _, path = fsspec.core.url_to_fs(url, **storage_options)  # fsspec's rules: relative paths, file:/x, local://
    return OpenedStore(LocalStore(fsspec.filesystem("file", auto_mkdir=True)), path.rstrip("/") or "/")


LOCAL_BINDING = StoreBinding(
    name="local",
    schemes=("file", "local"),
    opener=open_local_store,
    capabilities=LocalStore.capabilities,
)
"""Local disk: plain paths, ``file://`` and ``local://``."""
