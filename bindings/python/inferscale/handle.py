"""The lifetime of a library handle, written once for every class that owns
one (Store, Model, Tokenizer, Embedder, Engine, Searcher, Injector)."""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any, Callable, Dict, Iterator, Optional

from ._ffi import ffi, lib
from .errors import InvalidArgumentError

__all__ = ["Handle"]


class Handle:
    """Owns one C handle: ``close()`` (or the end of a ``with`` block) frees
    it, as does garbage collection (``ffi.gc`` on the pointer, so a handle
    freed by the collector is freed exactly once too).

    The locking rule. Every call into the library runs inside ``_use()``,
    which, under ``_lock``, checks that the handle is open, takes its pointer
    and counts the call. ``close()``, under the same lock, takes the pointer
    away (a call starting after that raises InvalidArgumentError naming the
    object), waits until the calls in flight have returned, closes the
    handles that depend on this one (``_dependents``), and frees the pointer
    once, outside the lock. So a close racing a call on another thread never
    frees under the call and never frees twice, and when close() returns the
    handle is freed (a store's file is unlocked). A second close, or one on
    another thread at the same time, returns once the handle is freed. A
    close from inside a call on the same handle and thread (a progress
    callback) would wait for itself: it raises InvalidArgumentError instead.
    The free runs outside the lock because it can be slow (a store's flush
    and fsync) and nothing can reach the pointer any more; holding the lock
    through it would only block threads asking ``closed`` or failing to
    start a call.

    Classes whose C object runs one call at a time (Engine) set
    ``_exclusive``: ``_use()`` then also holds a per-handle call lock, taken
    before the handle is checked, so calls queue behind each other and a
    close lets the one running finish and the queued ones fail cleanly. A
    handle made on another (a model's engines and tokenizer, a store's
    searchers and injectors) names it ``_owner``: its calls also count as
    calls on the owner, so the owner cannot be freed under them, and the
    owner's close closes it first. One whose C object the owner frees (the
    model's tokenizer) is adopted with ``free=None``.
    """

    _exclusive = False

    def _init_handle(self, owner: Optional["Handle"] = None) -> None:
        self._ptr: Any = None
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._users: Dict[int, int] = {}  # thread ident -> calls in flight on it
        self._owns = False  # whether close frees the pointer
        self._done = True  # no close to wait for: nothing adopted, or closed
        self._call_lock = threading.RLock() if self._exclusive else None
        self._owner = owner
        self._dependents: "weakref.WeakSet[Handle]" = weakref.WeakSet()
        if owner is not None:
            owner._dependents.add(self)

    def _adopt(self, ptr: Any, free: Optional[Callable[[Any], None]], keep: Any = None) -> Any:
        """Takes ownership of ptr, freed by free(ptr) (None: not ours). keep
        (the handle of the C object ptr uses) lives until ptr is freed, so
        that the collector frees them in the right order whatever order it
        finds them in."""
        self._owns = free is not None
        if not self._owns:
            self._ptr = ptr
        elif keep is None:
            self._ptr = ffi.gc(ptr, free)
        else:
            self._ptr = ffi.gc(ptr, lambda p, _keep=keep: free(p))
        self._done = False
        return self._ptr

    def _what(self) -> str:
        """The object as error messages name it."""
        return type(self).__name__

    @property
    def closed(self) -> bool:
        return self._ptr is None

    @contextlib.contextmanager
    def _use(self) -> Iterator[Any]:
        """The pointer, for one call into the library (see the class docstring)."""
        call_lock = self._call_lock
        if call_lock is not None:
            call_lock.acquire()
        try:
            tid = threading.get_ident()
            with self._lock:
                if self._ptr is None:
                    raise InvalidArgumentError(
                        f"{self._what()} is closed: make a new {type(self).__name__} to go on", lib.INFS_EINVAL)
                ptr = self._ptr
                self._users[tid] = self._users.get(tid, 0) + 1
            try:
                if self._owner is not None:
                    with self._owner._use():
                        yield ptr
                else:
                    yield ptr
            finally:
                with self._lock:
                    n = self._users.pop(tid) - 1
                    if n:
                        self._users[tid] = n
                    elif not self._users:
                        self._idle.notify_all()
        finally:
            if call_lock is not None:
                call_lock.release()

    def close(self) -> None:
        """Frees the handle once no call is running on it, after closing the
        handles made on it. Idempotent; safe from any thread."""
        tid = threading.get_ident()
        with self._lock:
            ptr, inside = self._ptr, bool(self._users.get(tid))
            if ptr is None:
                # Closed, or closing on another thread: wait for that to end,
                # unless this thread is inside a call the closer waits for.
                while not self._done and not inside:
                    self._idle.wait()
                return
            if inside:
                raise InvalidArgumentError(
                    f"{self._what()}.close() called from inside a call on it (a callback?): "
                    "close it after that call returns", lib.INFS_EINVAL)
            self._ptr = None
            while self._users:
                self._idle.wait()
        try:
            for d in list(self._dependents):
                d.close()
        finally:
            if self._owns:
                ffi.release(ptr)  # runs the destructor now and disarms the collector's
            with self._lock:
                self._done = True
                self._idle.notify_all()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
