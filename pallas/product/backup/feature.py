"""The nightly backup (docs/deploy.md, "Backup, restore, move"): off until `backup.keep` in
config/agent.yml is above 0; then every night at `backup.hour` (Beijing time) the whole store
and data folder are exported as one archive (`python -m pallas export`'s) into
`backup.folder` (PALLAS_DATA_DIR/backups by default, which no archive copies), and only the
newest `keep` archives stay."""

from __future__ import annotations

from datetime import datetime
from functools import partial
from pathlib import Path

from loguru import logger
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.ext.asyncio import AsyncEngine

from pallas.product.conversation.jobs.periodic import PeriodicJob, fire_of
from pallas.product.extensions import Extension, Plugs
from pallas.store.export import export_store
from pallas.store.jobs import ClaimedJob

KIND = "backup.nightly"
PREFIX = "pallas-backup-"
SUFFIX = ".tar.gz"
NIGHTLY = "nightly_backup"
NIGHTLY_NAME_ONLY = PeriodicJob(NIGHTLY, KIND, cron="0 0 * * *")  # its key's shape, for fire_of
TIMEOUT_S = 280.0  # within the jobs' five-minute lease (bench/README.md: a large store's time)


class BackupConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    keep: int = Field(default=0, ge=0, le=365)  # archives kept; 0: no nightly backup
    hour: int = Field(default=4, ge=0, le=23)  # Beijing time
    folder: str = ""  # empty: PALLAS_DATA_DIR/backups


class BackupKeys(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    backup: BackupConfig = Field(default_factory=BackupConfig)


def archive_name(fired: datetime) -> str:
    return f"{PREFIX}{fired.strftime('%Y%m%d-%H%M')}{SUFFIX}"


def stale(names: list[str], keep: int) -> list[str]:
    """The archives beyond the newest `keep` (their names sort by time)."""
    ours = sorted(n for n in names if n.startswith(PREFIX) and n.endswith(SUFFIX))
    return ours[: max(0, len(ours) - keep)]


def fire_time(job: ClaimedJob) -> datetime:
    """The night this run is for: its key's fire time (a retry's `due_at` has moved on)."""
    return fire_of(NIGHTLY_NAME_ONLY, job.key) or job.due_at


async def run_backup(
    job: ClaimedJob, engine: AsyncEngine, data_dir: Path, folder: Path, keep: int
) -> None:
    """One archive per night: a run again (a retry, a crash) writes the same file again."""
    target = folder / archive_name(fire_time(job))
    made = await export_store(engine, data_dir, target)
    names = [p.name for p in folder.iterdir()]
    for name in stale(names, keep) + [n for n in names if n.startswith(PREFIX)
                                       and n.endswith(".part")]:  # fmt: skip
        (folder / name).unlink(missing_ok=True)
    logger.info("backup: {} ({} rows, {} files)", target, sum(made.tables.values()),
                len(made.files))  # fmt: skip


def install(plugs: Plugs) -> None:
    config: BackupConfig = plugs.config.backup
    if config.keep == 0:
        return
    core = plugs.core
    folder = Path(config.folder) if config.folder else core.data_dir / "backups"
    folder.mkdir(parents=True, exist_ok=True)
    handler = partial(run_backup, engine=core.engine, data_dir=core.data_dir, folder=folder,
                      keep=config.keep)  # fmt: skip
    plugs.add_job(KIND, handler, timeout_s=TIMEOUT_S)
    utc_hour = (config.hour - 8) % 24
    plugs.add_periodic_job(PeriodicJob(NIGHTLY, KIND, cron=f"30 {utc_hour} * * *"))
    logger.info("backup: every night at {}:30 into {}, the newest {} kept", config.hour, folder,
                config.keep)  # fmt: skip


EXTENSION = Extension(
    name="backup",
    install=install,
    summary="每晚把整个存储和数据文件夹打包备份，只留最近几份（默认关）",
    config=BackupKeys,
)
