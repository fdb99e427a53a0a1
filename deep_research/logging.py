"""structlog set-up: JSON lines when not on a terminal, readable console output when on one.

Activity log lines are bound to the workflow and activity ids (see `activity_logger`).
Never log secrets: settings objects are not logged, only the names of what is configured.
"""

from __future__ import annotations

import logging
import sys

import structlog


def configure_logging(level: str = "INFO", *, json: bool | None = None) -> None:
    if json is None:
        json = not sys.stderr.isatty()
    renderer = structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")


def activity_logger(name: str = "activity") -> structlog.stdlib.BoundLogger:
    """A logger bound to the current activity's workflow id, activity id, type and attempt."""
    from temporalio import activity

    info = activity.info()
    return structlog.get_logger(name).bind(
        workflow_id=info.workflow_id,
        run_id=info.workflow_run_id,
        activity_id=info.activity_id,
        activity=info.activity_type,
        attempt=info.attempt,
    )
