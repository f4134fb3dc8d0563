"""A real SMTP server on a local port, for the tests of the owners' e-mail notice.

It speaks enough of RFC 5321 for Python's `smtplib` without TLS (EHLO/HELO, MAIL, RCPT, DATA,
RSET, NOOP, QUIT), keeps every message it accepted as an `email.message.EmailMessage`, and
with `refuse` set answers MAIL FROM with 554, as a server that will not relay does.
"""

from __future__ import annotations

import asyncio
import email
from email.message import EmailMessage
from email.policy import default as default_policy
from types import TracebackType


class FakeSmtpServer:
    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.refuse = False
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> FakeSmtpServer:
        self._server = await asyncio.start_server(self._session, "127.0.0.1", 0)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        def say(line: str) -> None:
            writer.write(f"{line}\r\n".encode())

        say("220 fake-smtp ready")
        try:
            while line := (await reader.readline()).decode(errors="replace").strip():
                verb = line.split(" ", 1)[0].upper()
                if verb == "QUIT":
                    say("221 bye")
                    break
                if verb == "DATA":
                    say("354 go ahead")
                    await writer.drain()
                    self.messages.append(await _read_data(reader))
                    say("250 queued")
                else:
                    say(self._answer(verb))
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            await writer.drain()
            writer.close()

    def _answer(self, verb: str) -> str:
        if verb == "EHLO":
            return "250 fake-smtp"
        if verb == "MAIL" and self.refuse:
            return "554 relay refused"
        if verb in ("HELO", "MAIL", "RCPT", "RSET", "NOOP"):
            return "250 ok"
        return "502 not implemented"


async def _read_data(reader: asyncio.StreamReader) -> EmailMessage:
    lines: list[bytes] = []
    while (line := await reader.readline()) not in (b".\r\n", b".\n", b""):
        lines.append(line[1:] if line.startswith(b"..") else line)
    parsed = email.message_from_bytes(b"".join(lines), policy=default_policy)
    assert isinstance(parsed, EmailMessage)
    return parsed
