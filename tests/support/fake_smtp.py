"""A fake mail server: plain SMTP on a loopback socket, collecting what it is given.

    async with FakeSmtpServer() as smtp:
        ...  # send to 127.0.0.1:smtp.port, no STARTTLS, no AUTH
        smtp.messages  # each accepted message, parsed (email.policy.default)

It speaks HELO/EHLO, MAIL FROM, RCPT TO, DATA (up to a line "."), RSET, NOOP and QUIT; with
`refuse = True` it answers 554 to MAIL FROM, as a server that will not take the mail.
"""

from __future__ import annotations

import asyncio
import email
import email.policy
from dataclasses import dataclass
from email.message import Message
from typing import Any

_MAX_LINE = 1024 * 1024


@dataclass(frozen=True)
class Envelope:
    mail_from: str
    rcpt_to: tuple[str, ...]


class FakeSmtpServer:
    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.envelopes: list[Envelope] = []
        self.raw: list[bytes] = []  # each message as received, dot-stuffing undone
        self.refuse = False
        self._server: asyncio.Server | None = None
        self._port = 0
        self._handlers: set[asyncio.Task[Any]] = set()

    async def __aenter__(self) -> FakeSmtpServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=_MAX_LINE)
        self._port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        await asyncio.sleep(0)  # let just-accepted connections reach their handler
        handlers = list(self._handlers)
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await self._server.wait_closed()

    @property
    def port(self) -> int:
        return self._port

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            await self._session(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client hung up or the server is stopping
        finally:
            self._handlers.discard(task)
            writer.close()

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async def reply(line: str) -> None:
            writer.write(line.encode("ascii") + b"\r\n")
            await writer.drain()

        await reply("220 fake.smtp ESMTP ready")
        mail_from: str | None = None
        rcpt_to: list[str] = []
        while True:
            raw = await reader.readline()
            if not raw:
                return
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            verb, _, rest = line.partition(" ")
            verb = verb.upper()
            if verb == "EHLO":
                await reply("250-fake.smtp greets you")
                await reply("250 8BITMIME")
            elif verb == "HELO":
                await reply("250 fake.smtp")
            elif verb == "MAIL":
                if self.refuse:
                    await reply("554 5.7.1 not taking mail from you")
                    continue
                mail_from, rcpt_to = _address(rest), []
                await reply("250 2.1.0 OK")
            elif verb == "RCPT":
                if mail_from is None:
                    await reply("503 5.5.1 MAIL first")
                    continue
                rcpt_to.append(_address(rest))
                await reply("250 2.1.5 OK")
            elif verb == "DATA":
                if mail_from is None or not rcpt_to:
                    await reply("503 5.5.1 MAIL and RCPT first")
                    continue
                await reply("354 end data with <CR><LF>.<CR><LF>")
                body = await _read_data(reader)
                self.raw.append(body)
                self.envelopes.append(Envelope(mail_from, tuple(rcpt_to)))
                self.messages.append(email.message_from_bytes(body, policy=email.policy.default))
                mail_from, rcpt_to = None, []
                await reply("250 2.0.0 queued")
            elif verb == "RSET":
                mail_from, rcpt_to = None, []
                await reply("250 2.0.0 OK")
            elif verb == "NOOP":
                await reply("250 2.0.0 OK")
            elif verb == "QUIT":
                await reply("221 2.0.0 bye")
                return
            else:
                await reply("502 5.5.2 command not implemented")


def _address(rest: str) -> str:
    """The address in "FROM:<a@b> SIZE=..." or "TO:<a@b>"."""
    _, _, value = rest.partition(":")
    value = value.strip().split(" ")[0]
    return value.removeprefix("<").removesuffix(">")


async def _read_data(reader: asyncio.StreamReader) -> bytes:
    lines: list[bytes] = []
    while True:
        raw = await reader.readline()
        if not raw:
            raise asyncio.IncompleteReadError(b"".join(lines), None)
        if raw.rstrip(b"\r\n") == b".":
            return b"".join(lines)
        lines.append(raw[1:] if raw.startswith(b".") else raw)  # undo dot-stuffing
