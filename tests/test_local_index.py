from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from deep_research.corpus import PYTHON_DOCS, serve_directory
from deep_research.search.base import SearchError
from deep_research.search.local_index import (
    LocalIndexProvider,
    build_index,
    build_match_query,
    main,
    search_index,
)

BASE = "http://127.0.0.2:8765/"
EVAL_FILE = Path("/work/shared/eval/python-docs-dev.jsonl")


def _page(title: str, body: str, *, links: list[str] = (), headings: list[str] = ()) -> str:
    """A Sphinx-like page: the content sits in div.body, surrounded by chrome."""
    nav = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    sections = "".join(f"<section><h2>{h}<a class='headerlink' href='#x'>¶</a></h2></section>" for h in headings)
    return f"""<!DOCTYPE html>
<html><head><title>{title} &#8212; Test docs</title>
<script>var sidebarchrome = "scriptword";</script><style>.x {{ color: red }}</style></head>
<body>
<div class="related" role="navigation"><ul><li>relatedchrome</li>{nav}</ul></div>
<div class="document"><div class="documentwrapper"><div class="bodywrapper">
<div class="body" role="main"><section><h1>{title}<a class="headerlink" href="#t">¶</a></h1>
{body}{sections}</section></div></div></div>
<div class="sphinxsidebar" role="navigation"><p>sidebarchrome quux</p></div></div>
<div class="footer">footerchrome copyright</div>
</body></html>"""


