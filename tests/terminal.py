"""``streamql shell`` on a real pseudo-terminal: keys typed into it, what it shows read back
until a prompt (or other text) appears. A deadline only guards against a hung shell."""
from __future__ import annotations

import fcntl
import os
import re
import select
import subprocess
import termios

from .support import CLI

PROMPT, CONTINUATION = "streamql> ", "       > "
#: escape sequences a terminal interprets (readline's bracketed paste, cursor moves)
ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|\r")
UP, TAB, CTRL_C, CTRL_D = "\x1b[A", "\t", "\x03", "\x04"


def _controlling_terminal() -> None:
    # the pty is the shell's controlling terminal, so Ctrl-C typed into it is a SIGINT
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    def __init__(self, env: dict, *args: str):
        self.fd, child = os.openpty()
        self.proc = subprocess.Popen([*CLI, *args], stdin=child, stdout=child, stderr=child, env=env,
                                     preexec_fn=_controlling_terminal, close_fds=True)
        os.close(child)
        self.seen = ""

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def until(self, *texts: str, deadline: float = 60.0) -> str:
        """What the terminal shows before the next of ``texts`` (default: a prompt), which
        it takes; AssertionError with all it showed if the shell shows none of them."""
        import time

        texts = texts or (PROMPT, CONTINUATION)
        end = time.monotonic() + deadline
        while not any(t in self.seen for t in texts):
            # poll, not select: a long test run holds more than 1,024 descriptors by now
            poller = select.poll()
            poller.register(self.fd, select.POLLIN)
            ready = poller.poll(max(0.0, end - time.monotonic()) * 1000)
            chunk = b""
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:  # the shell left: the terminal is closed
                    chunk = b""
            if not chunk:
                raise AssertionError(f"the shell never showed {texts!r}; it showed:\n{self.seen}")
            self.seen += ESCAPES.sub("", chunk.decode(errors="replace"))
        first = min((self.seen.find(t), t) for t in texts if t in self.seen)[1]
        shown, _, self.seen = self.seen.partition(first)
        return shown

    def run(self, *lines: str) -> str:
        """Type each of ``lines`` and Enter: what the last shows before the next prompt."""
        for line in lines:
            self.type(line + "\n")
            shown = self.until()
        return shown

    def leave(self, keys: str = CTRL_D) -> int:
        self.type(keys)
        code = self.proc.wait(timeout=60)
        os.close(self.fd)
        return code
