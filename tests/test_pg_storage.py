"""agentmem._storage.postgres against a real PostgreSQL server (tests/pg.py fixtures).

Transactions (placeholders, rollback, errors), a connection lost mid-call, durability
settings, named migrations (once across racing processes, newer ones refused) and
advisory locks (exclusive, gone with their connection).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _pg_child import RACE_FORMAT, RACE_MIGRATIONS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg import PgCluster, child_env

from agentmem.errors import (
    ConfigurationError,
    FormatVersionError,
    StorageError,
    StoreLockedError,
)

psycopg = pytest.importorskip("psycopg", reason="pip install 'agentmem[postgres]'")

from agentmem._storage.postgres import (  # noqa: E402  (after the skip without psycopg)
    ConstraintViolation,
    Migration,
    PgDatabase,
    advisory_key,
    migrate,
    translate_placeholders,
)

CHILD = Path(__file__).with_name("_pg_child.py")


@pytest.fixture
def db(pg_dsn: str) -> Iterator[PgDatabase]:
    database = PgDatabase(pg_dsn)
    migrate(
        database,
        format_name="agentmem.test",
        format_version=1,
        migrations=[Migration("0001", ["CREATE TABLE t (id BIGSERIAL PRIMARY KEY, v TEXT)"])],
    )
    yield database
    database.close()


def _rows(db: PgDatabase) -> list[str]:
    with db.transaction("read") as cur:
        return [str(v) for (v,) in cur.execute("SELECT v FROM t ORDER BY id").fetchall()]


# ---------------------------------------------------------------------------- placeholders


def test_translate_placeholders_leaves_quoted_text_alone() -> None:
    sql = "SELECT ?, '?', \"a?\", 'x%y' FROM t WHERE v LIKE '%' || ? AND n % 2 = ?"
    assert translate_placeholders(sql) == (
        "SELECT %s, '?', \"a?\", 'x%%y' FROM t WHERE v LIKE '%%' || %s AND n %% 2 = %s"
    )


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")))
def test_any_text_round_trips_through_a_placeholder(db: PgDatabase, value: str) -> None:
    with db.transaction("echo") as cur:
        row = cur.execute("SELECT ?::text, '%?', ?::text || '?'", (value, value)).fetchone()
    assert row == (value, "%?", value + "?")


# ---------------------------------------------------------------------------- transactions


def test_an_exception_rolls_the_transaction_back(db: PgDatabase) -> None:
    def insert_then_fail() -> None:
        with db.transaction("insert") as cur:
            cur.execute("INSERT INTO t (v) VALUES (?)", ("lost",))
            raise KeyError("boom")

    with pytest.raises(KeyError):
        insert_then_fail()
    with db.transaction("insert") as cur:
        cur.execute("INSERT INTO t (v) VALUES (?)", ("kept",))
    assert _rows(db) == ["kept"]


def test_a_failed_statement_is_a_storage_error_and_rolls_back(db: PgDatabase) -> None:
    def insert_two_rows() -> None:
        with db.transaction("insert two rows") as cur:
            cur.execute("INSERT INTO t (v) VALUES (?)", ("first",))
            cur.execute("INSERT INTO no_such_table VALUES (1)")

    with pytest.raises(StorageError, match="insert two rows") as info:
        insert_two_rows()
    assert isinstance(info.value.__cause__, psycopg.Error)
    assert _rows(db) == []


def test_a_swallowed_failure_is_not_passed_off_as_a_commit(db: PgDatabase) -> None:
    """PostgreSQL answers COMMIT of a failed transaction with ROLLBACK, not an error."""
    violations: list[ConstraintViolation] = []

    def insert_and_swallow_a_violation() -> None:
        with db.transaction("insert") as cur:
            cur.execute("INSERT INTO t (id, v) VALUES (1, ?)", ("first",))
            try:
                cur.execute("INSERT INTO t (id, v) VALUES (1, ?)", ("again",))
            except ConstraintViolation as exc:
                violations.append(exc)

    with pytest.raises(StorageError, match="rolled back"):
        insert_and_swallow_a_violation()
    assert [v.sqlstate for v in violations] == ["23505"]
    assert _rows(db) == []


def test_a_connection_lost_mid_call_raises_storage_error_and_the_next_call_works(
    db: PgDatabase, pg_dsn: str
) -> None:
    """The server ends the backend (as a restart or a cut network would) while a
    transaction that already wrote a row waits: StorageError, no row, and the pool
    hands out a working connection next."""
    started = threading.Event()
    errors: list[BaseException] = []

    def call() -> None:
        try:
            with db.transaction("write then wait") as cur:
                cur.execute("INSERT INTO t (v) VALUES (?)", ("half",))
                started.set()
                cur.execute("SELECT pg_sleep(30)")
        except BaseException as exc:
            errors.append(exc)
            started.set()

    worker = threading.Thread(target=call)
    worker.start()
    assert started.wait(30)
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        for _ in range(300):
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE query LIKE 'SELECT pg_sleep(30)%' AND pid <> pg_backend_pid()"
            ).fetchall()
            if killed:
                break
            time.sleep(0.01)
    worker.join(30)
    assert len(errors) == 1
    assert type(errors[0]) is StorageError, errors[0]
    assert "write then wait" in str(errors[0])
    assert _rows(db) == []
    with db.transaction("insert") as cur:
        cur.execute("INSERT INTO t (v) VALUES (?)", ("after",))
    assert _rows(db) == ["after"]


def test_durability_full_overrides_a_server_that_does_not_sync(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        dbname = admin.info.dbname
        admin.execute(f'ALTER DATABASE "{dbname}" SET synchronous_commit = off')
    for durability, expected in (("full", "on"), ("normal", "off")):
        database = PgDatabase(pg_dsn, durability=durability)  # type: ignore[arg-type]
        try:
            with database.transaction("show") as cur:
                row = cur.execute("SHOW synchronous_commit").fetchone()
            assert row == (expected,)
        finally:
            database.close()


def test_tcp_connections_keep_alive_on_the_server_side_too(pg_cluster: PgCluster) -> None:
    """The server drops a vanished client's session locks once its keepalives give up;
    without setting them, the system's default waits two hours."""
    tcp = psycopg.conninfo.make_conninfo(pg_cluster.dsn, host="127.0.0.1")
    database = PgDatabase(tcp)
    try:
        with database.transaction("show") as cur:
            shown = [
                cur.execute(f"SHOW tcp_keepalives_{name}").fetchone()
                for name in ("idle", "interval", "count")
            ]
        assert shown == [("10",), ("5",), ("3",)]
    finally:
        database.close()


