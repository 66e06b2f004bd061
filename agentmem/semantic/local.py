"""LocalMemoryClient: mem0-style semantic memory, embedded in the project's memory root.

A :class:`~agentmem.protocols.MemoryClient` with no server: memories live
in ``<root>/semantic.sqlite`` (see :mod:`agentmem.semantic._schema` for the
format and :mod:`agentmem.semantic._store` for how it is opened), beside the
sessions database, under the same rules (WAL, transactions, recovery on open,
nothing written in incognito mode); or, with ``backend=`` or a memory on PostgreSQL,
in that database (:mod:`agentmem.semantic._pg`: the same calls, the same answers).

**Capture** (:meth:`LocalMemoryClient.add`). Only the user's own words are
used (:func:`~agentmem.semantic._common.user_texts`), and they are
secret-scrubbed before anything else sees them.

* Without an LLM, or with ``infer=False``: each user turn is stored as
  written (whitespace normalised). A statement already stored in the same
  scope (same text up to case and whitespace: the ``hash`` column, under a
  unique index) is not stored again; its event is ``NOOP``.
* With an LLM: a flow (:mod:`agentmem.semantic._reconcile`) asks it for the
  facts in the user's words, looks up for each fact the similar memories of
  the scope (the same scoring as :meth:`~LocalMemoryClient.search`), and,
  when there are any, asks it to reconcile: ``ADD`` / ``UPDATE`` /
  ``DELETE`` / ``NOOP``. With no similar memory at all the facts are added
  without that second call. Every operation is applied in one transaction
  and recorded in ``history``. An operation naming an id that was not
  among the memories shown is not applied: its event is ``REJECTED``, with
  a ``reason``. A reply that is not the JSON asked for raises
  :class:`~agentmem.errors.LLMError` and nothing is stored.
  :meth:`~LocalMemoryClient.add` drives the flow with a sync LLM,
  :meth:`~LocalMemoryClient.aadd` with a sync or async one; both give the
  same result for the same replies.

**Search** (:meth:`LocalMemoryClient.search`). A memory's score is in
[0, 1]:

* lexical: the fraction of the query's keywords (stopwords dropped unless
  the query has nothing else; matched by porter stem, case- and
  accent-insensitively, through the FTS5 index) that the memory holds;
* with an :class:`~agentmem.protocols.Embedder` (by default MiniLM when the
  ``minilm`` extra is installed, see :mod:`agentmem.semantic._auto_embedder`):
  ``(1 - w) * lexical + w * max(0, cosine)`` with ``w = vector_weight`` (0.5 by default) for every
  memory that has a vector of the query's length (a zero vector's cosine is
  0); a memory stored without one (before an embedder was configured) is
  scored lexically alone, and so is every memory when the query's vector is
  zero.

Memories scoring 0 are never returned, nor those below ``threshold``. Ties
go to the better BM25 rank, then the most recently added. Full rows are read
only for the best candidates, in score order, until ``limit`` pass the filters.

**Scopes.** Writes touch exactly the scope given (``add(user_id="u")``
never changes a memory stored for ``agent_id="a"``); reads and
``delete_all`` filter by the ids given (see :mod:`agentmem.semantic._common`).
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal

from agentmem._storage.recovery import Recovery
from agentmem._storage.sqlite import DURABILITIES, Durability
from agentmem._validate import check_component
from agentmem.errors import (
    ConfigurationError,
    LLMError,
    MemoryNotFoundError,
    StorageError,
)
from agentmem.llm import Flow, arun_flow, run_flow
from agentmem.protocols import LLM, Embedder, MemoryRecord
from agentmem.recall import keywords
from agentmem.scrub import (
    Scrubber,
    refuse_secret_names,
    resolve_scrubber,
    scrub_json,
    scrub_secrets,
)
from agentmem.semantic import _store as db
from agentmem.semantic._auto_embedder import AUTO, EmbedderSlot
from agentmem.semantic._common import (
    HistoryEntry,
    Scope,
    check_filters,
    check_infer,
    check_limit,
    check_memory_id,
    check_metadata,
    check_query,
    check_scope,
    check_threshold,
    matches_filters,
    normalise_text,
    user_texts,
)
from agentmem.semantic._reconcile import Action, extract_facts, reconcile

__all__ = ["SEMANTIC_FILE", "HistoryEntry", "LocalMemoryClient"]

SEMANTIC_FILE: Final = "semantic.sqlite"
"""The database's name under the memory root."""

