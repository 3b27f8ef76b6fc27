"""Optuna and the study in its database.

Optuna is an optional dependency (the ``tune`` extra): it is imported here, inside functions, when
a search runs; without it :func:`need_optuna` is one error line. A study lives in a database
(SQLite in the study folder by default, or any SQLAlchemy URL, e.g. ``postgresql://...`` shared
by several machines), so a search that stops goes on where it was, and several processes
add trials to one study. A study remembers what it searches and the options every trial shares
(``settings``); opening it with others is refused, so its trials stay comparable.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

from rationale_cli.runtime.errors import UserError

NEEDS_OPTUNA = "rationale tune needs the tune extra: pip install 'rationale-cli[tune]'"
STUDY_FILE = "study.db"
# a process's running trial writes a heartbeat this often (seconds); a trial without one for
# GRACE seconds (its process was killed) is marked failed when a later trial starts
HEARTBEAT, GRACE = 30, 120
# what another process creating the same new database at once makes the tables' creation say
RACING = ("already exists", "UNIQUE constraint failed", "duplicate key", "database is locked")
OPEN_ATTEMPTS = 5
# seconds a write waits for another process's lock on a SQLite study before it is one error line
SQLITE_WAIT = 20
# pruning: none before this many trials have completed, nor before this epoch
STARTUP_TRIALS, WARMUP_EPOCHS = 4, 2


def need_optuna():
    """The ``optuna`` module, or the one error line that says how to install it."""
    try:
        import optuna
    except ImportError:
        raise UserError(NEEDS_OPTUNA) from None
    return optuna


@contextlib.contextmanager
def quiet_optuna() -> Iterator[None]:
    """Optuna's own log lines and its warnings of experimental features left out (the search
    reports each trial itself); its log level is restored after."""
    optuna = need_optuna()
    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            yield
    finally:
        optuna.logging.set_verbosity(level)


def default_storage(out: Path) -> str:
    """The SQLite database of the study folder ``out``."""
    return f"sqlite:///{(out / STUDY_FILE).resolve()}"


def redacted(url: str) -> str:
    """``url`` without its password, to be shown and written."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


def first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


def root_cause(err: BaseException) -> BaseException:
    """The first error of the chain that led to ``err`` (the database driver's own)."""
    while err.__cause__ is not None or err.__context__ is not None:
        err = err.__cause__ or err.__context__
    return err


def database_error(url: str, err: BaseException) -> UserError:
    """The line for a database that refused a write (read-only, locked by another process past
    :data:`SQLITE_WAIT` seconds, full)."""
    cause = first_line(root_cause(err))
    hint = (f"another process has held a lock on it for {SQLITE_WAIT} s; end it or wait for it"
            if "locked" in cause else "give a --storage or --out that can be written")
    return UserError(f"--storage {redacted(url)}: cannot write the study's database ({cause}); {hint}")


@contextlib.contextmanager
def database_errors(url: str) -> Iterator[None]:
    """The block's database errors as :func:`database_error`'s line."""
    optuna = need_optuna()
    from sqlalchemy.exc import SQLAlchemyError

    try:
        yield
    except (optuna.exceptions.StorageInternalError, SQLAlchemyError) as err:
        raise database_error(url, err) from None


def open_storage(url: str):
    """Optuna's storage at ``url`` (created if new), or one error line naming the URL. Processes
    that create the same new database at once race to make its tables: the loser tries again
    (at once refused; a lock held for :data:`SQLITE_WAIT` seconds is no race)."""
    optuna = need_optuna()
    engine = {"connect_args": {"timeout": SQLITE_WAIT}} if url.startswith("sqlite") else {"pool_pre_ping": True}
    for attempt in range(1, OPEN_ATTEMPTS + 1):
        started = time.monotonic()
        try:
            with quiet_optuna():
                return optuna.storages.RDBStorage(url, engine_kwargs=engine, heartbeat_interval=HEARTBEAT,
                                                  grace_period=GRACE)
        except ImportError:
            raise UserError(f"--storage {redacted(url)}: the database driver for this URL is not installed "
                            "(e.g. pip install psycopg2-binary for postgresql://)") from None
        except Exception as err:  # SQLAlchemy's: a URL it cannot parse, an unknown dialect, no connection
            racing = any(words in str(err) for words in RACING) and time.monotonic() - started < SQLITE_WAIT / 2
            if attempt < OPEN_ATTEMPTS and racing:
                time.sleep(0.2 * attempt)
                continue
            if "locked" in str(err):
                raise database_error(url, err) from None
            raise UserError(f"--storage {redacted(url)}: cannot open the study's database "
                            f"({type(err).__name__}: {first_line(err)}); expected a database URL such as "
                            "sqlite:///study.db or postgresql://user:password@host/name") from None


def same_json(value: Any) -> Any:
    """``value`` as it comes back from a study's JSON attributes (tuples as lists)."""
    return json.loads(json.dumps(value))


def open_study(storage, name: str, settings: dict, *, pruner=None, constraints: Callable | None = None,
               comparable: Callable[[dict], dict] = lambda s: s, warmup: int = WARMUP_EPOCHS):
    """The study ``name`` in ``storage`` (made if new, with ``settings``; refused if it holds other
    ``settings``, both as ``comparable`` makes them): minimizing validation task loss, drawn by TPE
    (``constraints``: a trial's constraint values, <= 0 where it is feasible), pruned by the
    median rule after ``warmup`` epochs unless ``pruner``."""
    optuna = need_optuna()
    with quiet_optuna():
        sampler = optuna.samplers.TPESampler(constraints_func=constraints)
        pruner = pruner or optuna.pruners.MedianPruner(n_startup_trials=STARTUP_TRIALS,
                                                       n_warmup_steps=warmup)
        study = optuna.create_study(storage=storage, study_name=name, direction="minimize", sampler=sampler,
                                    pruner=pruner, load_if_exists=True)
    saved = study.user_attrs.get("settings")
    settings = same_json(settings)
    if saved is None:
        study.set_user_attr("settings", settings)
    elif comparable(saved) != comparable(settings):
        raise UserError(f"study {name}: it was made with other settings "
                        f"({difference(comparable(saved), comparable(settings))}); "
                        "run it with the options it was made with, or give another --out or --study")
    return study


def difference(saved: dict, now: dict) -> str:
    """The first setting that differs, in words."""
    for key in sorted(set(saved) | set(now)):
        if saved.get(key) != now.get(key):
            if isinstance(saved.get(key), dict) and isinstance(now.get(key), dict):
                inner = difference(saved[key], now[key])
                return f"{key}: {inner}"
            return f"{key} was {json.dumps(saved.get(key))}, now {json.dumps(now.get(key))}"
    return "none"