def test_an_unreachable_server_is_a_storage_error(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="cannot connect to PostgreSQL"):
        PgDatabase(f"postgresql://nobody@/postgres?host={tmp_path}&port=1")


def test_without_psycopg_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ConfigurationError, match=r"pip install 'agentmem\[postgres\]'"):
        PgDatabase("postgresql://localhost/x")
    from agentmem.session_store import SessionStore

    with pytest.raises(ConfigurationError, match=r"agentmem\[postgres\]"):
        SessionStore.postgres("postgresql://localhost/x")


def test_importing_agentmem_does_not_import_psycopg() -> None:
    code = "import sys, agentmem, agentmem.session_store; print('psycopg' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), check=True
    )
    assert out.stdout.strip() == "False"


def test_agentmem_tables_live_in_their_own_schema(pg_dsn: str) -> None:
    """An application's own ``t`` table in the same database is neither used nor touched."""
    with psycopg.connect(pg_dsn, autocommit=True) as app:
        app.execute("CREATE TABLE public.t (mine INT)")
        app.execute("INSERT INTO public.t VALUES (7)")
    database = PgDatabase(pg_dsn)
    try:
        migrate(
            database,
            format_name="agentmem.test",
            format_version=1,
            migrations=[Migration("0001", ["CREATE TABLE t (v TEXT)"])],
        )
        with database.transaction("insert") as cur:
            cur.execute("INSERT INTO t (v) VALUES (?)", ("ours",))
    finally:
        database.close()
    with psycopg.connect(pg_dsn) as app:
        assert app.execute("SELECT mine FROM public.t").fetchall() == [(7,)]
        assert app.execute("SELECT v FROM agentmem.t").fetchall() == [("ours",)]


