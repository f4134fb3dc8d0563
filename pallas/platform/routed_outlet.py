"""One Outlet for the core, two platforms behind it: sandbox chats go to the sandbox, every
other chat to NapCat (the core never asks which)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pallas.core.actions import Capability, SentLookup
from pallas.core.inbound import Segment, StreamKey
from pallas.platform.onebot.outlet import OneBotOutlet
from pallas.platform.sandbox import SANDBOX, SANDBOX_SELF_ID, SandboxOutlet


class RoutedOutlet:
    def __init__(self, onebot: OneBotOutlet, sandbox: SandboxOutlet) -> None:
        self.onebot = onebot
        self.sandbox = sandbox

    def _for(self, stream: StreamKey) -> OneBotOutlet | SandboxOutlet:
        return self.sandbox if stream.platform == SANDBOX else self.onebot

    def _for_account(self, self_id: str) -> OneBotOutlet | SandboxOutlet:
        return self.sandbox if self_id == SANDBOX_SELF_ID else self.onebot

    async def send(
        self, stream: StreamKey, segments: Sequence[Segment], quote: str | None = None
    ) -> str | None:
        return await self._for(stream).send(stream, segments, quote)

    async def poke(self, stream: StreamKey, user_id: str) -> bool:
        return await self._for(stream).poke(stream, user_id)

    async def react(self, stream: StreamKey, platform_message_id: str, reaction: str) -> bool:
        return await self._for(stream).react(stream, platform_message_id, reaction)

    async def capabilities(self, self_id: str) -> frozenset[Capability]:
        return await self._for_account(self_id).capabilities(self_id)

    async def is_connected(self, self_id: str) -> bool:
        return await self._for_account(self_id).is_connected(self_id)

    async def find_sent(self, stream: StreamKey, text: str, since: datetime) -> SentLookup:
        return await self._for(stream).find_sent(stream, text, since)

    async def nickname(self, self_id: str, user_id: str) -> str | None:
        if self_id == SANDBOX_SELF_ID:
            return None
        return await self.onebot.nickname(self_id, user_id)
