"""The object graph, built once at start-up: settings -> store -> writer -> ingress."""

from __future__ import annotations

from dataclasses import dataclass, field

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.config import Settings
from pallas.console.token import ensure_console_token
from pallas.product.llm.kernel.ingress import Ingress
from pallas.store.engine import backend_name, create_engine
from pallas.store.migrate import upgrade_to_head
from pallas.store.timeline import TimelineWriter


@dataclass
class Runtime:
    settings: Settings
    engine: AsyncEngine
    writer: TimelineWriter
    ingress: Ingress
    console_token: str = field(default="", repr=False)

    @classmethod
    def build(cls, settings: Settings) -> Runtime:
        engine = create_engine(settings.database_url)
        writer = TimelineWriter(engine)
        return cls(settings=settings, engine=engine, writer=writer, ingress=Ingress(writer))

    @property
    def database_backend(self) -> str:
        return backend_name(self.engine)

    async def start(self) -> None:
        data_dir = self.settings.pallas_data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        try:
            await upgrade_to_head(self.engine)
        except Exception:
            logger.critical(
                "database migration failed for {} ({})",
                self.database_backend,
                self.engine.url.render_as_string(hide_password=True),
            )
            raise
        self.writer.start()
        self.console_token = ensure_console_token(self.settings.pallas_console_token, data_dir)
        logger.info("store ready: {} database", self.database_backend)
        _announce_model_chat(self.settings)

    async def stop(self) -> None:
        await self.writer.close()
        await self.engine.dispose()


def _announce_model_chat(settings: Settings) -> None:
    if settings.model_chat_enabled:
        logger.info("model chat is on")
        return
    logger.warning(
        "model chat is off: set LLM_BASE_URL, LLM_API_KEY and LLM_MODEL in .env "
        "(or point PALLAS_PROVIDERS_FILE at a providers file) to turn it on; "
        "everything that needs no model still runs"
    )
