"""The no-LLM path: extractive notes and a report whose cited sentences are verbatim from their sources."""

from __future__ import annotations

import re

from deep_research.models import SearchHit, Source
from deep_research.report.extractive import (
    collapse_whitespace,
    render_report,
    split_sentences,
    summarize_extractive,
    verify_citations,
)
from deep_research.report.notes import Notes, notes_source_texts

SECTIONS = [
    "## Executive summary",
    "## Key findings",
    "## Evidence and context",
    "## Implications and trade-offs",
    "## Open questions",
    "## Sources",
]

NAV = """Skip to main content
Home   Docs   Tutorials   Blog   About
Python 3.13 documentation » The Python Standard Library »
Theme  Auto  Light  Dark
"""
FOOTER = """
Previous topic
Next topic
This page
Report a bug
© Copyright 2001-2024, Python Software Foundation. This page is licensed under the Python Software Foundation License Version 2.
"""

OS_PAGE = NAV + """os — Miscellaneous operating system interfaces
Source code: Lib/os.py

This module provides a portable way of using operating system dependent functionality.
If you just want to read or write a file see open(), if you want to manipulate paths,
see the os.path module, and if you want to read all the lines in all the files on the
command line see the fileinput module.

os.listdir(path='.')
Return a list containing the names of the entries in the directory given by path. The list is in arbitrary order, and does not include the special entries '.' and '..' even if they are present in the directory.

os.walk(top, topdown=True, onerror=None, followlinks=False)
Generate the file names in a directory tree by walking the tree either top-down or bottom-up. For each directory in the tree rooted at directory top, it yields a 3-tuple (dirpath, dirnames, filenames).
""" + FOOTER

GLOB_PAGE = NAV + """glob — Unix style pathname pattern expansion
Source code: Lib/glob.py

The glob module finds all the pathnames matching a specified pattern according to the rules used by the Unix shell, although results are returned in arbitrary order.
No tilde expansion is done, but *, ?, and character ranges expressed with [] will be correctly matched.

glob.glob(pathname, *, root_dir=None, recursive=False)
Return a possibly empty list of path names that match pathname, which must be a string containing a path specification.
If recursive is true, the pattern "**" will match any files and zero or more directories, subdirectories and symbolic links to directories.
Using the "**" pattern in large directory trees may consume an inordinate amount of time.
Changed in version 3.11: Added the include_hidden parameter, e.g. to match hidden files too.
""" + FOOTER

PATHLIB_PAGE = NAV + """pathlib — Object-oriented filesystem paths
Source code: Lib/pathlib/

This module offers classes representing filesystem paths with semantics appropriate for different operating systems.
Path classes are divided between pure paths, which provide purely computational operations without I/O, and concrete paths.

Path.glob(pattern, *, case_sensitive=None)
Glob the given relative pattern in the directory represented by this path, yielding all matching files (of any kind).
Path.rglob(pattern, *, case_sensitive=None)
Glob the given relative pattern recursively. This is like calling Path.glob() with "**/" added in front of the pattern.
For example, sorted(Path().rglob("*.py")) lists every Python file below the current directory, e.g. in all subpackages.
Changed in version 3.12: The case_sensitive parameter was added to Path.rglob().
""" + FOOTER

URL_OS = "https://docs.python.org/3/library/os.html"
URL_GLOB = "https://docs.python.org/3/library/glob.html"
URL_PATHLIB = "https://docs.python.org/3/library/pathlib.html"

PAGES = [  # in search order: the most relevant page (pathlib) comes last
    {"url": URL_OS, "title": "os — Miscellaneous operating system interfaces", "text": OS_PAGE},
    {"url": URL_GLOB, "title": "glob — Unix style pathname pattern expansion", "text": GLOB_PAGE},
    {"url": URL_PATHLIB, "title": "pathlib — Object-oriented filesystem paths", "text": PATHLIB_PAGE},
]
HITS = [SearchHit(url=p["url"], title=p["title"], snippet="", score=1.0 - i / 10, provider="fake")
        for i, p in enumerate(PAGES)]
QUESTION = "How do I recursively find files matching a pattern with pathlib rglob?"

# Independent of the module under test: quoted “sentence” followed by its [n].
QUOTE_RX = re.compile(r"“(.+?)”\s*\[(\d+)\]")


def _report(question=QUESTION, pages=PAGES, hits=HITS, source_limit=5, fallbacks=(), mode="light"):
    notes = summarize_extractive(question, pages, hits, source_limit)
    markdown, sources = render_report(question, notes, list(fallbacks), mode)
    return notes, markdown, sources


def _source_numbers(markdown: str) -> dict[int, str]:
    section = markdown.split("## Sources", 1)[1]
    return {int(n): url for n, url in re.findall(r"^(\d+)\. \[[^\]]*\]\((\S+)\)$", section, re.M)}


# --------------------------------------------------------------------------- splitter