# ---------------------------------------------------------------------------- migrations


def test_migrations_run_once_and_are_recorded(pg_dsn: str) -> None:
    database = PgDatabase(pg_dsn)
    try:
        kwargs = {"format_name": RACE_FORMAT, "format_version": 2}
        assert migrate(database, migrations=RACE_MIGRATIONS[:1], **kwargs) == ["0001_log"]  # type: ignore[arg-type]
        assert migrate(database, migrations=RACE_MIGRATIONS, **kwargs) == ["0002_more"]  # type: ignore[arg-type]
        assert migrate(database, migrations=RACE_MIGRATIONS, **kwargs) == []  # type: ignore[arg-type]
        with database.transaction("read") as cur:
            assert cur.execute("SELECT name FROM race_log ORDER BY name").fetchall() == [
                ("0001_log",),
                ("0002_more",),
            ]
    finally:
        database.close()


def test_processes_migrating_at_once_apply_each_migration_once(pg_dsn: str) -> None:
    children = [
        subprocess.Popen(
            [sys.executable, str(CHILD), "migrate", pg_dsn],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        for _ in range(4)
    ]
    time.sleep(1.0)  # let every child import agentmem and connect before they race
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    outputs = [child.communicate(timeout=60) for child in children]
    for child, (_, err) in zip(children, outputs, strict=True):
        assert child.returncode == 0, err
    applied = sorted(out.strip() for out, _ in outputs)
    assert applied == ["applied", "applied", "applied", "applied 0001_log,0002_more"]
    with psycopg.connect(pg_dsn) as check:
        assert check.execute("SELECT name FROM agentmem.race_log ORDER BY name").fetchall() == [
            ("0001_log",),
            ("0002_more",),
        ]
        assert check.execute(
            "SELECT name FROM agentmem.agentmem_migrations WHERE format = %s ORDER BY name",
            (RACE_FORMAT,),
        ).fetchall() == [("0001_log",), ("0002_more",)]


@pytest.mark.parametrize("newer", ["migration", "version"])
def test_a_database_from_a_newer_agentmem_is_refused_and_left_alone(
    pg_dsn: str, newer: str
) -> None:
    database = PgDatabase(pg_dsn)
    kwargs = {"format_name": RACE_FORMAT, "format_version": 2, "migrations": RACE_MIGRATIONS}
    try:
        migrate(database, **kwargs)  # type: ignore[arg-type]
        with database.transaction("age it") as cur:
            if newer == "migration":
                cur.execute(
                    "INSERT INTO agentmem_migrations (format, name) VALUES (?, '0003_future')",
                    (RACE_FORMAT,),
                )
            else:
                cur.execute(
                    "UPDATE agentmem_meta SET value = '3' WHERE format = ? AND key = 'version'",
                    (RACE_FORMAT,),
                )
        with pytest.raises(FormatVersionError, match="newer agentmem") as info:
            migrate(database, **kwargs)  # type: ignore[arg-type]
        assert info.value.supported == 2
        assert info.value.found == (3 if newer == "version" else None)
        with database.transaction("read") as cur:
            assert cur.execute("SELECT count(*) FROM race_log").fetchone() == (2,)
            names = cur.execute(
                "SELECT name FROM agentmem_migrations WHERE format = ?", (RACE_FORMAT,)
            ).fetchall()
            assert len(names) == (3 if newer == "migration" else 2)
    finally:
        database.close()


def test_a_failed_migration_applies_nothing(pg_dsn: str) -> None:
    database = PgDatabase(pg_dsn)
    broken = [
        Migration("0001_ok", ["CREATE TABLE fine (x INT)"]),
        Migration("0002_bad", ["CREATE TABLE fine (x INT)"]),  # already exists
    ]
    try:
        with pytest.raises(StorageError, match="migrate"):
            migrate(database, format_name="agentmem.test", format_version=1, migrations=broken)
        with database.transaction("read") as cur:
            row = cur.execute("SELECT to_regclass('fine') IS NULL").fetchone()
            assert row == (True,)
    finally:
        database.close()


# ---------------------------------------------------------------------------- locks


def test_advisory_key_is_stable() -> None:
    """Hosts running different agentmem releases must lock the same key for the same
    session: the hash is part of the format."""
    assert advisory_key("agentmem.sessions/agentmem", "abc") == -6531805018387113723
    assert advisory_key("a", "bc") != advisory_key("ab", "c")


def test_an_advisory_lock_is_exclusive_until_released(db: PgDatabase, pg_dsn: str) -> None:
    other = PgDatabase(pg_dsn)
    try:
        first = db.advisory_lock("ns", "k")
        second = other.advisory_lock("ns", "k")
        assert first.acquire() is first
        assert not second.try_acquire()
        with pytest.raises(StoreLockedError, match="ns k"):
            second.acquire()
        unrelated = db.advisory_lock("ns", "other key")
        assert unrelated.try_acquire()
        unrelated.release()
        first.release()
        assert second.try_acquire()
        second.release()
    finally:
        other.close()


def test_a_lock_lost_with_its_connection_is_taken_again_or_refused(
    db: PgDatabase, pg_dsn: str
) -> None:
    """Writes through a lock run on the lock's connection. When the server drops that
    connection (and the lock with it), the next write takes the lock again first; if
    someone else took it meanwhile, it raises StoreLockedError and writes nothing."""
    lock = db.advisory_lock("ns", "k")
    assert lock.try_acquire()

    def cut() -> None:
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_locks "
                "WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()"
            )
        time.sleep(0.2)  # the backend exits and releases the lock

    cut()
    with lock.transaction("write") as cur:
        cur.execute("INSERT INTO t (v) VALUES (?)", ("retaken",))
    rival = db.advisory_lock("ns", "k")
    assert not rival.try_acquire()  # ours again
    cut()
    assert rival.try_acquire()

    def write() -> None:
        with lock.transaction("write") as cur:
            cur.execute("INSERT INTO t (v) VALUES (?)", ("never",))

    with pytest.raises(StoreLockedError, match="another process holds it"):
        write()
    assert _rows(db) == ["retaken"]
    rival.release()


