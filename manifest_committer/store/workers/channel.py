"""Messages between a job commit and its worker processes: pickles, each after its length, over a pipe each way.

Both ends are the same library in processes of the same user, joined by anonymous pipes nobody else holds, so
pickle is safe here; nothing read from a store or a manifest is ever unpickled.
"""

from __future__ import annotations

import pickle
import struct
import threading
from typing import IO

_LENGTH = struct.Struct("<Q")


class Channel:
    """Send and receive whole messages; ``send`` is safe from several threads, ``receive`` from one."""

    def __init__(self, reading: IO[bytes], writing: IO[bytes]) -> None:
        self._reading = reading
        self._writing = writing
        self._sending = threading.Lock()

    def send(self, message: object) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        with self._sending:
            self._writing.write(_LENGTH.pack(len(data)))
            self._writing.write(data)
            self._writing.flush()

    def receive(self) -> object:
        """The next message; ``EOFError`` once the other end has closed its side."""
        header = self._reading.read(_LENGTH.size)
        if len(header) < _LENGTH.size:
            raise EOFError("the other process closed its end of the channel")
        (length,) = _LENGTH.unpack(header)
        data = self._reading.read(length)
        if len(data) < length:
            raise EOFError("the other process closed its end of the channel in the middle of a message")
        return pickle.loads(data)