def test_splitter_keeps_abbreviations_versions_and_identifiers_inside_sentences():
    text = ("Install it first, e.g. with pip on Linux. Python 3.11 is required, i.e. older versions fail.\n"
            "Call os.path.join() to combine the parts of a path safely. subprocess.run() returns a "
            "CompletedProcess instance.\n\nShort one. " + "x" * 450 + ".")
    sentences = split_sentences(text)
    assert sentences == [
        "Install it first, e.g. with pip on Linux.",
        "Python 3.11 is required, i.e. older versions fail.",
        "Call os.path.join() to combine the parts of a path safely.",
        "subprocess.run() returns a CompletedProcess instance.",
    ]
    collapsed = collapse_whitespace(text)
    assert all(s in collapsed for s in sentences)


def test_splitter_joins_wrapped_lines_and_drops_navigation():
    sentences = split_sentences(NAV + "If you just want to read or write a file see open(), if you want\n"
                                      "to manipulate paths,   see the os.path module.\n")
    assert sentences == ["If you just want to read or write a file see open(), if you want to manipulate "
                         "paths, see the os.path module."]


def test_splitter_sentences_are_substrings_of_collapsed_pages():
    for page in PAGES:
        collapsed = collapse_whitespace(page["text"])
        sentences = split_sentences(page["text"])
        assert sentences
        for s in sentences:
            assert s in collapsed
            assert 30 <= len(s) <= 400
            assert "Skip to main content" not in s and "Home Docs" not in s


# --------------------------------------------------------------------------- notes


def test_notes_rank_most_relevant_page_first_and_quote_verbatim():
    notes = summarize_extractive(QUESTION, PAGES, HITS, source_limit=5)
    assert isinstance(notes, Notes) and notes.method == "extractive"
    assert [s.url for s in notes.sources][0] == URL_PATHLIB
    assert notes.sources[0].relevance == 1.0
    assert all(s.origin == "crawl" for s in notes.sources)
    texts = {p["url"]: collapse_whitespace(p["text"]) for p in PAGES}
    for note in notes.sources:
        assert 1 <= len(note.key_points) <= 4
        for point in note.key_points:
            assert point in texts[note.url] and point in note.summary
        # key points are in document order
        positions = [note.summary.index(p) for p in note.key_points]
        assert positions == sorted(positions)
    assert 1 <= len(notes.overall_insights) <= 3
    assert notes.overall_insights[0] in notes.sources[0].key_points
    assert any("rglob" in p for p in notes.sources[0].key_points)
    assert not any("Copyright" in p for n in notes.sources for p in n.key_points)  # footer noise
    # deterministic
    assert summarize_extractive(QUESTION, PAGES, HITS, source_limit=5) == notes


def test_source_limit_and_max_points_are_respected():
    notes, markdown, sources = _report(source_limit=2)
    assert len(notes.sources) == 2 and len(sources) == 2
    assert sorted(_source_numbers(markdown)) == [1, 2]
    assert all(len(s.key_points) <= 2 for s in summarize_extractive(QUESTION, PAGES, HITS, 3, max_points=2).sources)


def test_identifier_in_question_matches_whole_token():
    pages = [
        {"url": "https://doc.qt.io/qt-6/signalsandslots.html", "title": "Signals & Slots | Qt Core",
         "text": "Signals and slots are used for communication between objects in a class hierarchy.\n"
                 "A slot is called when a signal connected to it is emitted, and slots are normal member functions.\n"
                 "Every class that declares slots must contain the Q_OBJECT macro at the top of the class."},
        {"url": "https://docs.python.org/3/tutorial/classes.html", "title": "9. Classes",
         "text": "Classes provide a means of bundling data and functionality together in Python.\n"
                 "Creating a new class creates a new type of object, allowing new instances of that type to be made.\n"
                 "Each class instance can have attributes attached to it for maintaining its state."},
        {"url": "https://docs.python.org/3/reference/datamodel.html", "title": "3. Data model",
         "text": NAV + "__slots__ allow us to explicitly declare data members (like properties) and deny the "
                       "creation of __dict__ and __weakref__ (unless explicitly declared in __slots__ or "
                       "available in a parent).\nThe space saved over using __dict__ can be significant, and "
                       "attribute lookup speed can be significantly improved as well." + FOOTER},
    ]
    hits = [SearchHit(url=p["url"], title=p["title"]) for p in pages]
    notes = summarize_extractive("What does __slots__ do in a Python class?", pages, hits, source_limit=3)
    assert notes.sources[0].url.endswith("datamodel.html")
    assert "__slots__" in notes.overall_insights[0]


# --------------------------------------------------------------------------- report