CANDIDATES_PER_FACT: Final = 5
"""How many similar memories each new fact brings to the reconciliation."""

_MISSING: Final = object()


def _backend_dsn(mem: object) -> str | None:
    """The PostgreSQL DSN a memory's stores run on (``mem.backend``: a DSN, or a backend
    object with a ``dsn``), else ``None`` (the embedded files)."""
    backend = getattr(mem, "backend", None)
    return _dsn(backend if isinstance(backend, str) else getattr(backend, "dsn", None))


def _dsn(backend: object) -> str | None:
    """``backend`` when it names a PostgreSQL database (a ``postgresql://`` URI or a libpq
    ``key=value`` string), ``None`` for the embedded ``semantic.sqlite``."""
    if not isinstance(backend, str) or backend.strip().lower() in ("", "embedded", "sqlite"):
        return None
    return backend.strip()


def _source(
    mem_or_root: object,
) -> tuple[Path | None, Any, Any]:
    """``(database path or None, the memory's llm, the memory's scrubber or _MISSING)``."""
    if isinstance(mem_or_root, str | os.PathLike):
        text = os.fspath(mem_or_root)
        if text == ":memory:":
            return None, None, _MISSING
        root = Path(text)
        return root / SEMANTIC_FILE, None, _MISSING
    if mem_or_root is None:
        return None, None, _MISSING
    if hasattr(mem_or_root, "root") and hasattr(mem_or_root, "incognito"):
        incognito = bool(mem_or_root.incognito)
        root = Path(mem_or_root.root)
        path = None if incognito else root / SEMANTIC_FILE
        return path, getattr(mem_or_root, "llm", None), getattr(mem_or_root, "scrubber", _MISSING)
    raise ConfigurationError(
        "mem_or_root must be an agentmem Memory, a root directory (str or Path), "
        f"':memory:' or None, got {type(mem_or_root).__name__}"
    )


