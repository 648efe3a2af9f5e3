"""k, the sequential over random read speed of a storage directory (Garaph section 4.2).

Section 4.2 prices notify-pull at ``2 f rho`` pulls, with rho = 1 when the
graph is in host memory and rho = k otherwise: "Let k (k > 1) be the rate of
speeds between sequential read and random read (e.g., k ~ 10 in SSD)".  A
pull reads a page's edges sequentially; notify-pull reads the in-edges of
scattered vertices, small random reads.

:func:`measure_read_ratio` measures k of one directory once: it writes a
temporary file of ``config.READ_RATIO_FILE_BYTES`` (random bytes, so that a
compressing file system cannot shortcut the reads), reads it sequentially in
blocks of ``config.BLOCK_BYTES`` (the best of two passes), then reads
``config.READ_RATIO_RANDOM_BYTES`` at random aligned offsets one after the
other (queue depth one, at most ``config.READ_RATIO_RANDOM_READS`` reads or
``config.READ_RATIO_RANDOM_SECONDS``), both with ``O_DIRECT`` where the file
system allows it and otherwise after evicting the file from the page cache
(with read-ahead off for the random reads).  k is the ratio of the two
speeds, at least 1.  The whole takes a few hundred milliseconds on an SSD.

The result is cached per directory (its real path and device number) in
``read_ratio.json`` of garaphpy's cache directory (``$GARAPHPY_CACHE``, else
``$XDG_CACHE_HOME/garaphpy`` or ``~/.cache/garaphpy``, as for stores); an
unreadable or unwritable cache only costs a new measurement.
``config.READ_RATIO`` or the ``k`` argument of :func:`storage_read_ratio` fix k
instead.

:func:`disk_read_speed` is the sequential speed of a store's directories
together, for the build's choice of page format and the page reader's
read-ahead (:mod:`garaphpy.storage.decisions`): a directory on a device
already measured takes that device's speed, so a new directory costs no new
measurement, and directories on one device share its speed;
``config.DISK_READ_BYTES_PER_SECOND`` fixes it instead.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .. import config
from ..errors import ConfigError, StoreError
from ..paths import cache_directory
from .layout import align
from .page_io import aligned_empty, open_for_streaming

__all__ = ["ReadSpeeds", "check_read_ratio", "disk_read_speed", "measure_read_ratio",
           "measure_read_speeds", "storage_read_ratio"]

CACHE_FILE = "read_ratio.json"


@dataclass(frozen=True)
class ReadSpeeds:
    """Read speeds of one directory.

    Attributes
    ----------
    sequential_bytes_per_s, random_bytes_per_s : float
    direct : bool
        Measured with ``O_DIRECT`` (else after evicting the page cache).
    file_bytes, random_read_bytes : int
        Size of the file measured and of one random read.
    measured : str
        When (local time, ISO 8601).
    """

    sequential_bytes_per_s: float
    random_bytes_per_s: float
    direct: bool
    file_bytes: int
    random_read_bytes: int
    measured: str

    @property
    def ratio(self) -> float:
        """k = sequential / random speed, at least 1."""
        return max(1.0, self.sequential_bytes_per_s / self.random_bytes_per_s)


# -------------------------------------------------------------------- the cache --
def _cache_path() -> Path:
    return cache_directory() / CACHE_FILE


def _cache_key(directory: Path) -> tuple[str, int]:
    return str(directory.resolve()), directory.stat().st_dev


def _load_cache() -> dict:
    try:
        data = json.loads(_cache_path().read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _cached(directory: Path) -> ReadSpeeds | None:
    key, device = _cache_key(directory)
    entry = _load_cache().get(key)
    if not isinstance(entry, dict) or entry.get("device") != device:
        return None
    try:
        return ReadSpeeds(**{k: v for k, v in entry.items() if k != "device"})
    except TypeError:
        return None


def _cached_on_device(directory: Path) -> ReadSpeeds | None:
    """A cached measurement of ``directory`` itself, else of any directory on its device."""
    own = _cached(directory)
    if own is not None:
        return own
    device = directory.stat().st_dev
    for entry in _load_cache().values():
        if isinstance(entry, dict) and entry.get("device") == device:
            try:
                return ReadSpeeds(**{k: v for k, v in entry.items() if k != "device"})
            except TypeError:
                continue
    return None


def _store_in_cache(directory: Path, speeds: ReadSpeeds) -> None:
    """Record ``speeds`` (best effort: an unwritable cache is ignored)."""
    key, device = _cache_key(directory)
    try:
        path = _cache_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        data = _load_cache()
        data[key] = {**asdict(speeds), "device": device}
        fd, temporary = tempfile.mkstemp(prefix=f".{CACHE_FILE}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump(data, handle, indent=1, sort_keys=True)
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError:
        pass


# ------------------------------------------------------------------ measuring --
def _write_test_file(directory: Path, nbytes: int) -> Path:
    try:
        fd, name = tempfile.mkstemp(prefix=".garaphpy-read-ratio-", dir=directory)
    except OSError as error:
        raise StoreError(f"{directory}: cannot write a file to measure its read speeds "
                         f"({error.strerror}); set config.READ_RATIO or pass k") from None
    try:
        chunk = np.random.default_rng().integers(0, 256, min(nbytes, 8 << 20), np.uint8)
        with os.fdopen(fd, "wb", buffering=0) as handle:
            written = 0
            while written < nbytes:
                written += handle.write(chunk[:nbytes - written])
            os.fsync(handle.fileno())
            os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    except BaseException:
        os.unlink(name)
        raise
    return Path(name)


def _evict(fd: int, direct: bool) -> None:
    if not direct:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def _sequential(path: Path, nbytes: int, direct: bool | None) -> tuple[float, bool]:
    fd, direct = open_for_streaming(path, direct)
    try:
        chunk = config.BLOCK_BYTES
        buffer = aligned_empty(chunk)
        best = float("inf")
        for _ in range(2):
            _evict(fd, direct)
            started = time.perf_counter()
            offset = 0
            while offset < nbytes:
                count = os.preadv(fd, [buffer[:min(chunk, align(nbytes - offset, 4096))]],
                                  offset)
                if count <= 0:
                    break
                offset += count
            best = min(best, time.perf_counter() - started)
        return nbytes / max(best, 1e-9), direct
    finally:
        os.close(fd)


def _random(path: Path, nbytes: int, direct: bool) -> float:
    size = config.READ_RATIO_RANDOM_BYTES
    fd, direct = open_for_streaming(path, direct)
    try:
        _evict(fd, direct)
        if not direct:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        buffer = aligned_empty(size)
        offsets = np.random.default_rng().integers(0, max(nbytes // size, 1),
                                                   config.READ_RATIO_RANDOM_READS) * size
        deadline = time.perf_counter() + config.READ_RATIO_RANDOM_SECONDS
        started = time.perf_counter()
        done = 0
        for offset in offsets.tolist():
            os.preadv(fd, [buffer], offset)
            done += 1
            if time.perf_counter() > deadline:
                break
        return done * size / max(time.perf_counter() - started, 1e-9)
    finally:
        os.close(fd)


def measure_read_speeds(directory, *, refresh: bool = False,
                        file_bytes: int | None = None) -> ReadSpeeds:
    """Sequential and random read speed of ``directory``, measured once and cached.

    Parameters
    ----------
    directory : str or os.PathLike
        An existing, writable directory (a temporary file is written there
        and removed).
    refresh : bool
        Measure again even if a cached result exists.
    file_bytes : int, optional
        Size of the temporary file; default ``config.READ_RATIO_FILE_BYTES``.

    Raises
    ------
    garaphpy.errors.StoreError
        The directory is missing or not writable.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise StoreError(f"{directory}: no such directory to measure read speeds of")
    if not refresh:
        cached = _cached(directory)
        if cached is not None:
            return cached
    nbytes = config.READ_RATIO_FILE_BYTES if file_bytes is None else file_bytes
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) \
            or nbytes < config.READ_RATIO_RANDOM_BYTES:
        raise ConfigError(f"file_bytes={nbytes!r}: expected at least "
                          f"{config.READ_RATIO_RANDOM_BYTES} bytes")
    nbytes = align(nbytes, config.BLOCK_ALIGNMENT)
    path = _write_test_file(directory, nbytes)
    try:
        try:
            sequential, direct = _sequential(path, nbytes, None)
        except OSError as error:  # O_DIRECT accepted at open, refused at read
            if error.errno != errno.EINVAL:
                raise
            sequential, direct = _sequential(path, nbytes, False)
        random = _random(path, nbytes, direct)
    finally:
        path.unlink()
    speeds = ReadSpeeds(sequential, random, direct, nbytes, config.READ_RATIO_RANDOM_BYTES,
                        time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    _store_in_cache(directory, speeds)
    return speeds


def measure_read_ratio(directory, *, refresh: bool = False,
                       file_bytes: int | None = None) -> float:
    """k of ``directory``: sequential over random read speed, >= 1.

    Measured once per directory and cached (see the module); parameters as
    for :func:`measure_read_speeds`.
    """
    return measure_read_speeds(directory, refresh=refresh, file_bytes=file_bytes).ratio


def check_read_ratio(value, name: str = "k") -> float:
    """``value`` as k (a number >= 1); a ConfigError naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 1:
        raise ConfigError(f"{name}={value!r}: expected a number >= 1")
    return float(value)


def storage_read_ratio(directories, k: float | None = None) -> float:
    """rho for pages read from ``directories`` (Garaph section 4.2).

    Parameters
    ----------
    directories : str, os.PathLike or sequence of them
        The storage directories pages come from (``store.storage_dirs``).
    k : float, optional
        A fixed k (>= 1); else ``config.READ_RATIO`` when set; else measured.

    Returns
    -------
    float
        With several directories, blocks are spread evenly over them, so a
        byte costs the mean of the directories' times per byte:
        ``k = mean(1 / random_i) / mean(1 / sequential_i)``.
    """
    fixed = k if k is not None else config.READ_RATIO
    if fixed is not None:
        return check_read_ratio(fixed, "k" if k is not None else "config.READ_RATIO")
    if isinstance(directories, (str, os.PathLike)):
        directories = [directories]
    speeds = [measure_read_speeds(d) for d in directories]
    if not speeds:
        raise ConfigError("storage_read_ratio: no storage directory given")
    random = np.mean([1.0 / s.random_bytes_per_s for s in speeds])
    sequential = np.mean([1.0 / s.sequential_bytes_per_s for s in speeds])
    return max(1.0, float(random / sequential))


def disk_read_speed(directories) -> float:
    """Sequential read speed, bytes a second, of ``directories`` read together.

    A page's data blocks are spread evenly over the ``n`` directories and
    read in parallel, a reader per directory; directories on one device
    share its speed.  A device ``d`` holding ``n_d`` of the directories
    reads ``n_d / n`` of the bytes at its speed ``s_d``, so the slowest
    device bounds the whole: ``min_d(n * s_d / n_d)`` (``n`` times the
    slowest where each directory has a device of its own, the device's speed
    where they share one).  ``config.DISK_READ_BYTES_PER_SECOND`` fixes it;
    otherwise a device's speed is a cached measurement of the directory or
    of another on its device (:func:`measure_read_speeds` where there is
    none), and ``config.ASSUMED_DISK_READ_BYTES_PER_SECOND`` where a
    directory cannot be measured (counted as a device of its own).

    Parameters
    ----------
    directories : str, os.PathLike or sequence of them
        Existing directories.
    """
    fixed = config.DISK_READ_BYTES_PER_SECOND
    if fixed is not None:
        if isinstance(fixed, bool) or not isinstance(fixed, (int, float)) or not fixed > 0:
            raise ConfigError(f"config.DISK_READ_BYTES_PER_SECOND={fixed!r}: expected a "
                              "positive number or None")
        return float(fixed)
    if isinstance(directories, (str, os.PathLike)):
        directories = [directories]
    speed_of_device: dict = {}
    directories_on_device: dict = {}
    for directory in map(Path, directories):
        try:
            device = directory.stat().st_dev
            if device not in speed_of_device:
                measured = _cached_on_device(directory) or measure_read_speeds(directory)
                speed_of_device[device] = measured.sequential_bytes_per_s
        except (OSError, StoreError):
            device = ("unmeasured", str(directory))
            speed_of_device[device] = config.ASSUMED_DISK_READ_BYTES_PER_SECOND
        directories_on_device[device] = directories_on_device.get(device, 0) + 1
    count = sum(directories_on_device.values())
    if not count:
        raise ConfigError("disk_read_speed: no storage directory given")
    return min(count * speed_of_device[device] / shared
               for device, shared in directories_on_device.items())
