"""The research CLI: run, start, watch, status, cancel, extend, result.

    python starter.py run "How do I ...?" --mode light --optimization balanced
    python starter.py watch <workflow-id>
    python starter.py extend <workflow-id> 5
    python starter.py cancel <workflow-id> --reason "enough"

Input is validated before any workflow starts; `--json` prints machine-readable output.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import uuid
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import TemporalError
from temporalio.service import RPCError

from deep_research.config import PROJECT_DIR, load_settings
from deep_research.limits import MODES, OPTIMIZATIONS
from deep_research.models import CancelRequest, ExtendRequest, ExtendResult, Progress, ResearchInput, ResearchResult
from deep_research.temporal_client import connect
from workflows.research import ResearchWorkflow

DEFAULT_OUT = PROJECT_DIR / "reports"
POLL_S = 1.0
REPORT_TAIL_LINES = 12
ICONS = {"pending": "[dim]○[/]", "running": "[yellow]◐[/]", "complete": "[green]✔[/]", "error": "[red]⚠[/]"}

console = Console(stderr=True)


class CliError(Exception):
    """A problem the user can fix; printed without a traceback, exit code 2."""


# ------------------------------------------------------------------ input


def check_provider(spec: str | None) -> str | None:
    """A known provider name, a comma list of them, or a dotted custom module name (which the
    worker must allow); anything else is refused here, naming the known providers."""
    if spec is None:
        return None
    from deep_research.search.factory import known_providers, split_names

    names = split_names(spec)
    known = known_providers()
    for name in names or [spec]:
        if name not in known and not re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", name):
            raise CliError(f"unknown search provider {name!r} (known: {', '.join(known)}; "
                           f"or a dotted module name of a custom provider)")
    return ",".join(names)


def build_input(args: argparse.Namespace) -> ResearchInput:
    provider = check_provider(getattr(args, "provider", None))
    try:
        return ResearchInput(question=args.question, mode=args.mode, optimization=args.optimization,
                             seed_urls=args.seed_url or [], search_provider=provider)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
                             for e in exc.errors())
        raise CliError(f"invalid research input: {problems}") from None


def workflow_id_for(question: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", question.lower()).strip("-")[:40].strip("-") or "research"
    return f"research-{slug}-{uuid.uuid4().hex[:6]}"


# ------------------------------------------------------------------ rendering


def _writing(p: Progress) -> bool:
    return any(step.id == "finalize" and step.state == "running" for step in p.steps)


def render_progress(p: Progress, report_text: str | None = None) -> Table:
    table = Table.grid(padding=(0, 1))
    for step in p.steps:
        detail = step.message
        if step.id == "crawl" and p.crawl_total:
            done = min(p.crawl_current, p.crawl_total)
            width = 24
            filled = int(width * done / p.crawl_total)
            detail = f"[{'█' * filled}{'·' * (width - filled)}] {done}/{p.crawl_total} {p.crawl_url[-50:]}"
        table.add_row(ICONS[step.state], step.label, f"[dim]{detail}[/]")
    footer = f"status: {p.status}   deadline: {p.deadline[11:19]} UTC"
    if p.tokens_used:
        footer += f"   LLM: {p.tokens_used} tokens, ${p.cost_usd:.4f}"
    if p.fallbacks:
        footer += "   fallbacks: " + "; ".join(p.fallbacks)
    table.add_row("", "", f"[dim]{footer}[/]")
    if report_text:  # the report as the LLM writes it: its last lines
        table.add_row("", "", Text("\n".join(report_text.splitlines()[-REPORT_TAIL_LINES:])))
    return table


def write_report(result: ResearchResult, workflow_id: str, out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    md, js = out_dir / f"{workflow_id}.md", out_dir / f"{workflow_id}.json"
    md.write_text(result.report_markdown, encoding="utf-8")
    js.write_text(result.model_dump_json(indent=2), encoding="utf-8")
    return md, js


# ------------------------------------------------------------------ commands


async def watch(handle: WorkflowHandle, *, as_json: bool) -> None:
    """Live progress until the workflow closes."""
    result_task = asyncio.create_task(handle.result())
    last, shown = None, ""
    if as_json or not console.is_terminal:
        while not result_task.done():
            p = await _query(handle)
            if p is not None and p.model_dump() != last:
                last = p.model_dump()
                print(json.dumps({"event": "progress", **last}), flush=True)
            text = await streamed_report(handle) if p is not None and _writing(p) else None
            if text and text.startswith(shown) and len(text) > len(shown):
                print(json.dumps({"event": "report-text", "text": text[len(shown):]}), flush=True)
                shown = text
            await asyncio.wait({result_task}, timeout=POLL_S)
    else:
        with Live(console=console, refresh_per_second=4) as live:
            p = None
            while not result_task.done():
                p = await _query(handle) or p
                text = await streamed_report(handle) if p is not None and _writing(p) else None
                if p is not None:
                    live.update(render_progress(p, text))
                await asyncio.wait({result_task}, timeout=POLL_S)
            p = await _query(handle)
            if p is not None:
                live.update(render_progress(p))
    try:
        result_task.result()
    except WorkflowFailureError:
        pass  # reported by the caller through `finish`


async def streamed_report(handle: WorkflowHandle) -> str | None:
    """The report text written so far, from the generate step's last heartbeat (see activities/report.py)."""
    try:
        description = await handle.describe()
    except RPCError:
        return None
    for pending in description.raw_description.pending_activities:
        if pending.activity_type.name == "generate_report" and pending.heartbeat_details.payloads:
            details = await handle._client.data_converter.decode(pending.heartbeat_details.payloads)
            if details and isinstance(details[0], dict):
                return details[0].get("text")
    return None


