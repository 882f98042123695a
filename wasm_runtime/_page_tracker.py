"""Which pages of a kept instance's memory a call wrote, from the kernel, and putting them back.

The lean engine keeps an instance between calls and, after each, makes its
linear memory byte-identical to the primed image again. Comparing 44 MiB per
call would cost milliseconds; the kernel knows which pages were written:

* a ``userfaultfd`` registered on the memory in asynchronous write-protect
  mode (``UFFD_FEATURE_WP_ASYNC``, Linux 6.7; ``WP_UNPOPULATED`` so that
  pages never touched are tracked too) write-protects every page; the first
  write to a protected page is resolved by the kernel itself (no thread of
  ours wakes up), which clears the page's protection;
* the ``PAGEMAP_SCAN`` ioctl on ``/proc/self/pagemap`` (Linux 6.7) lists the
  pages whose protection is cleared, that is, the pages written since they
  were last protected, as ranges, in one call.

After a call the host lists the written ranges, copies the primed image's
bytes over them and write-protects them again, except the pages nearly every
call writes (``PageTracker.restore``). A page written by the guest, by the host
on the guest's behalf (WASI results) or by the kernel is caught alike: write
protection is a property of the page-table entry, whoever writes.

Pure ctypes against the C library: no compiled code of our own. Where the
kernel or a container's seccomp policy refuses any of it, ``PageTracker``
raises ``TrackingUnavailable`` with the reason, and the lean engine falls back
to a fresh instance per call.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["PageTracker", "TrackingUnavailable", "tracking_problem"]

_PAGE = 4096
_SYS_USERFAULTFD = {"x86_64": 323, "aarch64": 282}
_UFFD_API = 0xAA
_UFFDIO_API = 0xC018AA3F
_UFFDIO_REGISTER = 0xC020AA00
_UFFDIO_WRITEPROTECT = 0xC018AA06
_UFFDIO_REGISTER_MODE_WP = 1 << 1
_UFFDIO_WRITEPROTECT_MODE_WP = 1 << 0
_UFFD_USER_MODE_ONLY = 1
_FEATURE_WP_UNPOPULATED = 1 << 13
_FEATURE_WP_ASYNC = 1 << 15
_PAGEMAP_SCAN = 0xC0606610
_PM_SCAN_WP_MATCHING = 1 << 0
_PM_SCAN_CHECK_WPASYNC = 1 << 1
_PAGE_IS_WRITTEN = 1 << 1
_MADV_NOHUGEPAGE = 15
#: Ranges one scan returns at most; a call that wrote more ranges is scanned again from where it stopped.
_RANGES = 4096


class TrackingUnavailable(OSError):
    """The kernel (or a seccomp policy) refuses write tracking here; the message says which step and why."""


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
    libc.ioctl.restype = ctypes.c_int
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return libc


_LIBC = _libc() if sys.platform.startswith("linux") else None


def _check(result: int, step: str) -> int:
    if result < 0:
        error = ctypes.get_errno()
        raise TrackingUnavailable(error, f"{step}: {os.strerror(error)}")
    return result


class PageTracker:
    """Tracks the pages written in ``[base, base + size)`` of this process (a kept instance's memory).

    Args:
        base: The memory's host address (page-aligned).
        size: Its size in bytes (whole pages).

    Raises:
        TrackingUnavailable: The kernel or a seccomp policy refuses a step.
    """

    def __init__(self, base: int, size: int) -> None:
        if _LIBC is None or os.uname().machine not in _SYS_USERFAULTFD:
            raise TrackingUnavailable(0, "write tracking needs Linux on x86_64 or aarch64")
        if base % _PAGE or size % _PAGE:
            raise TrackingUnavailable(0, "the memory is not page-aligned")
        self.base, self.size = base, size
        self._uffd = -1
        self._pagemap = -1
        libc = _LIBC
        machine = os.uname().machine
        try:
            flags = os.O_CLOEXEC | os.O_NONBLOCK
            fd = libc.syscall(_SYS_USERFAULTFD[machine], flags | _UFFD_USER_MODE_ONLY)
            if fd < 0:  # kernels before 5.11 have no user-mode-only flag
                fd = libc.syscall(_SYS_USERFAULTFD[machine], flags)
            self._uffd = _check(fd, "userfaultfd")
            api = (ctypes.c_uint64 * 3)(_UFFD_API, _FEATURE_WP_UNPOPULATED | _FEATURE_WP_ASYNC, 0)
            _check(libc.ioctl(self._uffd, _UFFDIO_API, ctypes.byref(api)), "UFFDIO_API (asynchronous write-protect)")
            libc.madvise(base, size, _MADV_NOHUGEPAGE)  # a written huge page would be 2 MiB to copy back
            register = (ctypes.c_uint64 * 4)(base, size, _UFFDIO_REGISTER_MODE_WP, 0)
            _check(libc.ioctl(self._uffd, _UFFDIO_REGISTER, ctypes.byref(register)), "UFFDIO_REGISTER")
            protect = (ctypes.c_uint64 * 3)(base, size, _UFFDIO_WRITEPROTECT_MODE_WP)
            _check(libc.ioctl(self._uffd, _UFFDIO_WRITEPROTECT, ctypes.byref(protect)), "UFFDIO_WRITEPROTECT")
            self._pagemap = os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
        except (TrackingUnavailable, OSError) as exc:
            self.close()
            if isinstance(exc, TrackingUnavailable):
                raise
            raise TrackingUnavailable(exc.errno or 0, f"/proc/self/pagemap: {exc.strerror}") from None
        self._memory = memoryview((ctypes.c_char * size).from_address(base)).cast("B")
        self._image_at = 0
        self._image_view = self._memory
        self.hot_pages = 1024
        self._hot: set[int] = set()
        self._plan: list[tuple[int, int]] = []  # the hot set as (start, length) runs to copy
        self._last: set[int] = set()  # the cold pages the last call wrote
        self._quiet: list[int] | None = None  # the ranges a scan reports when only hot pages were written
        self._ranges = (ctypes.c_uint64 * (3 * _RANGES))()
        self._arg = (ctypes.c_uint64 * 12)()
        self._words = memoryview(self._ranges).cast("B").cast("Q")
        self.written()  # what the set-up itself wrote is not the first call's

    def _scan(self, protect: bool) -> list[int]:
        """Flat [start, end, start, end, ...] of the written ranges; ``protect`` write-protects them again."""
        found: list[int] = []
        start, end = self.base, self.base + self.size
        arg = self._arg
        while start < end:
            arg[0], arg[1] = 96, _PM_SCAN_CHECK_WPASYNC | (_PM_SCAN_WP_MATCHING if protect else 0)
            arg[2], arg[3], arg[4] = start, end, 0
            arg[5], arg[6], arg[7] = ctypes.addressof(self._ranges), _RANGES, 0
            arg[8], arg[9], arg[10], arg[11] = 0, _PAGE_IS_WRITTEN, 0, _PAGE_IS_WRITTEN
            count = _check(_LIBC.ioctl(self._pagemap, _PAGEMAP_SCAN, ctypes.byref(arg)), "PAGEMAP_SCAN")  # type: ignore[union-attr]
            flat = self._words[: 3 * count].tolist()
            pairs = [0] * (2 * count)
            pairs[0::2], pairs[1::2] = flat[0::3], flat[1::3]
            found += pairs
            if arg[4] <= start:
                raise TrackingUnavailable(0, "PAGEMAP_SCAN made no progress")
            start = arg[4]
        return found

    def written(self) -> list[int]:
        """The ranges written since the last ``restore`` (flat: start, end, start, end, ...), protected again."""
        return self._scan(protect=True)

    def restore(self, pristine: int) -> int:
        """Copy the bytes at ``pristine + offset`` over every page written since the last restore; the pages copied.

        ``pristine`` is the address of the primed image, mapped read-only in this process.

        A page written by two calls in a row joins the hot set (at most ``hot_pages``): what every call writes
        (the interpreter's stack, the allocator's hot pools, the input buffer). Hot pages are left writable and
        put back after every call, written or not: a writable page is always reported as written, so none is
        missed, and the next call writes to it without a fault (a write-protect fault costs about 0.7 us: 150
        us for the 220 pages of a trivial call). Every other page written is write-protected again. The hot set
        is copied in runs (a gap of one page is copied too, and joins it), a ``memmove`` each from this process:
        the kernel's scatter copy (``process_vm_writev``) pinned every page and cost twice as much, and wider
        gaps cost more in copying than they save in calls (measured: gaps of 1, 4, 16 and 64 pages gave 0.47,
        0.62, 0.64 and 0.90 ms a trivial call; no hot set at all 1.15 ms).

        Raises:
            TrackingUnavailable: A scan or the protection failed; the memory may then differ from the image.
        """
        ranges = self._scan(protect=False)
        base = self.base
        memory, image = self._memory, self._image(pristine)
        # Slices of two memoryviews: a copy each, without a ctypes call's argument conversion (half the time).
        if ranges == self._quiet:  # only the hot pages were written (they are always reported): the usual call
            for start, length in self._plan:
                memory[start - base : start - base + length] = image[start - base : start - base + length]
            return len(self._hot)
        written = _pages(ranges)
        cold = [page for page in written if page not in self._hot]
        for start, end in _runs(cold):
            memory[start - base : end - base] = image[start - base : end - base]
        for start, length in self._plan:
            memory[start - base : start - base + length] = image[start - base : start - base + length]
        repeated = [page for page in cold if page in self._last]
        self._last = set(cold)
        if repeated and len(self._hot) < self.hot_pages:
            self._hot.update(repeated[: self.hot_pages - len(self._hot)])
            self._plan = _plan(self._hot)
            self._hot.update(page for start, length in self._plan for page in range(start, start + length, _PAGE))
            cold = [page for page in cold if page not in self._hot]
        for start, end in _runs(cold):
            self._protect(start, end - start)
        if not cold:
            self._quiet = ranges  # what the scan reports when a call writes nothing but hot pages
        return len(written)

    def _image(self, pristine: int) -> memoryview:
        """The image at ``pristine`` as a view of ``size`` bytes (made once per address)."""
        if self._image_at != pristine:
            self._image_view = memoryview((ctypes.c_char * self.size).from_address(pristine)).cast("B")
            self._image_at = pristine
        return self._image_view

    def _protect(self, start: int, length: int) -> None:
        protect = (ctypes.c_uint64 * 3)(start, length, _UFFDIO_WRITEPROTECT_MODE_WP)
        _check(_LIBC.ioctl(self._uffd, _UFFDIO_WRITEPROTECT, ctypes.byref(protect)), "UFFDIO_WRITEPROTECT")  # type: ignore[union-attr]

    def close(self) -> None:
        """Stop tracking (the registration ends with the descriptor). Calling it again does nothing."""
        for name in ("_uffd", "_pagemap"):
            fd = getattr(self, name, -1)
            if fd >= 0:
                os.close(fd)
                setattr(self, name, -1)


def _pages(ranges: list[int]) -> list[int]:
    """The page addresses of flat ranges (start, end, ...)."""
    return [page for start, end in zip(ranges[0::2], ranges[1::2], strict=True) for page in range(start, end, _PAGE)]


def _plan(pages: set[int], gap: int = 1) -> list[tuple[int, int]]:
    """(start, length) runs covering ``pages``, joined across gaps of at most ``gap`` pages."""
    runs: list[list[int]] = []
    for page in sorted(pages):
        if runs and page - runs[-1][1] <= gap * _PAGE:
            runs[-1][1] = page + _PAGE
        else:
            runs.append([page, page + _PAGE])
    return [(start, end - start) for start, end in runs]


def _runs(pages: list[int]) -> list[tuple[int, int]]:
    """Sorted page addresses as (start, end) runs."""
    runs: list[tuple[int, int]] = []
    for page in pages:
        if runs and runs[-1][1] == page:
            runs[-1] = (runs[-1][0], page + _PAGE)
        else:
            runs.append((page, page + _PAGE))
    return runs


def tracking_problem() -> str | None:
    """None when write tracking works here (tried on a page of our own), else why not."""
    if _LIBC is None:
        return "write tracking needs Linux"
    import mmap

    area = mmap.mmap(-1, 4 * _PAGE)
    try:
        address = ctypes.addressof(ctypes.c_char.from_buffer(area))
        tracker = PageTracker(address, 4 * _PAGE)
        try:
            area[_PAGE] = 1
            if tracker.written() != [address + _PAGE, address + 2 * _PAGE]:
                return "PAGEMAP_SCAN did not report the page written"
        finally:
            tracker.close()
        return None
    except TrackingUnavailable as exc:
        return str(exc)
    finally:
        del address
        area.close()
