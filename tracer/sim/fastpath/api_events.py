"""The loop fast path's side of the kernel API's events: operations and allocations while recording, matched
calls that fit no recorded continuation, scopes entered and left, tiles released.

:class:`ApiEvents` is a part of :class:`~tracer.sim.fastpath.controller.FastPath` (its base class): the controller
owns the segments and the modes, this module what each API event does in them.  While recording, the kernel
context's operation and allocation methods are replaced by generated ones that call :meth:`ApiEvents.record_call`
(:meth:`ApiEvents._make_record_methods`); while matching, by the generated matchers of
:mod:`tracer.sim.fastpath.match`, which call :meth:`ApiEvents.mismatch` when nothing fits.
"""

from __future__ import annotations

import inspect
from typing import Any

from tracer.sim.fastpath import match
from tracer.sim.fastpath.record import Unrecordable
from tracer.sim.fastpath.trie import ENTER, EXIT
from tracer.sim.memory import Tile

#: Recordings longer than this are dropped (their generated code would be too long to be worth compiling).
MAX_SEGMENT = 8192
#: The modes a segment runs in (:mod:`tracer.sim.fastpath.controller`).
GENERAL, RECORD, MATCH = range(3)


class ApiEvents:
    """The API events of :class:`~tracer.sim.fastpath.controller.FastPath` (see the module docstring)."""

    def _make_record_methods(self, cls: Any) -> dict[str, Any]:
        methods = match.forwarders(cls, (*match.OPS, *match.ALLOCS), self, lambda _name: "record_call")
        self._real = _real_methods(cls)
        return methods

    def _call_real(self, name: str, frame: Any, args: tuple[Any, ...]) -> Any:
        fn, npos, kw = self._real[name]
        ctx = self.ctx
        ctx.cl_frame = frame
        try:
            return fn(ctx, *args[:npos], **dict(zip(kw, args[npos:], strict=True)))
        finally:
            ctx.cl_frame = None

    # -- events called from the kernel API -------------------------------------------------------------------------
    def on_free(self, tile: Tile) -> bool:
        """A tile is released outside matched segments (those install their own ``release_tile``); True when
        the fast path did the release."""
        try:
            if self.mode == RECORD:
                rec = self.rec
                try:
                    rec.free(tile)
                except Unrecordable:
                    self._drop_recording()
                    return False
                self.ctx.release_general(tile)  # inside the event: the comparisons it makes are its guards
                if self.rec is rec:
                    rec.end()
                return True
        except Exception as exc:  # a release runs in __del__, where errors are swallowed: report later
            self.error = exc
            self._disable()
        return False

    def scope_enter(self, scope: Any) -> None:
        """``with nc.layer(...)`` / ``nc.operator(...)`` entered."""
        if self.mode == MATCH and self._scope_match(ENTER, scope):
            return
        if self.mode == RECORD:
            self.rec.scope(ENTER, scope.category, scope.name)
            self.rec.simple(ENTER, (scope.category,))
        self.ctx.scope_open(scope)

    def scope_exit(self, scope: Any) -> None:
        """A scope left."""
        if self.mode == MATCH and self._scope_match(EXIT, scope):
            return
        if self.mode == RECORD:
            try:
                self.rec.scope(EXIT, scope.category, scope.name)
            except Unrecordable:
                self._drop_recording()
            else:
                self.rec.simple(EXIT, (scope.category,))
        row = self.ctx.scope_close(scope)
        if row is not None:
            self.core.span(row)

    def _scope_match(self, kind: int, scope: Any) -> bool:
        """A scope entered or left while matching: the recorded continuation with this event and category, and the
        event's live part (no generated check: the category is the only argument a scope event is checked by)."""
        m = self.m
        category = scope.category
        node = m.node.first
        while node is not None:
            if node.kind == kind and node.spec[0] == category:
                m.node = node
                if kind == ENTER:
                    m.names[("S", m.nsc)] = scope.name
                    m.nsc += 1
                    self.ctx.scope_open(scope)
                else:
                    self.ctx.scope_close(scope, row=False)
                m.scopes.append((kind, m.n, scope))
                return True
            node = node.sib
        self._fallback()
        return False

    def free_mismatch(self, tile: Tile) -> None:
        """A matched-mode release that fits no recorded continuation: fall back, then release generally."""
        try:
            self._fallback()
        except Exception as exc:  # a release runs in __del__, where errors are swallowed: report later
            self.error = exc
            self._disable()
            return
        from tracer.sim.context import KernelContext

        KernelContext.release_tile(self.ctx, tile)

    def record_call(self, name: str, frame: Any, args: tuple[Any, ...]) -> Any:
        """An API call while recording: note its spec, run the general path, close the event."""
        rec = self.rec
        if name in match.ALLOCS:
            tile = self._call_real(name, frame, args)
            if self.rec is rec and rec is not None:
                try:
                    rec.alloc(frame, match.ALLOCS[name], args, tile)
                except Unrecordable:
                    self._drop_recording()
            return tile
        try:
            rec.op(name, frame, args)
        except Unrecordable:
            self._drop_recording()
            return self._call_real(name, frame, args)
        try:
            return self._call_real(name, frame, args)
        except BaseException:
            self._drop_recording()
            raise
        finally:
            if self.rec is rec:
                rec.end()
                if len(rec.positions) > MAX_SEGMENT:
                    self._drop_recording()

    def mismatch(self, name: str, frame: Any, args: tuple[Any, ...]) -> Any:
        """A matched-mode API call that fits no recorded continuation."""
        self._fallback()
        if self.mode == RECORD:
            return self.record_call(name, frame, args)
        return self._call_real(name, frame, args)


#: Per kernel-context class: each API method with its positional parameter count and keyword-only names.
_REAL: dict[type, dict[str, tuple[Any, int, list[str]]]] = {}


def _real_methods(cls: type) -> dict[str, tuple[Any, int, list[str]]]:
    """``cls``'s API methods as :meth:`ApiEvents._call_real` calls them, worked out once per class (again when a
    method was replaced)."""
    real = _REAL.get(cls)
    if real is None or any(getattr(cls, name) is not fn for name, (fn, _n, _k) in real.items()):
        real = {}
        for name in (*match.OPS, *match.ALLOCS):
            fn = getattr(cls, name)
            params = list(inspect.signature(fn).parameters.values())[1:]
            npos = sum(p.kind is not inspect.Parameter.KEYWORD_ONLY for p in params)
            kw = [p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]
            real[name] = (fn, npos, kw)
        _REAL[cls] = real
    return real
