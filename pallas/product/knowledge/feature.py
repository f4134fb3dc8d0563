"""The knowledge folder as one feature (docs/knowledge.md): documents in
PALLAS_DATA_DIR/knowledge indexed off the reply path, found at a turn by the question or by
`knowledge.search`. Off with PALLAS_FEATURES_OFF=["knowledge"]."""

from __future__ import annotations

from datetime import timedelta

from pallas.product.conversation.jobs.periodic import PeriodicJob
from pallas.product.extensions import Extension, Plugs
from pallas.product.knowledge.console import KNOWLEDGE_PAGE, knowledge_routes
from pallas.product.knowledge.indexing import FOLDER, FolderIndexer
from pallas.product.knowledge.recall import KnowledgeRecall, KnowledgeSearchTool
from pallas.product.knowledge.store import KnowledgeStore
from pallas.product.knowledge.vectors import KnowledgeVectors
from pallas.product.llm.tools.registry import FunctionPlugin
from pallas.store.jobs import ClaimedJob

SCAN_KIND = "knowledge.scan"
SCAN = PeriodicJob(name="knowledge_scan", kind=SCAN_KIND, every=timedelta(minutes=1))
SCAN_TIMEOUT_S = 240.0


class Scopes:
    """Which chats' scopes have indexed documents: asked at every turn, so kept in memory,
    read again after each scan."""

    def __init__(self, store: KnowledgeStore) -> None:
        self._store = store
        self._scopes: frozenset[str] = frozenset()

    async def refresh(self) -> None:
        docs = await self._store.docs()
        self._scopes = frozenset(d.scope for d in docs if d.status == "indexed")

    def __call__(self, scopes: tuple[str, ...]) -> bool:
        return any(scope in self._scopes for scope in scopes)


def install(plugs: Plugs) -> None:
    core = plugs.core
    store = KnowledgeStore(core.engine)
    scopes = Scopes(store)
    vectors = KnowledgeVectors(core.engine, core.models, store)
    indexer = FolderIndexer(store, core.data_dir / FOLDER, core.clock)

    async def scan(_job: ClaimedJob | None = None) -> None:
        await indexer.scan()
        await store.warm()
        await scopes.refresh()
        await vectors.fill()

    async def rescan() -> None:
        await core.jobs.enqueue(SCAN_KIND, {}, key=f"{SCAN_KIND}:now:{core.clock().isoformat()}")

    async def at_start() -> None:
        await scopes.refresh()
        await rescan()

    async def nothing() -> None:
        return None

    plugs.add_job(SCAN_KIND, scan, timeout_s=SCAN_TIMEOUT_S)
    plugs.add_periodic_job(SCAN)
    plugs.add_lifespan(at_start, nothing, name="knowledge")
    plugs.add_context_source(KnowledgeRecall(store, scopes))
    plugs.add_api_routes(knowledge_routes(store, indexer.root, rescan))
    plugs.add_owner_page(KNOWLEDGE_PAGE)
    tool = KnowledgeSearchTool(vectors.search, scopes)
    plugs.add_tool_plugin(FunctionPlugin("knowledge", "知识库：主人放进来的文档", common=(tool,)))


EXTENSION = Extension(
    name="knowledge",
    install=install,
    summary="知识库：PALLAS_DATA_DIR/knowledge 里的文档，问到时找出原文给模型",
)
