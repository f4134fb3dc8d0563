"""The built-in features: the one module that names them (docs/architecture.md, "Adding a
feature"). Every other module reaches a feature only through the seam; PALLAS_FEATURES_OFF
switches these off by name, PALLAS_FEATURE_MODULES adds others by module path."""

from __future__ import annotations

from pallas.product.backup.feature import EXTENSION as BACKUP
from pallas.product.classic.feature import EXTENSION as CLASSIC
from pallas.product.deterministic.extension import EXTENSION as RESPONDERS
from pallas.product.knowledge.feature import EXTENSION as KNOWLEDGE
from pallas.product.mcp.feature import EXTENSION as MCP
from pallas.product.media.feature import EXTENSION as MEDIA
from pallas.product.memory.feature import EXTENSION as MEMORY
from pallas.product.persona.feature import EXTENSION as PERSONA
from pallas.product.slang.feature import EXTENSION as SLANG
from pallas.product.summaries.feature import EXTENSION as SUMMARIES
from pallas.product.tasks.feature import EXTENSION as TASKS

BUILT_IN_FEATURES = (RESPONDERS, MEMORY, MEDIA, PERSONA, CLASSIC, TASKS, SUMMARIES, MCP,
                     KNOWLEDGE, SLANG, BACKUP)
