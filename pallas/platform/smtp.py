"""E-mail through the owner's SMTP server: the fallback when a private message cannot reach
an owner. The standard library's client, run in a thread, bounded by a timeout."""

from __future__ import annotations

import asyncio
import smtplib
from dataclasses import dataclass, field
from email.message import EmailMessage

from pallas.config import Settings

SMTP_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class SmtpConfig:
    host: str
    port: int = 587
    user: str = ""
    password: str = field(default="", repr=False)
    sender: str = ""
    recipients: tuple[str, ...] = ()
    starttls: bool = True

    @classmethod
    def from_settings(cls, settings: Settings) -> SmtpConfig:
        """The PALLAS_SMTP_* keys of `.env`."""
        return cls(
            host=settings.pallas_smtp_host,
            port=settings.pallas_smtp_port,
            user=settings.pallas_smtp_user,
            password=settings.pallas_smtp_password,
            sender=settings.pallas_smtp_from,
            recipients=tuple(settings.pallas_smtp_to),
            starttls=settings.pallas_smtp_starttls,
        )

    @property
    def usable(self) -> bool:
        return bool(self.host and self.recipients and (self.sender or self.user))


class MailNotSent(Exception):
    """The server refused or could not be reached; the message says why (English)."""


async def send_mail(config: SmtpConfig, subject: str, body: str) -> None:
    message = EmailMessage()
    message["Subject"] = subject
    message["From"] = config.sender or config.user
    message["To"] = ", ".join(config.recipients)
    message.set_content(body)
    try:
        await asyncio.to_thread(_deliver, config, message)
    except (smtplib.SMTPException, OSError) as exc:
        raise MailNotSent(f"{type(exc).__name__}: {exc}"[:300]) from None


def _deliver(config: SmtpConfig, message: EmailMessage) -> None:
    with smtplib.SMTP(config.host, config.port, timeout=SMTP_TIMEOUT_S) as client:
        if config.starttls:
            client.starttls()
        if config.user:
            client.login(config.user, config.password)
        client.send_message(message)