def test_a_failure_at_begin_gives_the_connection_back(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever fails at BEGIN (here an interrupt), the pooled connection goes back: with a
    pool of one, the next call still gets it instead of waiting out the timeout."""
    database = PgDatabase(pg_dsn, min_size=1, max_size=1, timeout=2.0)
    real_execute = psycopg.Connection.execute
    interrupts = [KeyboardInterrupt()]

    def execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if query == "BEGIN" and interrupts:
            raise interrupts.pop()
        return real_execute(self, query, *args, **kwargs)

    try:
        monkeypatch.setattr(psycopg.Connection, "execute", execute)
        with pytest.raises(KeyboardInterrupt), database.transaction("first"):
            pass
        monkeypatch.undo()
        with database.transaction("second") as cur:
            assert cur.execute("SELECT 1").fetchone() == (1,)
    finally:
        database.close()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"durability": "sometimes"},
        {"max_size": 0},
        {"min_size": 3, "max_size": 2},
        {"timeout": 0},
        {"schema": "bad; DROP"},
    ],
)
def test_unusable_settings_are_configuration_errors(pg_dsn: str, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        PgDatabase(pg_dsn, **kwargs)


def test_a_sessions_store_written_by_a_newer_agentmem_is_refused(pg_dsn: str) -> None:
    from agentmem.session_store import SessionStore

    SessionStore.postgres(pg_dsn).close()
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(
            "INSERT INTO agentmem.agentmem_migrations (format, name) "
            "VALUES ('agentmem.sessions', '0099_from_the_future')"
        )
    with pytest.raises(FormatVersionError, match="0099_from_the_future"):
        SessionStore.postgres(pg_dsn)
