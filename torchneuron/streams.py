"""Streams and events of ``torch.neuron``, as ``torch.cuda.Stream``/``Event``.

A stream is an in-order queue on one NeuronCore, served by its own worker in
the runtime; work is asynchronous until a sync point (host copy, ``.item()``,
``synchronize()``, an event wait).
"""

from __future__ import annotations

from typing import Any

import torch

from . import _C
from ._utils import _get_device_index


class Stream(torch.Stream):
    """A new stream from the NeuronCore's pool (``priority`` < 0 is high)."""

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs):
        if kwargs:  # rebuilt from (stream_id, device_index, device_type)
            return super().__new__(cls, **kwargs)
        idx = _get_device_index(device, optional=True)
        return super().__new__(cls, device=torch.device("neuron", idx), priority=priority)

    @property
    def priority(self) -> int:
        """0 (normal) or -1 (high), as given at creation."""
        return _C._stream_priority(self.stream_id)

    def wait_event(self, event: Event) -> None:
        event.wait(self)

    def wait_stream(self, stream: torch.Stream) -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event: Event | None = None) -> Event:
        event = Event() if event is None else event
        event.record(self)
        return event

    def __repr__(self) -> str:
        return f"<torch.neuron.Stream device=neuron:{self.device_index} stream_id={self.stream_id}>"


def _wrap(s: torch.Stream) -> Stream:
    return Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)


class Event(torch.Event):
    """A marker in a stream; ``enable_timing`` allows ``elapsed_time`` (ms)."""

    def __new__(
        cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ):
        return super().__new__(
            cls,
            device="neuron",
            enable_timing=enable_timing,
            blocking=blocking,
            interprocess=interprocess,
        )

    def record(self, stream: torch.Stream | None = None) -> None:
        super().record(current_stream() if stream is None else stream)

    def wait(self, stream: torch.Stream | None = None) -> None:
        super().wait(current_stream() if stream is None else stream)

    def elapsed_time(self, end_event: torch.Event) -> float:
        """Milliseconds from this event to ``end_event`` (both recorded and completed)."""
        # torch.Event.elapsed_time accepts only the exact torch.Event type, not
        # this subclass; the binding reads the c10::Event of any torch.Event.
        return _C._event_elapsed_time(self, end_event)


def current_stream(device: Any = None) -> Stream:
    idx = _get_device_index(device, optional=True)
    return _wrap(torch.accelerator.current_stream(idx))


def default_stream(device: Any = None) -> Stream:
    idx = _get_device_index(device, optional=True)
    return Stream(stream_id=0, device_index=idx, device_type=current_stream(idx).device_type)


def set_stream(stream: torch.Stream) -> None:
    torch.accelerator.set_stream(stream)


class StreamContext:
    """Context manager that makes ``stream`` the current stream of its device inside
    the block (None: does nothing), as ``torch.cuda.StreamContext``. Re-entrant uses
    nest; the previous streams are restored on exit."""

    def __init__(self, stream: torch.Stream | None):
        self.stream = stream
        self._saved: list = []

    def __enter__(self):
        s = self.stream
        if s is None:
            return s
        # set_stream also makes s's device current; restore both afterwards (as
        # torch.cuda.stream does): the stream of s's device, then the caller's
        # current stream, which brings the caller's device back.
        src_prev = torch.accelerator.current_stream()
        dst_prev = torch.accelerator.current_stream(s.device_index)
        self._saved.append((src_prev, dst_prev))
        torch.accelerator.set_stream(s)
        return s

    def __exit__(self, *exc):
        if self.stream is None:
            return False
        src_prev, dst_prev = self._saved.pop()
        torch.accelerator.set_stream(dst_prev)
        torch.accelerator.set_stream(src_prev)
        return False


def stream(s: torch.Stream | None) -> StreamContext:
    """Make ``s`` the current stream of its device inside the block."""
    return StreamContext(s)
