"""Path and query parameters of the bot's HTTP routes, shared by the console and the
features' own console routes: a row id past 64 bits is a 422, never a store error (a 500)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from pallas.core.numbers import MAX_DB_ID

RowId = Annotated[int, Path(ge=0, le=MAX_DB_ID)]
RowIdQuery = Annotated[int, Query(ge=0, le=MAX_DB_ID)]
OptionalRowIdQuery = Annotated[int | None, Query(ge=0, le=MAX_DB_ID)]