async def _query(handle: WorkflowHandle) -> Progress | None:
    try:
        return await handle.query(ResearchWorkflow.progress)
    except RPCError:
        return None  # not started yet, or closed and its worker gone


async def finish(handle: WorkflowHandle, out_dir: Path, *, as_json: bool) -> int:
    try:
        result: ResearchResult = await handle.result()
    except WorkflowFailureError as exc:
        cause = exc.cause
        while getattr(cause, "cause", None) is not None:
            cause = cause.cause
        message = f"research {handle.id} did not finish: {cause or exc}"
        print(json.dumps({"event": "failed", "workflow_id": handle.id, "error": str(cause or exc)})
              if as_json else message, file=sys.stdout if as_json else sys.stderr)
        return 1
    md, js = write_report(result, handle.id, out_dir)
    if as_json:
        print(json.dumps({"event": "result", "workflow_id": handle.id, "status": result.status,
                          "report": str(md), "sources_json": str(js), "sources": len(result.sources),
                          "fallbacks": result.fallbacks}))
    else:
        console.print(f"[bold]{result.status}[/]: {len(result.sources)} sources, {result.pages_crawled} pages crawled, "
                      f"report by {result.report_method}; sandbox terminated: {result.sandbox_terminated}")
        if result.tokens_used:
            console.print(f"  LLM: {result.tokens_used} tokens, ${result.cost_usd:.4f}; citations checked "
                          f"{result.citations_checked}, unsupported {result.citations_unsupported}")
        for fallback in result.fallbacks:
            console.print(f"  fallback: {fallback}")
        print(f"report: {md}\nsources: {js}")
    return 0


async def start(client: Client, args: argparse.Namespace, inp: ResearchInput) -> WorkflowHandle:
    settings = load_settings()
    handle = await client.start_workflow(
        ResearchWorkflow.run, inp, id=args.id or workflow_id_for(inp.question), task_queue=settings.task_queue,
    )
    if args.json:
        print(json.dumps({"event": "started", "workflow_id": handle.id, "run_id": handle.result_run_id}), flush=True)
    else:
        console.print(f"started [bold]{handle.id}[/] (Web UI: http://localhost:8233/namespaces/"
                      f"{settings.temporal_namespace}/workflows/{handle.id})")
    return handle


