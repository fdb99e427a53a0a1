"""Local full-text search over a corpus of HTML pages: SQLite FTS5 with BM25 ranking.

Build an index from a folder of HTML files and the base URL they are served at (see
`deep_research.corpus`), or by crawling from a start URL:

    python -m deep_research.search.local_index build \\
        --folder /usr/share/doc/python3.11/html --base-url http://127.0.0.2:8765/ --db .data/index.sqlite
    python -m deep_research.search.local_index build --start-url http://127.0.0.2:8765/ --db .data/index.sqlite
    python -m deep_research.search.local_index query --db .data/index.sqlite "What is the GIL?"

Index layout (tokenizer `porter unicode61` everywhere):

- `docs(title, headings, body, names, url, summary, prior)`, FTS5; url/summary/prior UNINDEXED.
  `headings` holds the h1-h4 texts (section numbers stripped) plus the terms of definition lists
  (Sphinx API entries such as `Path.rglob`, glossary terms): the names a page is *about*.
  `names` holds every identifier with an underscore in a single-token spelling (see
  `identifier_token`). `prior` is a static per-page factor (see `page_prior`).
- `heads(title, headings)`, FTS5, same rowids: title and headings alone, so that BM25 length
  normalisation compares headings with headings (see `HEADS_SCORE_WEIGHT`).
- `meta(key, value)`: schema version, source, document count, build time.

Ranking: score = (-bm25(docs, TITLE, HEADINGS, BODY, NAMES) + HEADS_SCORE_WEIGHT *
-bm25(heads, TITLE, HEADINGS)) * prior; higher is better.

Identifiers: `unicode61` splits on `_` and `.`, so `__slots__` is indexed as the token `slots`,
`capture_output` as `capture` `output`, and `typing.Protocol` as `typing` `protocol`. A query
identifier therefore becomes the FTS5 phrase of its parts (`"capture output"`, which matches
exactly those adjacent tokens), plus its single-token spelling for the `names` column
(`"00slots00"`, which only matches the real `__slots__`, not "type slots"), plus the parts of
dotted names as single terms.
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import os
import re
import sqlite3
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urldefrag, urljoin, urlsplit

from lxml import etree

from deep_research.models import SearchHit
from deep_research.search.base import SearchError, SearchProvider

SCHEMA_VERSION = "1"

# bm25() column weights: a match in the title or a heading says much more about what a page is
# about than a match somewhere in a long body.
TITLE_WEIGHT = 10.0
HEADINGS_WEIGHT = 4.0
BODY_WEIGHT = 1.0
NAMES_WEIGHT = 1.0  # the `names` column: identifiers with underscores kept whole
# FTS5's bm25() adds the weighted column frequencies up before saturating them and normalises by
# the length of the whole row, so on a long page (a reference page of 15,000 words) even a title
# match counts for little. A second FTS5 table `heads(title, headings)`, normalised by the length
# of the headings alone, measures what a page is *about*; its score is added with this factor.
HEADS_SCORE_WEIGHT = 2.0
CANDIDATES = 300  # rows taken from each table before combining the scores

SNIPPET_TOKENS = 30
SUMMARY_CHARS = 300
MAX_QUERY_PHRASES = 24

# Release notes and changelogs mention nearly every feature once, so they match almost any
# question; their scores are multiplied by this factor. A general rule, not tied to one corpus.
RELEASE_NOTES_PRIOR = 0.35
HUB_LINK_DENSITY = 0.6
HUB_PRIOR = 0.5
_RELEASE_NOTES_RE = re.compile(r"(?:^|/)(?:whatsnew|changelog|changes|news|release[-_]?notes?)(?:/|\.|$)", re.I)

# Pages that are not content: sources, static files, generated indexes and the search page.
_SKIP_DIRS = frozenset({"_sources", "_static", "_images", "_downloads"})
_SKIP_NAME_RE = re.compile(r"^(?:genindex.*|py-modindex|search|modindex)\.html?$", re.I)
_HTML_SUFFIXES = (".html", ".htm")

# Elements that are page chrome rather than content: by tag, by ARIA role, and by class
# (generic names plus Sphinx's sidebar / "related" navigation bars / footer / permalink marks).
_CHROME_TAGS = ("script", "style", "noscript", "template", "nav", "header", "footer", "form",
                "iframe", "svg", "button", "select")
_CHROME_ROLES = frozenset({"navigation", "search", "banner", "contentinfo"})
_CHROME_CLASSES = frozenset({"sphinxsidebar", "sphinxsidebarwrapper", "related", "footer",
                             "mobile-nav", "headerlink", "sidebar", "navbar", "breadcrumbs",
                             "skip-link", "cookie-banner"})
# Where the main content is, most specific first.
_MAIN_XPATHS = (
    "//*[@role='main']",
    "//main",
    "//article",
    "//div[contains(concat(' ', normalize-space(@class), ' '), ' body ')]",
    "//body",
)
# Section headings; h4 too, because Sphinx puts sub-subsections (`3.3.2.4. __slots__`) there.
_SECTION_NUMBER_RE = re.compile(r"^(?:\d+\.)+\d*\s+")
_BLOCK_TAGS = frozenset({
    "p", "div", "section", "li", "ul", "ol", "dl", "dt", "dd", "pre", "blockquote", "table",
    "tr", "td", "th", "h1", "h2", "h3", "h4", "h5", "h6", "br", "hr", "figure", "figcaption",
    "caption", "article", "aside", "main", "details", "summary",
})

# English stopwords plus question words and filler common in questions ("how do I ...").
STOPWORDS = frozenset("""
a about above after again against all also am an and any are aren as at be because been before
being below between both but by can cannot could couldn did didn do does doesn doing don down
during each either else ever every few for from further get gets getting give given go goes had
has have having he her here hers herself him himself his how i if in into is isn it its itself
just let lets like may me might mine more most much must my myself need needs no nor not now of
off often on once one only onto or other otherwise our ours ourselves out over own per please
quite rather really same several shall she should so some such than that the their theirs them
themselves then there these they thing things this those though through thus to too under until
up upon us use used uses using very via want wants was way ways we were what whats when where
whether which while who whom whose why will with within without would yes yet you your yours
yourself yourselves tell explain mean means meaning work works difference different many
""".split())

_WORD_RE = re.compile(r"[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*")
_PART_RE = re.compile(r"[A-Za-z0-9]+")
_IDENT_RE = re.compile(r"[A-Za-z0-9_]*_[A-Za-z0-9_]*")


def identifier_token(word: str) -> str | None:
    """The single-token form of an identifier with underscores, for the `names` column.

    unicode61 splits on "_", so `__slots__` would only ever be the token `slots` (also the word
    in "type slots"); `names` keeps it whole by spelling "_" as "0": `__slots__` -> `00slots00`,
    `capture_output` -> `capture0output`. Words without "_" or without alphanumerics: None.
    """
    if "_" not in word or not any(c.isalnum() for c in word):
        return None
    return word.lower().replace("_", "0")


def identifier_tokens(text: str) -> list[str]:
    """identifier_token() of every identifier with an underscore in `text`, repeats kept."""
    return [t for t in map(identifier_token, _IDENT_RE.findall(text)) if t]


# --------------------------------------------------------------------------- extraction


@dataclass
class Page:
    url: str
    title: str
    headings: str
    body: str
    summary: str
    link_density: float = 0.0  # share of the body text that is link text


def _clean(text: str) -> str:
    return " ".join(text.replace("\u00b6", " ").split())


def is_indexable_path(path: str) -> bool:
    """Whether a relative or URL path names a content page (HTML, not sources/static/indexes)."""
    parts = PurePosixPath(path).parts
    if any(part in _SKIP_DIRS for part in parts):
        return False
    name = parts[-1] if parts and not path.endswith("/") else ""
    if not name:
        return True  # a directory URL; the server decides what it is
    if _SKIP_NAME_RE.match(name):
        return False
    if "." in name and not name.lower().endswith(_HTML_SUFFIXES):
        return False
    return True


def page_prior(url: str, link_density: float = 0.0) -> float:
    """Static ranking factor of a page, multiplied into its score.

    Release notes / changelogs get RELEASE_NOTES_PRIOR; hub pages that are mostly links (tables
    of contents, section indexes: link_density >= HUB_LINK_DENSITY) get HUB_PRIOR, because they
    repeat the titles of everything they link to but explain nothing.
    """
    prior = 1.0
    if _RELEASE_NOTES_RE.search(urlsplit(url).path):
        prior *= RELEASE_NOTES_PRIOR
    if link_density >= HUB_LINK_DENSITY:
        prior *= HUB_PRIOR
    return prior


def _links(doc: etree._Element, page_url: str) -> list[str]:
    out = []
    for href in doc.xpath("//a/@href"):
        href = str(href).strip()
        if not href or href.startswith(("mailto:", "javascript:", "#")):
            continue
        out.append(urldefrag(urljoin(page_url, href))[0])
    return out


def _text(el: etree._Element) -> str:
    return _clean("".join(el.itertext()))


def _drop(el: etree._Element) -> None:
    """Remove an element but keep its tail text."""
    parent = el.getparent()
    if parent is None:
        return
    if el.tail:
        prev = el.getprevious()
        if prev is not None:
            prev.tail = (prev.tail or "") + el.tail
        else:
            parent.text = (parent.text or "") + el.tail
    parent.remove(el)


_PARSERS = threading.local()
_META_CHARSET_RE = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)


def _parser(encoding: str) -> etree.HTMLParser:
    cache = _PARSERS.__dict__.setdefault("by_encoding", {})
    parser = cache.get(encoding)
    if parser is None:
        parser = cache[encoding] = etree.HTMLParser(
            encoding=encoding, remove_comments=True, remove_pis=True
        )
    return parser


def _encoding(html: bytes, declared: str | None) -> str:
    """The encoding to parse `html` with: the HTTP/caller's charset, else a <meta> charset in
    the first 4 KB, else UTF-8 if the bytes decode as UTF-8, else windows-1252."""
    for candidate in (declared, *(m.decode("ascii") for m in _META_CHARSET_RE.findall(html[:4096])[:1])):
        if candidate:
            try:
                return codecs.lookup(candidate).name
            except LookupError:
                pass
    try:
        html.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        return "cp1252"


def parse_page(
    html: bytes | str, url: str, *, want_links: bool = False, encoding: str | None = None
) -> tuple[Page | None, list[str]]:
    """Extract the indexable text of one HTML page (and, with want_links, the links in it).

    `encoding` is the charset the server declared, if any (see `_encoding`).
    Returns (None, links) when the page has no text.
    """
    if isinstance(html, str):
        html = html.encode("utf-8")
        encoding = "utf-8"
    try:
        doc = etree.fromstring(html, _parser(_encoding(html, encoding)))
    except (etree.ParserError, etree.XMLSyntaxError, ValueError):
        return None, []
    if doc is None:
        return None, []
    links = _links(doc, url) if want_links else []

    title_el = doc.find(".//title")
    html_title = _text(title_el) if title_el is not None else ""

    chrome = list(doc.iter(*_CHROME_TAGS))
    for el in doc.xpath("//*[@class or @role]"):
        if (el.get("role") in _CHROME_ROLES
                or not _CHROME_CLASSES.isdisjoint((el.get("class") or "").split())):
            chrome.append(el)
    for el in chrome:
        _drop(el)  # dropping an already detached subtree's child is harmless

    main = None
    for xp in _MAIN_XPATHS:
        found = doc.xpath(xp)
        if found:
            main = found[0]
            break
    if main is None:
        main = doc

    headings: list[str] = []
    h1_text = ""
    for h in main.iter("h1", "h2", "h3", "h4"):
        text = _SECTION_NUMBER_RE.sub("", _text(h))
        if text:
            headings.append(text)
            if not h1_text and h.tag == "h1":
                h1_text = text
    # Definition terms: API signatures (name only, without "class"/"async" annotations) and
    # glossary terms.
    for dt in main.iter("dt"):
        for prop in dt.xpath(".//em[contains(concat(' ', @class, ' '), ' property ')]"):
            _drop(prop)
        text = _text(dt).split("(", 1)[0].strip()
        if text and len(text) <= 100:
            headings.append(text)

    summary = ""
    for p in main.iter("p"):
        text = _text(p)
        if len(text) >= 40:
            summary = text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1].rsplit(" ", 1)[0] + "…"
            break

    link_chars = sum(len(_text(a)) for a in main.iter("a"))
    # Separate block elements with whitespace so words of adjacent blocks do not run together.
    for el in main.iter(*_BLOCK_TAGS):
        el.tail = "\n" + (el.tail or "")
        el.text = "\n" + (el.text or "")
    body = _text(main)
    if not body:
        return None, links
    link_density = min(1.0, link_chars / len(body))

    title = h1_text or _strip_site_suffix(html_title) or url
    if not summary:
        summary = body[:SUMMARY_CHARS]
    return Page(url=url, title=title, headings="\n".join(headings), body=body, summary=summary,
                link_density=round(link_density, 3)), links


def _strip_site_suffix(title: str) -> str:
    """"Page — Site name" -> "Page" (only when the title has such a separator)."""
    for sep in (" \u2014 ", " | ", " - "):
        if sep in title:
            return title.rsplit(sep, 1)[0].strip()
    return title


# --------------------------------------------------------------------------- building


def _pages_from_folder(folder: Path, base_url: str, max_pages: int, section_urls: dict[str, str] | None = None):
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"folder {folder} is not a directory")
    if not base_url.endswith("/"):
        base_url += "/"
    files = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in filenames:
            rel = (Path(dirpath) / name).relative_to(folder).as_posix()
            if name.lower().endswith(_HTML_SUFFIXES) and is_indexable_path(rel):
                files.append(rel)
    files.sort()
    count = 0
    for rel in files:
        if count >= max_pages:
            break
        section_base = (section_urls or {}).get(rel.split("/", 1)[0], base_url)
        page, _ = parse_page((folder / rel).read_bytes(), section_base.rstrip("/") + "/" + rel)
        if page is not None:
            count += 1
            yield page


def _pages_from_crawl(start_url: str, max_pages: int, timeout: float = 15.0):
    import httpx

    start = urlsplit(start_url)
    if start.scheme not in ("http", "https") or not start.netloc:
        raise ValueError(f"start URL {start_url!r} must be an absolute http(s) URL")
    netloc = start.netloc.lower()
    max_fetches = max_pages * 3 + 10  # bound the crawl even when many links are not pages
    queue: deque[str] = deque([urldefrag(start_url)[0]])
    seen = {queue[0]}
    stored: set[str] = set()
    fetches = 0
    with httpx.Client(follow_redirects=True, timeout=timeout, headers={"User-Agent": "deep-research-indexer/1"}) as client:
        while queue and len(stored) < max_pages and fetches < max_fetches:
            url = queue.popleft()
            fetches += 1
            try:
                resp = client.get(url)
            except httpx.HTTPError:
                continue
            if resp.status_code != 200:
                continue
            if "html" not in resp.headers.get("content-type", "").lower():
                continue
            final_url = urldefrag(str(resp.url))[0]
            if final_url in stored or urlsplit(final_url).netloc.lower() != netloc:
                continue
            page, links = parse_page(
                resp.content, final_url, want_links=True, encoding=resp.charset_encoding
            )
            for link in links:
                parts = urlsplit(link)
                if parts.netloc.lower() != netloc or parts.scheme not in ("http", "https"):
                    continue
                if link in seen or not is_indexable_path(parts.path or "/"):
                    continue
                seen.add(link)
                queue.append(link)
            if page is not None:
                stored.add(final_url)
                yield page


def build_index(
    db_path: Path,
    *,
    folder: Path | None = None,
    base_url: str | None = None,
    start_url: str | None = None,
    max_pages: int = 2000,
    section_urls: dict[str, str] | None = None,
) -> int:
    """Build (replace) the index at `db_path`; returns the number of documents indexed.

    Either `folder` + `base_url` (each HTML file's URL is base_url + its path relative to the
    folder; `section_urls` maps a top-level folder to another base URL, so one folder can stand
    for several hosts) or `start_url` (breadth-first crawl of that host with httpx, at most `max_pages`
    pages). The index is written to a temporary file and moved into place at the end, so a
    reader never sees a half-built index.
    """
    if folder is not None:
        if not base_url:
            raise ValueError("base_url is required with folder")
        pages = _pages_from_folder(Path(folder), base_url, max_pages, section_urls)
        source = f"folder {folder} at {base_url}"
    elif start_url:
        pages = _pages_from_crawl(start_url, max_pages)
        source = f"crawl from {start_url}"
    else:
        raise ValueError("give either folder and base_url, or start_url")

    db_path = Path(db_path)
    db_path.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = db_path.with_name(db_path.name + f".tmp{os.getpid()}")
    tmp_path.unlink(missing_ok=True)
    conn = sqlite3.connect(tmp_path)
    try:
        conn.executescript(
            """
            CREATE VIRTUAL TABLE docs USING fts5(
                title, headings, body, names, url UNINDEXED, summary UNINDEXED, prior UNINDEXED,
                tokenize='porter unicode61'
            );
            CREATE VIRTUAL TABLE heads USING fts5(title, headings, tokenize='porter unicode61');
            CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
            """
        )
        count = 0
        with conn:
            for page in pages:
                count += 1
                head_text = f"{page.title}\n{page.headings}"
                conn.execute(
                    "INSERT INTO docs(rowid, title, headings, body, names, url, summary, prior)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (count, page.title, page.headings, page.body,
                     " ".join(identifier_tokens(head_text) + identifier_tokens(page.body)),
                     page.url, page.summary, page_prior(page.url, page.link_density)),
                )
                conn.execute(
                    "INSERT INTO heads(rowid, title, headings) VALUES (?, ?, ?)",
                    (count, page.title,
                     page.headings + "\n" + " ".join(identifier_tokens(head_text))),
                )
            conn.executemany(
                "INSERT INTO meta(key, value) VALUES (?, ?)",
                [("schema", SCHEMA_VERSION), ("source", source), ("documents", str(count)),
                 ("built_at", time.strftime("%Y-%m-%dT%H:%M:%S%z"))],
            )
            conn.execute("INSERT INTO docs(docs) VALUES ('optimize')")
            conn.execute("INSERT INTO heads(heads) VALUES ('optimize')")
    except BaseException:
        conn.close()
        tmp_path.unlink(missing_ok=True)
        raise
    conn.close()
    os.replace(tmp_path, db_path)
    return count


# --------------------------------------------------------------------------- querying


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def _scan(question: str) -> list[tuple[str, list[str], bool] | None]:
    """Words of a question in order: (word, its alphanumeric parts, is_identifier) for content
    words, None for stopwords (which break adjacency)."""
    out: list[tuple[str, list[str], bool] | None] = []
    for raw in _WORD_RE.findall(question):
        word = raw.lower()
        parts = _PART_RE.findall(word)
        if not parts:
            out.append(None)
            continue
        is_identifier = "_" in word or len(parts) > 1
        if not is_identifier and (word in STOPWORDS or (len(word) == 1 and not word.isdigit())):
            out.append(None)
            continue
        out.append((word, parts, is_identifier))
    return out


def query_terms(question: str) -> list[str]:
    """The content words of a question, in order, lowercased and deduplicated.

    Identifiers (`__slots__`, `capture_output`, `typing.Protocol`) are kept whole.
    """
    out: list[str] = []
    for item in _scan(question):
        if item is not None and item[0] not in out:
            out.append(item[0])
    return out


def build_match_query(question: str) -> str:
    """Turn a natural-language question into an FTS5 MATCH expression ("" if nothing to search).

    Each content word becomes a quoted term (quoting makes FTS5 syntax characters in the question
    harmless, and only letters, digits and `_` ever reach the query); identifiers become the
    phrase of their parts, tokenised the way unicode61 indexed them (`capture_output` ->
    "capture output", `__slots__` -> "slots"), plus the parts of dotted names as single terms
    (`typing.Protocol` -> "typing protocol", "typing", "protocol"); two adjacent plain content
    words also add their two-word phrase, which favours pages where they appear together
    ("global interpreter", "interpreter lock"). Everything is OR-ed: BM25 rewards pages that
    match more, and rarer, phrases. Stopwords are dropped unless nothing else is left.
    """
    phrases: list[str] = []

    def add(phrase: str) -> None:
        if phrase and phrase not in phrases:
            phrases.append(phrase)

    scanned = _scan(question)
    if all(item is None for item in scanned):  # only stopwords: search them rather than nothing
        scanned = [(w.lower(), _PART_RE.findall(w.lower()), False) for w in _WORD_RE.findall(question)]
    previous: tuple[str, list[str], bool] | None = None
    for item in scanned:
        if item is None:
            previous = None
            continue
        word, parts, is_identifier = item
        if not parts:
            continue
        add(" ".join(parts))
        for segment in word.split("."):
            token = identifier_token(segment)
            if token:
                add(token)
        if "." in word and len(parts) > 1:  # module.attribute: each name is meaningful alone
            for part in parts:
                if part not in STOPWORDS and (len(part) > 1 or part.isdigit()):
                    add(part)
        if previous is not None and not previous[2] and not is_identifier:
            add(f"{previous[1][0]} {parts[0]}")
        previous = item
    return " OR ".join(_quote(p) for p in phrases[:MAX_QUERY_PHRASES])


def _missing_index_error(db_path: Path) -> SearchError:
    return SearchError(
        f"local search index {db_path} does not exist; build it with: "
        f"python -m deep_research.search.local_index build --folder <html folder> "
        f"--base-url <URL the folder is served at> --db {db_path} "
        f"(or --start-url <URL> to crawl)",
        retryable=False,
    )


def search_index(db_path: Path, question: str, max_results: int) -> list[SearchHit]:
    """Synchronous search; see `LocalIndexProvider.search`."""
    db_path = Path(db_path)
    if not db_path.is_file():
        raise _missing_index_error(db_path)
    match = build_match_query(question)
    if not match or max_results <= 0:
        return []
    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise SearchError(f"cannot open local search index {db_path}: {exc}", retryable=False) from exc
    try:
        rows = _ranked_rows(conn, match, max_results)
    except sqlite3.DatabaseError as exc:
        raise SearchError(
            f"local search index {db_path} cannot be queried ({exc}); rebuild it with "
            f"python -m deep_research.search.local_index build ... --db {db_path}",
            retryable=False,
        ) from exc
    finally:
        conn.close()
    hits = []
    for url, title, snippet, summary, score in rows:
        snippet = _clean(snippet or "") or summary or ""
        hits.append(SearchHit(url=url, title=title, snippet=snippet, score=round(score, 6), provider="local"))
    return hits


def _ranked_rows(conn: sqlite3.Connection, match: str, limit: int) -> list[tuple]:
    """(url, title, snippet, summary, score) of the best `limit` rows, best first.

    score = (-bm25(docs, TITLE, HEADINGS, BODY, NAMES) + HEADS_SCORE_WEIGHT * -bm25(heads,
    TITLE, HEADINGS)) * prior; higher is better. Candidates are the best CANDIDATES rows of
    each table; ties at the cut-off are broken by URL.
    """
    docs = {
        rowid: (-bm25, prior)
        for rowid, bm25, prior in conn.execute(
            "SELECT rowid, bm25(docs, ?, ?, ?, ?) AS r, prior FROM docs WHERE docs MATCH ?"
            " ORDER BY r LIMIT ?",
            (TITLE_WEIGHT, HEADINGS_WEIGHT, BODY_WEIGHT, NAMES_WEIGHT, match, CANDIDATES),
        )
    }
    heads = {
        rowid: -bm25
        for rowid, bm25 in conn.execute(
            "SELECT rowid, bm25(heads, ?, ?) AS r FROM heads WHERE heads MATCH ? ORDER BY r LIMIT ?",
            (TITLE_WEIGHT, HEADINGS_WEIGHT, match, CANDIDATES),
        )
    }
    missing = [rowid for rowid in heads if rowid not in docs]
    if missing:
        marks = ",".join("?" * len(missing))
        for rowid, bm25, prior in conn.execute(
            f"SELECT rowid, bm25(docs, ?, ?, ?, ?), prior FROM docs"
            f" WHERE docs MATCH ? AND rowid IN ({marks})",
            (TITLE_WEIGHT, HEADINGS_WEIGHT, BODY_WEIGHT, NAMES_WEIGHT, match, *missing),
        ):
            docs[rowid] = (-bm25, prior)
    scored = {
        rowid: (body_score + HEADS_SCORE_WEIGHT * heads.get(rowid, 0.0)) * float(prior)
        for rowid, (body_score, prior) in docs.items()
    }
    if not scored:
        return []
    order = sorted(scored, key=lambda rowid: -scored[rowid])
    cutoff = scored[order[min(limit, len(order)) - 1]]
    best = [rowid for rowid in order if scored[rowid] >= cutoff]  # with the ties at the cutoff
    marks = ",".join("?" * len(best))
    rows = {
        row[0]: row[1:]
        for row in conn.execute(
            f"SELECT rowid, url, title, snippet(docs, 2, '', '', '…', {SNIPPET_TOKENS}), summary"
            f" FROM docs WHERE docs MATCH ? AND rowid IN ({marks})",
            (match, *best),
        )
    }
    ranked = sorted(rows, key=lambda rowid: (-scored[rowid], rows[rowid][0]))[:limit]
    return [(*rows[rowid], scored[rowid]) for rowid in ranked]


def suggest(db_path: Path, question: str, limit: int) -> list[str]:
    """Related queries: the question's content words followed by the title of each top hit.

    E.g. "pathlib files recursively" -> "pathlib files recursively glob — Unix style pathname
    pattern expansion". Titles are taken in rank order, without duplicates or the hit whose title
    the words already cover; deterministic for a given index.
    """
    if limit <= 0:
        return []
    words = query_terms(question)
    if not words:
        return []
    keywords = " ".join(words[:8])
    out: list[str] = []
    for hit in search_index(db_path, question, max_results=limit * 3 + 3):
        title = hit.title.split(" \u2014 ", 1)[0].strip()  # "pathlib — Object-oriented ..." -> "pathlib"
        if not title or title.lower() in keywords:
            continue
        suggestion = f"{keywords} {title}"
        if suggestion not in out:
            out.append(suggestion)
        if len(out) >= limit:
            break
    return out


class LocalIndexProvider(SearchProvider):
    """Search provider over an index built by `build_index`."""

    name = "local"

    def __init__(self, db_path: Path | str) -> None:
        self.db_path = Path(db_path)

    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        """Best `max_results` pages for a natural-language question; score = -bm25 (× prior)."""
        return await asyncio.to_thread(search_index, self.db_path, query, max_results)

    async def suggestions(self, query: str, *, limit: int) -> list[str]:
        """Related queries from the titles of the top hits (see `suggest`)."""
        return await asyncio.to_thread(suggest, self.db_path, query, limit)


# --------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deep_research.search.local_index")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the index from a folder (+ base URL) or by crawling")
    b.add_argument("--db", type=Path, required=True)
    src = b.add_mutually_exclusive_group(required=True)
    src.add_argument("--folder", type=Path)
    src.add_argument("--start-url")
    b.add_argument("--base-url", help="URL the folder is served at (with --folder)")
    b.add_argument("--max-pages", type=int, default=2000)
    q = sub.add_parser("query", help="print the ranked results for a question")
    q.add_argument("--db", type=Path, required=True)
    q.add_argument("-n", "--max-results", type=int, default=10)
    q.add_argument("question")
    args = parser.parse_args(argv)

    if args.command == "build":
        if args.folder is not None and not args.base_url:
            parser.error("--base-url is required with --folder")
        t0 = time.monotonic()
        n = build_index(args.db, folder=args.folder, base_url=args.base_url,
                        start_url=args.start_url, max_pages=args.max_pages)
        print(f"indexed {n} documents into {args.db} in {time.monotonic() - t0:.1f}s")
        return 0

    try:
        hits = search_index(args.db, args.question, args.max_results)
    except SearchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"query: {build_match_query(args.question)}")
    for i, hit in enumerate(hits, 1):
        print(f"{i:2d}. {hit.score:8.3f}  {hit.title}\n    {hit.url}\n    {hit.snippet}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