PAGES = {
    "index.html": _page(
        "Test documentation",
        "<p>Welcome to the test documentation for the widget toolkit.</p>",
        links=["library/frob.html", "library/slots.html", "library/proc.html", "guide/intro.html",
               "whatsnew/1.0.html", "genindex.html", "_sources/index.rst.txt", "notes.txt"],
    ),
    "library/frob.html": _page(
        "frob — Frobnicate widgets",
        "<p>The <code>frobnicate()</code> function frobnicates a widget in place. "
        "Frobnication is <b>idempotent</b>: frobnicating twice is the same as once.</p>"
        "<dl class='py function'><dt class='sig' id='frob.frobnicate'>"
        "<em class='property'>async </em><span class='sig-name'>frob.frobnicate</span>(widget)</dt>"
        "<dd><p>Frobnicate <em>widget</em>.</p></dd></dl>",
        links=["../index.html", "slots.html"],
        headings=["Frobnication details"],
    ),
    "library/slots.html": _page(
        "Attribute storage",
        "<p>Declaring <code>__slots__</code> on a class saves memory: instances get no "
        "<code>__dict__</code>, only fixed slots for the named attributes.</p>",
        links=["../index.html", "proc.html"],
        headings=["__slots__"],
    ),
    "library/proc.html": _page(
        "proc — Run child processes",
        "<p>Call <code>proc.run(args, capture_output=True)</code> to run a command and capture "
        "its standard output and standard error.</p>",
        links=["../index.html", "../guide/intro.html"],
    ),
    "guide/intro.html": _page(
        "Introduction to widgets",
        "<p>A widget is a small gadget. This guide explains widgets, gadgets and gizmos for "
        "beginners, step by step.</p>",
        links=["../index.html", "../whatsnew/1.0.html"],
    ),
    "whatsnew/1.0.html": _page(
        "What's new in 1.0",
        "<p>New frobnicate function. New __slots__ support. New proc.run with capture_output. "
        "Widgets, gadgets and gizmos.</p>",
        links=["../index.html"],
    ),
    # Not content: must be skipped.
    "genindex.html": _page("Index", "<p>frobnicate widget gizmo index entries</p>"),
    "search.html": _page("Search", "<p>search page frobnicate</p>"),
    "_static/page.html": _page("Static", "<p>staticonlyword frobnicate</p>"),
    "_sources/index.rst.txt": "Welcome sourceonlyword",
    "notes.txt": "plain text notesonlyword",
}
CONTENT_PAGES = {"index.html", "library/frob.html", "library/slots.html", "library/proc.html",
                 "guide/intro.html", "whatsnew/1.0.html"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    for rel, text in PAGES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def small_db(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("idx") / "index.sqlite"
    assert build_index(db, folder=corpus, base_url=BASE) == len(CONTENT_PAGES)
    return db


def _urls(db: Path, question: str, n: int = 10) -> list[str]:
    return [h.url.removeprefix(BASE) for h in search_index(db, question, n)]


def test_query_returns_the_right_page_first(small_db: Path) -> None:
    assert _urls(small_db, "How do I frobnicate a widget?")[0] == "library/frob.html"
    assert _urls(small_db, "What does __slots__ save for a class?")[0] == "library/slots.html"
    assert _urls(small_db, "run a command and capture_output")[0] == "library/proc.html"
    assert _urls(small_db, "introduction for beginners")[0] == "guide/intro.html"


def test_skipped_pages_and_chrome_are_not_indexed(small_db: Path) -> None:
    everything = _urls(small_db, "frobnicate widget gizmo index entries search page", 50)
    assert set(everything) <= CONTENT_PAGES
    for word in ("sidebarchrome", "relatedchrome", "footerchrome", "scriptword",
                 "staticonlyword", "sourceonlyword", "notesonlyword"):
        assert search_index(small_db, word, 5) == [], word


def test_hits_are_well_formed(small_db: Path) -> None:
    hits = search_index(small_db, "frobnicate widget", 10)
    assert hits
    assert all(h.provider == "local" for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    frob = hits[0]
    assert frob.title == "frob — Frobnicate widgets"  # h1, without the permalink mark
    for hit in hits:
        assert hit.snippet
        assert not re.search(r"<[^>]+>", hit.snippet), hit.snippet
        assert "¶" not in hit.snippet
    assert "frobnicates a widget" in frob.snippet


def test_release_notes_are_demoted(small_db: Path) -> None:
    urls = _urls(small_db, "widgets gadgets gizmos")
    assert urls.index("guide/intro.html") < urls.index("whatsnew/1.0.html")


async def test_provider_search_and_suggestions(small_db: Path) -> None:
    provider = LocalIndexProvider(small_db)
    assert provider.name == "local"
    hits = await provider.search("frobnicate a widget", max_results=2)
    assert len(hits) <= 2 and hits[0].url == BASE + "library/frob.html"
    suggestions = await provider.suggestions("frobnicate a widget", limit=2)
    assert 1 <= len(suggestions) <= 2
    assert all(s.startswith("frobnicate widget ") for s in suggestions)
    assert suggestions == await provider.suggestions("frobnicate a widget", limit=2)  # deterministic


async def test_missing_index_raises_non_retryable_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "index.sqlite"
    with pytest.raises(SearchError) as info:
        await LocalIndexProvider(missing).search("anything", max_results=5)
    assert str(missing) in str(info.value)
    assert "local_index build" in str(info.value)
    assert info.value.retryable is False


@pytest.mark.parametrize(
    "question",
    [
        'what does "frobnicate do',
        "frob* OR widget NOT -gadget",
        "column:filter title:frob",
        "(widget AND (gizmo",
        "NEAR(widget gadget, 2) ^start",
        'a "quoted phrase" with - dashes + plus {braces} [brackets]',
        "__slots__ __dict__ __init__.py os.path.join capture_output=True",
        "???",
        "",
        "the and of",
    ],
)
def test_fts_special_characters_do_not_crash(small_db: Path, question: str) -> None:
    hits = search_index(small_db, question, 5)
    assert isinstance(hits, list)


def test_match_query_quotes_every_term() -> None:
    query = build_match_query('How do I use "typing.Protocol" with __slots__ (and *)?')
    for phrase in query.split(" OR "):
        assert re.fullmatch(r'"[a-z0-9 ]+"', phrase), phrase
    assert '"typing protocol"' in query and '"slots"' in query and '"00slots00"' in query
    assert '"how"' not in query and '"do"' not in query


def test_build_from_start_url(corpus: Path, tmp_path: Path) -> None:
    server, base_url = serve_directory(corpus)
    try:
        assert base_url.startswith("http://127.0.0.2:")
        db = tmp_path / "crawl.sqlite"
        n = build_index(db, start_url=base_url + "index.html")
        assert n == len(CONTENT_PAGES)
        hits = search_index(db, "frobnicate a widget", 3)
        assert hits[0].url == base_url + "library/frob.html"
        assert all(h.url.startswith(base_url) for h in hits)
        assert build_index(tmp_path / "two.sqlite", start_url=base_url + "index.html", max_pages=2) == 2
    finally:
        server.shutdown()
        server.server_close()


def test_cli_build_and_query(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "cli.sqlite"
    assert main(["build", "--folder", str(corpus), "--base-url", BASE, "--db", str(db)]) == 0
    assert main(["query", "--db", str(db), "How do I frobnicate?"]) == 0
    out = capsys.readouterr().out
    assert f"indexed {len(CONTENT_PAGES)} documents" in out
    assert " 1. " in out and BASE + "library/frob.html" in out
    assert main(["query", "--db", str(tmp_path / "missing.sqlite"), "x y"]) == 2


# --------------------------------------------------------------------------- real Python docs


@pytest.fixture(scope="module")
def python_docs_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not PYTHON_DOCS.is_dir():
        pytest.skip(f"{PYTHON_DOCS} is missing (Debian package python3.11-doc not installed)")
    if not EVAL_FILE.is_file():
        pytest.skip(f"eval questions {EVAL_FILE} are missing")
    db = tmp_path_factory.mktemp("pydocs") / "index.sqlite"
    n = build_index(db, folder=PYTHON_DOCS, base_url=BASE)
    assert n > 400
    return db


def test_python_docs_eval_questions_hit_expected_page_in_top5(python_docs_db: Path) -> None:
    questions = [json.loads(line) for line in EVAL_FILE.read_text().splitlines() if line.strip()]
    misses = []
    for q in questions:
        urls = _urls(python_docs_db, q["question"], 5)
        if not set(urls) & set(q["expect_pages"]):
            misses.append((q["id"], q["question"], urls))
    assert len(questions) - len(misses) >= 9, misses