async def dispatch(args: argparse.Namespace) -> int:
    inp = build_input(args) if args.command in ("run", "start") else None  # validate before connecting
    if args.command == "extend" and not (0 < args.minutes <= 60):
        raise CliError(f"minutes must be > 0 and <= 60, got {args.minutes:g}")
    client = await connect(load_settings())
    out_dir = Path(getattr(args, "out", None) or DEFAULT_OUT)
    if args.command in ("run", "start"):
        handle = await start(client, args, inp)
        if args.command == "start":
            return 0
        await watch(handle, as_json=args.json)
        return await finish(handle, out_dir, as_json=args.json)
    handle = client.get_workflow_handle(args.workflow_id)
    if args.command == "watch":
        await watch(handle, as_json=args.json)
        return await finish(handle, out_dir, as_json=args.json)
    if args.command == "result":
        return await finish(handle, out_dir, as_json=args.json)
    if args.command == "status":
        p = await handle.query(ResearchWorkflow.progress)
        print(p.model_dump_json(indent=2)) if args.json else console.print(render_progress(p))
        return 0
    if args.command == "cancel":
        await handle.signal(ResearchWorkflow.cancel, CancelRequest(reason=args.reason))
        print(json.dumps({"event": "cancel-sent", "workflow_id": handle.id}) if args.json
              else f"cancel sent to {handle.id}: {args.reason}")
        return 0
    if args.command == "extend":
        out: ExtendResult = await handle.execute_update(ResearchWorkflow.extend_deadline,
                                                        ExtendRequest(minutes=args.minutes))
        print(json.dumps({"event": "extended", "workflow_id": handle.id, "deadline": out.deadline}) if args.json
              else f"{handle.id}: deadline is now {out.deadline}")
        return 0
    raise CliError(f"unknown command {args.command}")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="starter.py", description="Durable deep research on Temporal")
    ap.add_argument("--json", action="store_true", help="machine-readable output (JSON lines)")
    sub = ap.add_subparsers(dest="command", required=True)
    for name, text in (("run", "start a research and watch it to the end"), ("start", "start a research")):
        p = sub.add_parser(name, help=text)
        p.add_argument("question")
        p.add_argument("--mode", choices=MODES, default="light")
        p.add_argument("--optimization", choices=OPTIMIZATIONS, default="balanced")
        p.add_argument("--seed-url", action="append", help="a page to crawl besides the search results")
        p.add_argument("--provider", help="search provider (default: the worker's DR_SEARCH_PROVIDER)")
        p.add_argument("--id", help="workflow id (default: derived from the question)")
        p.add_argument("--out", help=f"report directory (default: {DEFAULT_OUT})")
    for name, text in (("watch", "live progress, then the report"), ("status", "progress now"),
                       ("result", "wait for the result and write the report")):
        p = sub.add_parser(name, help=text)
        p.add_argument("workflow_id")
        p.add_argument("--out", help=f"report directory (default: {DEFAULT_OUT})")
    p = sub.add_parser("cancel", help="stop a research; the sandbox is terminated, a partial report written")
    p.add_argument("workflow_id")
    p.add_argument("--reason", default="cancelled by user")
    p = sub.add_parser("extend", help="give a research more minutes before its deadline")
    p.add_argument("workflow_id")
    p.add_argument("minutes", type=float)
    # Accept --json after the sub-command too.
    for action in sub.choices.values():
        action.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return asyncio.run(dispatch(args))
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RPCError as exc:
        print(f"error: Temporal said: {exc}", file=sys.stderr)
        return 1
    except TemporalError as exc:  # update refused, duplicate id, query failed, ...
        cause = getattr(exc, "cause", None)
        print(f"error: {exc}{f': {cause}' if cause else ''}", file=sys.stderr)
        return 1
    except RuntimeError as exc:  # e.g. no Temporal server at the address
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