class LocalMemoryClient:
    """Semantic memory in ``<root>/semantic.sqlite``, BM25 plus optional vectors.

    Args:
        mem_or_root: A :class:`~agentmem.Memory` (its root, its ``llm`` when
            ``llm`` is not given, its secret scrubber; an incognito memory
            gives an in-memory database and nothing is written), a root
            directory (created when missing), or ``None`` / ``":memory:"``
            for an in-memory database.
        llm: Extracts and reconciles facts (sync or async, see
            :class:`~agentmem.protocols.LLM`). Without one, statements are
            stored as said.
        embedder: Adds vector similarity to search (and to the lookup of
            similar memories before a reconciliation). ``"auto"`` (the
            default): :class:`~agentmem.embedders.MiniLMEmbedder` when the
            ``minilm`` extra is installed (built on the first add or search
            that needs a vector, not here), else lexical search; if building
            it fails, a warning is logged, :attr:`embedder_error` says why, and
            search stays lexical. ``None``: lexical search. An
            :class:`~agentmem.protocols.Embedder`: used as given.
        scrubber: ``None``: the memory's scrubber, else :func:`~agentmem.scrub.scrub_secrets`;
            ``True``/``False``, or a callable ``(text) -> text``, as
            ``Memory(scrub_secrets=...)``.
        durability: ``"full"`` (fsync every commit, the default) or ``"normal"``.
        vector_weight: The cosine's share of a score when an embedder is given (0..1).
        clock: Returns the time in epoch seconds (tests pass a fixed one).
        backend: A PostgreSQL DSN (``postgresql://user@host:5432/db``): the memories
            live in that database (docs/semantic.md, "PostgreSQL") instead of
            ``semantic.sqlite``; ``"embedded"`` is ``semantic.sqlite``. ``None``:
            the memory's backend when ``mem_or_root`` is a :class:`~agentmem.Memory`
            on PostgreSQL, else ``semantic.sqlite``. Ignored for an incognito memory.

    Attributes:
        embedder: The embedder in use (``None``: lexical search, or MiniLM not
            built yet); assignable.
        embedder_error: Why the automatic embedder could not be used, else ``None``.
        recovery: What was done about an unreadable ``semantic.sqlite`` found
            on open (moved where, why), else ``None``.
        recovered_from: Where that file was moved, else ``None``.
        problems: Rows found damaged in place (a column that is not UTF-8,
            metadata that is not a JSON object) and left out of results.

    Raises:
        ConfigurationError: a bad argument (named).
        StorageError: the database cannot be opened (not ours, newer, permissions).
    """

    def __init__(
        self,
        mem_or_root: Any = None,
        *,
        llm: LLM | Any | None = None,
        embedder: Embedder | Literal["auto"] | None = AUTO,
        scrubber: bool | Scrubber | None = None,
        durability: Durability = "full",
        vector_weight: float = 0.5,
        clock: Callable[[], float] | None = None,
        backend: str | None = None,
    ) -> None:
        path, mem_llm, mem_scrubber = _source(mem_or_root)
        if backend is not None and (not isinstance(backend, str) or not backend.strip()):
            raise ConfigurationError("backend must be None, 'embedded' or a PostgreSQL DSN")
        dsn = _dsn(backend) if backend is not None else path and _backend_dsn(mem_or_root)
        if getattr(mem_or_root, "incognito", False) is True:
            dsn = None  # an incognito memory writes nothing anywhere
        check_component("llm", llm, LLM, "a callable llm(messages, tools=None) -> dict")
        if durability not in DURABILITIES:
            raise ConfigurationError(
                f"durability must be one of {', '.join(DURABILITIES)}, got {durability!r}"
            )
        if (
            isinstance(vector_weight, bool)
            or not isinstance(vector_weight, int | float)
            or not 0.0 <= vector_weight <= 1.0
        ):
            raise ConfigurationError(f"vector_weight must be in [0, 1], got {vector_weight!r}")
        if clock is not None and not callable(clock):
            raise ConfigurationError(f"clock must be callable, got {type(clock).__name__}")
        self.llm: Any = llm if llm is not None else mem_llm
        self._embedders = self._embedder_slot(embedder)
        self.vector_weight = float(vector_weight)
        self._scrub = self._scrubber(scrubber, mem_scrubber)
        self._clock = clock
        if dsn:
            from agentmem.semantic._pg import PgSemanticDB

            self._db: db.SemanticEngine = PgSemanticDB(dsn, durability=durability)
            return
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError(
                    f"cannot create the memory root {str(path.parent)!r}: {exc.strerror or exc}",
                    path=path.parent,
                ) from exc
        self._db = db.SemanticDB(path, durability=durability)

    @staticmethod
    def _embedder_slot(setting: object) -> EmbedderSlot:
        if isinstance(setting, str) and setting == AUTO:
            return EmbedderSlot(AUTO)
        check_component(
            "embedder", setting, Embedder, "embed(texts) -> list[list[float]], None or 'auto'"
        )
        return EmbedderSlot(setting)  # type: ignore[arg-type]

    @staticmethod
    def _scrubber(setting: object, inherited: object) -> Scrubber | None:
        if setting is None:
            if inherited is _MISSING:
                return scrub_secrets
            if inherited is None or callable(inherited):
                return inherited
            raise ConfigurationError(f"the memory's scrubber is not callable: {inherited!r}")
        if isinstance(setting, bool) or callable(setting):
            return resolve_scrubber(setting)
        raise ConfigurationError(
            f"scrubber must be None, True, False or a callable (text) -> text, "
            f"got {type(setting).__name__}"
        )

    # ------------------------------------------------------------------ properties

    @property
    def embedder(self) -> Embedder | None:
        """The embedder in use: ``None`` for lexical search, and also while the
        automatic MiniLM is not built yet (see ``embedder_error`` if it failed)."""
        return self._embedders.current

    @embedder.setter
    def embedder(self, value: Embedder | Literal["auto"] | None) -> None:
        self._embedders = self._embedder_slot(value)

    @property
    def embedder_error(self) -> str | None:
        """Why the automatic embedder (``embedder="auto"``) could not be built or
        run, so that search fell back to lexical; else ``None``."""
        return self._embedders.error

    @property
    def path(self) -> Path | None:
        """The database file, or ``None`` when in memory or on PostgreSQL."""
        return self._db.path

    @property
    def recovery(self) -> Recovery | None:
        """What was done on open about an unreadable database, else ``None``."""
        return self._db.recovery

    @property
    def problems(self) -> list[str]:
        """Damaged rows met so far and left out of results (each also logged once on
        ``agentmem.storage``); the rows stay in the file as they are."""
        return list(self._db.problems)

    @property
    def recovered_from(self) -> Path | None:
        """Where an unreadable database found on open was moved, else ``None``."""
        return None if self._db.recovery is None else self._db.recovery.moved_to

    # ------------------------------------------------------------------ helpers

    def _now(self) -> str:
        seconds = self._clock() if self._clock is not None else None
        moment = datetime.now(UTC) if seconds is None else datetime.fromtimestamp(seconds, UTC)
        return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")

    def _clean(self, text: str) -> str:
        """What is stored for ``text``: scrubbed, then whitespace-normalised."""
        if self._scrub is not None:
            text = self._scrub(text)
        return normalise_text(text)

    def _clean_metadata(self, metadata: Any) -> dict[str, Any]:
        cleaned: dict[str, Any] = scrub_json(self._scrub, check_metadata(metadata), "metadata")
        return cleaned

    def _embed(self, texts: Sequence[str]) -> dict[str, bytes]:
        """``text -> encoded vector`` for ``texts`` (empty without an embedder).

        The automatic embedder is built here, on the first call with texts; if it
        cannot be built or fails to embed, the client goes on lexically.
        """
        if not texts:
            return {}
        slot = self._embedders
        embedder = slot.get()
        if embedder is None:
            return {}
        unique = list(dict.fromkeys(texts))
        try:
            vectors = embedder.embed(unique)
        except Exception as exc:
            if not slot.automatic:
                raise
            slot.fail("the MiniLM embedder failed", exc)
            return {}
        if not isinstance(vectors, Sequence) or len(vectors) != len(unique):
            raise ConfigurationError(
                f"the embedder returned {type(vectors).__name__} for {len(unique)} texts; "
                "expected one vector per text"
            )
        out: dict[str, bytes] = {}
        for text, vector in zip(unique, vectors, strict=True):
            try:
                values = [float(x) for x in vector]
            except (TypeError, ValueError) as exc:
                raise ConfigurationError(f"the embedder returned a bad vector: {exc}") from exc
            out[text] = db.encode_vector(values)
        return out

    def _record(self, row: db.Row, score: float | None = None) -> MemoryRecord:
        return MemoryRecord(
            id=row.id,
            memory=row.text,
            user_id=row.user_id,
            agent_id=row.agent_id,
            run_id=row.run_id,
            score=score,
            metadata=row.metadata,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )

    # ------------------------------------------------------------------ scoring

    def _scored(
        self,
        query: str,
        scope: Scope,
        *,
        exact: bool,
        filters: Mapping[str, Any],
        query_vector: bytes | None,
        limit: int,
        floor: float | None = None,
    ) -> list[tuple[float, db.Row]]:
        """The ``limit`` best ``(score, row)`` of the scope scoring above 0 (and ``floor``).

        Scores are computed from the index and the vectors alone; full rows are
        read only for the best candidates, in score order, until ``limit`` of
        them pass ``filters``.
        """
        words = keywords(query) or keywords(query, stopwords=False)
        qvec = db.decode_vector(query_vector) if query_vector is not None else ()
        # A zero (or non-finite) query vector says nothing: the search is lexical alone.
        qvec = qvec if any(qvec) and math.isfinite(math.hypot(*qvec)) else ()
        weight = self.vector_weight if qvec else 0.0
        with self._db.read("search semantic memory") as conn:
            matches = db.keyword_matches(conn, scope, words, exact=exact)
            similarity = db.similarities(conn, scope, qvec, exact=exact) if qvec else {}
            ranked: list[tuple[float, float, int]] = []
            for docid in matches.keys() | similarity.keys():
                bm25, hits = matches.get(docid, (0.0, 0))
                lexical = hits / len(words) if words else 0.0
                cos = similarity.get(docid)
                score = lexical if cos is None else (1.0 - weight) * lexical + weight * cos
                score = min(1.0, round(score, 6))
                if score > 0.0 and (floor is None or score >= floor):
                    ranked.append((score, bm25, docid))
            # Best score, then the better BM25 rank, then the most recently added.
            ranked.sort(key=lambda item: (-item[0], item[1], -item[2]))
            out: list[tuple[float, db.Row]] = []
            batch = max(2 * limit, 50)
            for start in range(0, len(ranked), batch):
                chunk = ranked[start : start + batch]
                rows = {
                    row.docid: row
                    for row in db.rows_by_docid(
                        conn, [d for _, _, d in chunk], report=self._db.report
                    )
                }
                for score, _, docid in chunk:
                    row = rows.get(docid)
                    if row is not None and matches_filters(row.metadata, filters):
                        out.append((score, row))
                        if len(out) >= limit:
                            return out
        return out

    # ------------------------------------------------------------------ reading

    def search(
        self,
        query: str,
        *,
        user_id: str,
        agent_id: str | None = None,
        run_id: str | None = None,
        limit: int = 5,
        filters: Mapping[str, Any] | None = None,
        threshold: float | None = None,
    ) -> list[MemoryRecord]:
        """The ``limit`` memories of the scope most relevant to ``query``, best first.

        Args:
            query: Free text.
            user_id / agent_id / run_id: The scope (filtered by the ids given).
            limit: At most this many results.
            filters: Metadata equality (``{"topic": "food"}``).
            threshold: Leave out memories scoring below it (scores are in [0, 1];
                see the module docstring for how they are computed).

        Returns:
            Records with ``score`` set.

        Raises:
            InvalidArgumentError: a bad argument (named).
            StorageError: the database could not be read.
        """
        check_query(query)
        scope = check_scope(user_id, agent_id, run_id)
        count = check_limit(limit)
        floor = check_threshold(threshold)
        wanted = check_filters(filters)
        vectors = self._embed([query]) if query.strip() else {}
        scored = self._scored(
            query,
            scope,
            exact=False,
            filters=wanted,
            query_vector=vectors.get(query),
            limit=count,
            floor=floor,
        )
        return [self._record(row, score) for score, row in scored]

    def get_all(
        self,
        *,
        user_id: str,
        agent_id: str | None = None,
        run_id: str | None = None,
        filters: Mapping[str, Any] | None = None,
        limit: int = 100,
    ) -> list[MemoryRecord]:
        """Every memory of the scope, most recently updated first, at most ``limit``.

        Raises:
            InvalidArgumentError: a bad argument (named).
            StorageError: the database could not be read.
        """
        scope = check_scope(user_id, agent_id, run_id)
        count = check_limit(limit)
        wanted = check_filters(filters)
        out: list[MemoryRecord] = []
        with self._db.read("list semantic memories") as conn:
            for row in db.scope_rows(conn, scope, report=self._db.report):
                if matches_filters(row.metadata, wanted):
                    out.append(self._record(row))
                    if len(out) >= count:
                        break
        return out

    def get(self, memory_id: str) -> MemoryRecord:
        """One memory by id.

        Raises:
            MemoryNotFoundError: no memory has this id.
        """
        key = check_memory_id(memory_id)
        with self._db.read("read a semantic memory") as conn:
            row = db.get_row(conn, key, report=self._db.report)
        if row is None:
            raise MemoryNotFoundError(key)
        return self._record(row)

    def history(self, memory_id: str) -> list[HistoryEntry]:
        """Every change of a memory (also of a deleted one), oldest first.

        Raises:
            MemoryNotFoundError: no memory with this id ever existed.
        """
        key = check_memory_id(memory_id)
        with self._db.read("read a memory's history") as conn:
            rows = db.history_rows(conn, key, report=self._db.report)
        if not rows:
            raise MemoryNotFoundError(key)
        return [HistoryEntry(key, event, old, new, at) for event, old, new, at in rows]

    # ------------------------------------------------------------------ forgetting

    def delete(self, memory_id: str) -> None:
        """Forget one memory (its history keeps a ``DELETE`` entry).

        Raises:
            MemoryNotFoundError: no memory has this id.
        """
        key = check_memory_id(memory_id)
        now = self._now()
        with self._db.write("delete a semantic memory") as conn:
            row = db.get_row(conn, key, report=self._db.report)
            if row is None and not db.has_id(conn, key):
                raise MemoryNotFoundError(key)
            # A damaged row can still be forgotten by its id (its old text is not copied).
            db.delete_row(conn, key)
            db.record(conn, key, "DELETE", None if row is None else row.text, None, now)

    def delete_all(
        self, *, user_id: str, agent_id: str | None = None, run_id: str | None = None
    ) -> int:
        """Forget exactly what :meth:`get_all` lists for the same scope; returns how many.

        Raises:
            InvalidArgumentError: ``user_id`` missing or empty (a scope is required).
        """
        scope = check_scope(user_id, agent_id, run_id)
        now = self._now()
        with self._db.write("delete semantic memories") as conn:
            rows = list(db.scope_rows(conn, scope, report=self._db.report))
            for row in rows:
                db.delete_row(conn, row.id)
                db.record(conn, row.id, "DELETE", row.text, None, now)
        return len(rows)

    # ------------------------------------------------------------------ capture

    def add(
        self,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        user_id: str,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        infer: bool = True,
    ) -> list[dict[str, Any]]:
        """Remember what the user said (see the module docstring).

        Args:
            messages: The user's words, or message dicts of which only user turns count.
            user_id / agent_id / run_id: The exact scope written to.
            metadata: Stored with each new memory (merged into an updated one).
            infer: With an LLM, extract and reconcile facts; ``False`` stores
                the statements as said.

        Returns:
            One event per memory touched: ``{"id", "memory", "event"}`` with
            ``event`` in ``ADD``, ``UPDATE`` (plus ``previous_memory``),
            ``DELETE``, ``NOOP``, or ``REJECTED`` (plus ``reason``; not applied).

        Raises:
            InvalidArgumentError: a bad argument (named).
            LLMError: the LLM is async (use :meth:`aadd`), or its reply was
                not usable; nothing was stored.
            StorageError: the database could not be written; nothing was stored.
        """
        flow = self._add_flow(messages, user_id, agent_id, run_id, metadata, infer)
        return run_flow(flow, self._driver(infer))

    async def aadd(
        self,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        user_id: str,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        infer: bool = True,
    ) -> list[dict[str, Any]]:
        """:meth:`add` for async hosts: the LLM may be sync or async."""
        flow = self._add_flow(messages, user_id, agent_id, run_id, metadata, infer)
        return await arun_flow(flow, self._driver(infer))

    def _driver(self, infer: object) -> Callable[..., Any]:
        # Storing statements as said calls no model: an async LLM must not make add() refuse.
        return self.llm if infer is True and self.llm is not None else _no_llm

    def _add_flow(
        self,
        messages: object,
        user_id: object,
        agent_id: object,
        run_id: object,
        metadata: object,
        infer: object,
    ) -> Flow[list[dict[str, Any]]]:
        # Arguments are checked here, before the flow starts, so a bad call fails at once.
        scope = check_scope(user_id, agent_id, run_id)
        refuse_secret_names(self._scrub, scope._asdict())
        infer = check_infer(infer)
        texts = [t for t in (self._clean(raw) for raw in user_texts(messages)) if t]
        meta = self._clean_metadata(metadata)
        return self._capture(texts, scope, meta, infer and self.llm is not None)

    def _capture(
        self, texts: list[str], scope: Scope, metadata: dict[str, Any], infer: bool
    ) -> Flow[list[dict[str, Any]]]:
        if not texts:
            return []
        if not infer:
            return self._apply([Action("ADD", None, t) for t in texts], {}, scope, metadata)
        facts = yield from extract_facts(texts)
        cleaned = list(dict.fromkeys(c for c in (self._clean(f) for f in facts) if c))
        if not cleaned:
            return []
        aliases = self._similar(cleaned, scope)
        if not aliases:
            actions = [Action("ADD", None, fact) for fact in cleaned]
        else:
            shown = [(alias, row.text) for alias, row in aliases.items()]
            actions = yield from reconcile(cleaned, shown)
        return self._apply(actions, {a: r.id for a, r in aliases.items()}, scope, metadata)

    def _similar(self, facts: Sequence[str], scope: Scope) -> dict[str, db.Row]:
        """``alias -> row`` of the memories of exactly ``scope`` most similar to any fact."""
        vectors = self._embed(facts)
        seen: dict[str, db.Row] = {}
        for fact in facts:
            scored = self._scored(
                fact,
                scope,
                exact=True,
                filters={},
                query_vector=vectors.get(fact),
                limit=CANDIDATES_PER_FACT,
            )
            for _, row in scored:
                seen.setdefault(row.id, row)
        return {str(index): row for index, row in enumerate(seen.values())}

    def _apply(
        self,
        actions: Sequence[Action],
        aliases: Mapping[str, str],
        scope: Scope,
        metadata: dict[str, Any],
    ) -> list[dict[str, Any]]:
        """Apply ``actions`` in one transaction; one event per action."""
        prepared = [
            a._replace(text=self._clean(a.text)) if a.text is not None else a for a in actions
        ]
        vectors = self._embed([a.text for a in prepared if a.text and a.event in ("ADD", "UPDATE")])
        now = self._now()
        events: list[dict[str, Any]] = []
        with self._db.write("store semantic memories") as conn:
            for action in prepared:
                events.append(_apply_one(conn, action, aliases, scope, metadata, vectors, now))
        return events

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close the database (idempotent); later calls raise
        :class:`~agentmem.errors.StorageError`."""
        self._db.close()

    def __enter__(self) -> LocalMemoryClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        where = "in memory" if self._db.where == ":memory:" else self._db.where
        return f"LocalMemoryClient({where}, llm={'yes' if self.llm is not None else 'no'})"


def _no_llm(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Any:
    raise LLMError("no LLM is configured")  # pragma: no cover - the flow never asks without one


def _apply_one(
    conn: Any,
    action: Action,
    aliases: Mapping[str, str],
    scope: Scope,
    metadata: dict[str, Any],
    vectors: Mapping[str, bytes],
    now: str,
) -> dict[str, Any]:
    """Apply one action inside the caller's transaction and describe what happened."""
    text = action.text or ""
    if action.event == "ADD":
        if not text:
            return {"id": None, "memory": "", "event": "NOOP"}
        existing = db.find_fact(conn, scope, db.fact_hash(text))
        if existing is not None:
            return {"id": existing.id, "memory": existing.text, "event": "NOOP"}
        memory_id = uuid.uuid4().hex
        db.insert_row(
            conn,
            memory_id=memory_id,
            scope=scope,
            text=text,
            metadata=metadata,
            vector=vectors.get(text),
            now=now,
        )
        db.record(conn, memory_id, "ADD", None, text, now)
        return {"id": memory_id, "memory": text, "event": "ADD"}
    if action.alias is None:  # a NOOP that names no memory
        return {"id": None, "memory": text, "event": "NOOP"}
    target = aliases.get(action.alias)
    if target is None:
        return _rejected(action, "the id was not among the memories shown to the model")
    row = db.get_row(conn, target)
    if row is None:
        return _rejected(action, "the memory no longer exists")
    if action.event == "NOOP":
        return {"id": row.id, "memory": row.text, "event": "NOOP"}
    if action.event == "DELETE":
        db.delete_row(conn, row.id)
        db.record(conn, row.id, "DELETE", row.text, None, now)
        return {"id": row.id, "memory": row.text, "event": "DELETE"}
    # UPDATE
    if not text or db.fact_hash(text) == row.hash:
        return {"id": row.id, "memory": row.text, "event": "NOOP"}
    twin = db.find_fact(conn, scope, db.fact_hash(text))
    if twin is not None and twin.id != row.id:
        # The new text is already stored as another memory: this one is now redundant.
        db.delete_row(conn, row.id)
        db.record(conn, row.id, "DELETE", row.text, None, now)
        return {"id": row.id, "memory": row.text, "event": "DELETE", "duplicate_of": twin.id}
    merged = {**row.metadata, **metadata}
    db.update_row(conn, row.id, text=text, metadata=merged, vector=vectors.get(text), now=now)
    db.record(conn, row.id, "UPDATE", row.text, text, now)
    return {"id": row.id, "memory": text, "event": "UPDATE", "previous_memory": row.text}


def _rejected(action: Action, reason: str) -> dict[str, Any]:
    return {
        "id": action.alias,
        "memory": action.text or "",
        "event": "REJECTED",
        "requested": action.event,
        "reason": reason,
    }
