"""Research quality over the eval questions: `make eval` (not part of the default tests).

Runs every question of ../shared/eval/python-docs-dev.jsonl as a research on the embedded stack
(docs on loopback, Temporal dev server, worker) and prints, per question and in total, whether an
expected page was cited and which expected terms the report contains.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from pathlib import Path

from deep_research.config import PROJECT_DIR
from deep_research.demo import embedded_stack
from deep_research.models import ResearchInput, ResearchResult
from deep_research.temporal_client import connect

EVAL_FILE = PROJECT_DIR.parent / "shared" / "eval" / "python-docs-dev.jsonl"


def score(case: dict, result: ResearchResult) -> dict:
    cited = [s.url for s in result.sources]
    pages = [p for p in case["expect_pages"] if any(u.split("#")[0].endswith("/" + p) for u in cited)]
    text = result.report_markdown
    terms = [t for t in case["expect_terms"] if t in text]
    return {"id": case["id"], "page_cited": bool(pages), "pages": pages, "terms_found": terms,
            "terms_expected": case["expect_terms"], "sources": len(cited), "fallbacks": result.fallbacks}


async def run_all(cases: list[dict], mode: str, optimization: str, settings) -> list[dict]:
    client = await connect(settings)
    rows = []
    for case in cases:
        result = await client.execute_workflow(
            "ResearchWorkflow", ResearchInput(question=case["question"], mode=mode, optimization=optimization),
            id=f"eval-{case['id']}-{uuid.uuid4().hex[:6]}", task_queue=settings.task_queue,
            result_type=ResearchResult,
        )
        row = score(case, result)
        rows.append(row)
        mark = "✔" if row["page_cited"] else "✘"
        print(f"{mark} {case['id']} page cited: {row['page_cited']!s:5}  terms {len(row['terms_found'])}/"
              f"{len(row['terms_expected'])} {row['terms_found']}  ({row['sources']} sources) {case['question']}",
              flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file", type=Path, default=EVAL_FILE)
    ap.add_argument("--mode", default="light")
    ap.add_argument("--optimization", default="balanced")
    ap.add_argument("--json", type=Path, help="also write the rows to this file")
    args = ap.parse_args(argv)
    if not args.file.is_file():
        print(f"error: eval file {args.file} not found", file=sys.stderr)
        return 2
    cases = [json.loads(line) for line in args.file.read_text().splitlines() if line.strip()]
    with embedded_stack() as settings:
        rows = asyncio.run(run_all(cases, args.mode, args.optimization, settings))
    cited = sum(r["page_cited"] for r in rows)
    terms = sum(len(r["terms_found"]) for r in rows)
    expected = sum(len(r["terms_expected"]) for r in rows)
    print(f"total: expected page cited for {cited}/{len(rows)} questions; expected terms found {terms}/{expected}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