def test_report_sections_citations_and_verbatim_guarantee():
    notes, markdown, sources = _report()
    lines = markdown.splitlines()
    assert lines[0] == f"# {QUESTION}"
    assert "extractive" in lines[2].lower() and "no llm" in lines[2].lower() and "verbatim" in lines[2].lower()
    assert "Fallbacks used" not in markdown

    positions = [markdown.index(h) for h in SECTIONS]
    assert positions == sorted(positions)
    assert all(markdown.count(h) == 1 for h in SECTIONS)

    # sources: numbered from 1, matching the Sources section, most relevant first
    assert all(isinstance(s, Source) for s in sources)
    assert [s.n for s in sources] == list(range(1, len(sources) + 1)) and len(sources) == 3
    assert sources[0].url == URL_PATHLIB and all(s.origin == "crawl" for s in sources)
    listed = _source_numbers(markdown)
    assert listed == {s.n: s.url for s in sources}
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", markdown)}
    assert cited and cited <= set(listed)

    # the guarantee, through the helper ...
    assert verify_citations(markdown, notes_source_texts(notes)) == []
    # ... and independently, against the original page texts
    page_text = {p["url"]: collapse_whitespace(p["text"]) for p in PAGES}
    quotes = QUOTE_RX.findall(markdown)
    assert len(quotes) >= 5
    for sentence, n in quotes:
        assert sentence in page_text[listed[int(n)]], sentence

    # body content per section
    summary = markdown.split("## Executive summary", 1)[1].split("## Key findings", 1)[0]
    assert 2 <= len(QUOTE_RX.findall(summary)) <= 4
    findings = markdown.split("## Key findings", 1)[1].split("## Evidence and context", 1)[0]
    bullets = [line for line in findings.splitlines() if line.startswith("- ")]
    assert len(bullets) == len(sources) and all(QUOTE_RX.search(b) for b in bullets)
    implications = markdown.split("## Implications and trade-offs", 1)[1].split("## Open questions", 1)[0]
    assert "cannot weigh trade-offs" in implications
    assert re.search(r"`pattern`: \[\d+\], \[\d+\]", implications)  # glob and pathlib both discuss it


def test_verify_citations_flags_altered_or_misattributed_sentences():
    notes, markdown, _ = _report()
    texts = notes_source_texts(notes)
    sentence, n = QUOTE_RX.search(markdown).groups()
    altered = markdown.replace(f"“{sentence}”", f"“{sentence[:-1]} indeed.”", 1)
    assert verify_citations(altered, texts) == [f"{sentence[:-1]} indeed."]
    wrong = {k: v for k, v in texts.items() if k != int(n)}
    assert sentence in verify_citations(markdown, wrong)


def test_open_questions_list_terms_no_source_mentions():
    question = "How do I recursively find files with pathlib rglob on a zfs filesystem?"
    _, markdown, _ = _report(question=question)
    open_qs = markdown.split("## Open questions", 1)[1].split("## Sources", 1)[0]
    assert "`zfs`" in open_qs and "`rglob`" not in open_qs


def test_snippet_only_path_is_labelled_and_still_verbatim():
    hits = [
        SearchHit(url=URL_OS, title="os — Miscellaneous operating system interfaces",
                  snippet="This module provides a portable way of using operating system dependent functionality."),
        SearchHit(url=URL_PATHLIB, title="pathlib — Object-oriented filesystem paths",
                  snippet="Path.rglob(pattern) globs the given relative pattern recursively, yielding all "
                          "matching files below this directory"),
        SearchHit(url=URL_GLOB, title="glob — Unix style pathname pattern expansion", snippet="glob"),
    ]
    fallback = "crawler returned no pages: based on search snippets only"
    notes, markdown, sources = _report(pages=[], hits=hits, fallbacks=[fallback])
    assert [s.url for s in sources][0] == URL_PATHLIB
    assert URL_GLOB not in [s.url for s in sources]  # a snippet too short to quote is not a source
    assert all(s.origin == "snippet" for s in sources)
    assert "_Fallbacks used: crawler returned no pages: based on search snippets only._" in markdown
    assert verify_citations(markdown, {s.n: h.snippet for s in sources for h in hits if h.url == s.url}) == []
    open_qs = markdown.split("## Open questions", 1)[1]
    assert "search snippets only" in open_qs and "[1], [2]" in open_qs


def test_no_sources_yields_short_report():
    notes = summarize_extractive(QUESTION, [], [], source_limit=5)
    assert notes.sources == [] and notes.overall_insights == []
    markdown, sources = render_report(QUESTION, notes, ["search returned no results"], "light")
    assert sources == []
    assert markdown.startswith(f"# {QUESTION}\n")
    assert "No sources were found" in markdown
    assert "## Open questions" in markdown and "Fallbacks used: search returned no results" in markdown
    assert verify_citations(markdown, {}) == []
    assert "## Key findings" not in markdown


def test_max_mode_summary_and_markdown_safe_titles():
    pages = PAGES + [{"url": "https://example.org/a_(b)", "title": "Globbing [tips] *fast*",
                      "text": "A recursive glob with rglob walks every directory below the start directory."}]
    notes, markdown, sources = _report(pages=pages, mode="max")
    summary = markdown.split("## Executive summary", 1)[1].split("## Key findings", 1)[0]
    assert len(QUOTE_RX.findall(summary)) == 4
    assert r"[Globbing \[tips\] \*fast\*](https://example.org/a_%28b%29)" in markdown
    assert verify_citations(markdown, notes_source_texts(notes)) == []
