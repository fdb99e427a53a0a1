"""Extractive notes and report: the no-LLM path.

Pure, deterministic functions, no I/O. The guarantee: every sentence the report cites as `“…” [n]`
is an exact substring of source n's whitespace-collapsed text (`SourceNote.summary`), which
`verify_citations` checks.

Pipeline: `split_sentences` cuts each page (or search snippet) into sentences; a BM25 scorer over
all sentences of all sources rates them against the question (stopwords dropped, light stemming,
code identifiers such as `__slots__` or `capture_output` kept whole, a bonus for sentences naming
an identifier from the question, part of the weight of question terms named by the page title);
sources are ranked by their best sentences, then by which question terms the whole page names
(headings and code included), then by a small prior for search rank; `render_report` lays the
quoted sentences out as a Markdown report.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

from deep_research.models import SearchHit, Source
from deep_research.report.notes import Notes, SourceNote

MIN_SENTENCE_CHARS = 30
MAX_SENTENCE_CHARS = 400
# Bound on a note's `summary` (the crawler already bounds pages by max_chars_per_source, ~13k max).
MAX_SUMMARY_CHARS = 16_000
OVERALL_INSIGHTS = 3

LABEL = ("_Extractive report: no LLM is configured, so this report is assembled from the sources "
         "without synthesis; quoted sentences are verbatim from the sources they cite._")

# --------------------------------------------------------------------------- text helpers


def collapse_whitespace(text: str) -> str:
    """Every run of whitespace as one space, no leading/trailing space (the text citations are checked against)."""
    return " ".join(text.split())


def _bounded(text: str, limit: int = MAX_SUMMARY_CHARS) -> str:
    """`text` cut at a whitespace boundary so that its collapsed form is a prefix of the full collapsed text."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    if not text[limit].isspace():
        last_space = re.search(r"\s\S*\Z", cut)
        cut = cut[:last_space.start()] if last_space else cut  # one huge "word": keep the hard cut
    return cut


# --------------------------------------------------------------------------- sentence splitting

# Abbreviations after which a period does not end a sentence (compared lowercased, without brackets).
_ABBREVIATIONS = frozenset({
    "e.g.", "i.e.", "eg.", "ie.", "cf.", "vs.", "viz.", "approx.", "incl.", "esp.", "resp.", "ca.",
    "mr.", "mrs.", "ms.", "dr.", "prof.", "sr.", "jr.", "st.", "fig.", "figs.", "no.", "nos.",
    "vol.", "pp.", "p.", "al.", "eds.", "ch.", "ref.", "refs.", "eq.",
})
# Candidate boundary: terminal punctuation (and closing quotes/brackets) followed by a space.
_BOUNDARY = re.compile(r"[.!?]+[\"'”’)\]]*(?= )")
_OPENERS = "\"'“‘([{`<*_"
_LIST_MARKER = re.compile(r"^(?:[-*•·▪‣►▸◦–—]|\(?\d{1,2}[.)])\s+")
_TERMINAL = tuple(".!?:;\"'”’)")
_NAV_SEPARATORS = frozenset("»›>|/·•→")


def _segments(text: str) -> list[str]:
    """Whitespace-collapsed blocks of `text`: lines, rejoined when a line obviously continues the previous one.

    Blocks never span a boundary a sentence may not cross (a blank line, a line after a finished
    sentence, a heading or navigation line), so navigation noise does not glue onto prose.
    """
    segments: list[str] = []
    current: list[str] = []
    for raw in text.splitlines():
        line = collapse_whitespace(raw)
        if not line:
            if current:
                segments.append(" ".join(current))
                current = []
            continue
        if current and _continues(current[-1], line):
            current.append(line)
        else:
            if current:
                segments.append(" ".join(current))
            current = [line]
    if current:
        segments.append(" ".join(current))
    return segments


def _continues(previous: str, line: str) -> bool:
    if previous.endswith((".", "!", "?", ":", ";")):
        return False
    if previous[-1] in ",(-–—/":
        return True
    # A hard-wrapped paragraph: a long line carried on by a lowercase one (not "Light Dark" + "os — ...").
    return line[0].islower() and len(previous) >= 40 and len(previous.split()) >= 6


def _is_boundary(segment: str, match: re.Match[str]) -> bool:
    end = match.end()
    word = segment[:end].rpartition(" ")[2].lstrip(_OPENERS).rstrip("\"'”’)]")
    lowered = word.lower()
    if lowered in _ABBREVIATIONS:
        return False
    if match.group().startswith(".") and len(word) == 2 and word[0].isupper():
        return False  # an initial, "J. Smith"
    if lowered.count(".") >= 2 and re.fullmatch(r"(?:[a-z]\.){2,}", lowered):
        return False  # "u.s.", "a.k.a."
    following = segment[end + 1:].partition(" ")[0]
    if not following:
        return False
    first = following[0]
    if first.isupper() or first.isdigit() or first in _OPENERS or first in "#$@>":
        return True
    # Docs often start a sentence with a lowercase identifier: "subprocess.run() returns ...".
    return bool(re.search(r"[_(=]|\w\.\w", following))


def _looks_like_prose(sentence: str) -> bool:
    words = sentence.split()
    if len(words) < 4:
        return False
    letters = sum(c.isalpha() for c in sentence)
    if letters < 0.5 * len(sentence):
        return False  # tables, code lines, lists of numbers
    if not sentence.endswith(_TERMINAL):
        if len(words) < 8:
            return False  # headings
        alpha_words = [w for w in words if w[0].isalpha()]
        if sum(w[0].isupper() for w in alpha_words) >= 0.7 * len(alpha_words):
            return False  # navigation bars: "Home Docs Blog About ..."
        if sum(w in _NAV_SEPARATORS for w in words) >= 2:
            return False  # breadcrumbs: "Docs » Library » os"
    return True


def split_sentences(text: str) -> list[str]:
    """Sentences of documentation-like text, each an exact substring of `collapse_whitespace(text)`.

    Keeps abbreviations ("e.g.", "i.e."), version numbers ("3.11") and dotted identifiers
    (`os.path.join()`) inside their sentence; drops fragments shorter than MIN_SENTENCE_CHARS or
    longer than MAX_SENTENCE_CHARS, headings and navigation lines.
    """
    sentences: list[str] = []
    for segment in _segments(text):
        start = 0
        pieces: list[str] = []
        for match in _BOUNDARY.finditer(segment):
            if _is_boundary(segment, match):
                pieces.append(segment[start:match.end()])
                start = match.end() + 1
        pieces.append(segment[start:])
        for piece in pieces:
            piece = piece.strip()
            marker = _LIST_MARKER.match(piece)
            if marker:
                piece = piece[marker.end():]
            if MIN_SENTENCE_CHARS <= len(piece) <= MAX_SENTENCE_CHARS and _looks_like_prose(piece):
                sentences.append(piece)
    return sentences


# --------------------------------------------------------------------------- scoring

_STOPWORDS = frozenset("""
a about above after again against all also am an and any are aren as at be because been before being
below between both but by can cannot could did didn do does doesn doing don down during each either
else ever few for from further get gets getting go goes had has have having he her here hers herself
him himself his how however i if in into is isn it its itself just let like me might more most much
must my myself need needs no nor not now of off on once one only or other our ours ourselves out over
own per please same shall she should so some such than that the their theirs them themselves then
there these they this those through thus to too under until up upon us very via was wasn we were what
whats when where whether which while who whom whose why will with within without would yes yet you
your yours yourself yourselves
best better difference differences compare compared comparison explain example examples versus vs
way ways work works use used uses using possible want tell show give know
""".split())

_TOKEN = re.compile(r"\d+(?:\.\d+)+|[A-Za-z0-9_]+")
_K1 = 1.2
_B = 0.5  # sentences are short: soft length normalisation
_IDENTIFIER_BONUS = 0.75  # times the largest query-term idf, per question identifier a sentence names
_COVERAGE_WEIGHT = 0.5  # source rank: question terms named anywhere in the page, vs its best sentences
_TITLE_WEIGHT = 0.5  # sentence score: share of the idf of question terms named by the page title
_PRIOR_WEIGHT = 0.1  # source rank: search rank prior (0.1 for the first hit, 0.05 for the second...)


def _stem(token: str) -> str:
    if not token.isalpha() or len(token) <= 3:
        return token  # identifiers (`__slots__`, `utf8`), numbers and short words stay whole
    if token.endswith("sses"):
        token = token[:-2]
    elif token.endswith("ies") and len(token) > 4:
        token = token[:-3] + "y"
    elif token.endswith("s") and not token.endswith(("ss", "us", "is")):
        token = token[:-1]
    if token.endswith("ly") and len(token) - 2 >= 5:
        token = token[:-2]  # recursively -> recursive
    if token.endswith("ing") and len(token) - 3 >= 4:
        token = token[:-3]
    elif token.endswith("ed") and len(token) - 2 >= 3:
        token = token[:-2]
    else:
        token = token.removesuffix("e") if len(token) > 3 else token
        return token
    if len(token) > 3 and token[-1] == token[-2] and token[-1] not in "lsz":
        token = token[:-1]  # running -> runn -> run
    return token.removesuffix("e") if len(token) > 3 else token


def _terms(text: str) -> list[str]:
    """Index terms of `text`: lowercased tokens, stopwords and single letters dropped, lightly stemmed."""
    terms = []
    for token in _TOKEN.findall(text):
        token = token.lower()
        if token in _STOPWORDS or (len(token) == 1 and not token.isdigit()):
            continue
        terms.append(_stem(token))
    return terms


_IDENTIFIER_PATTERNS = (
    re.compile(r"`([^`\n]+)`"),  # `backticked`
    re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)"),  # dotted.names
    re.compile(r"(?<![\w.])([A-Za-z_]\w*)\(\)"),  # call()
    re.compile(r"(?<![\w.])(\w*_\w*)"),  # snake_case, __dunder__
    re.compile(r"(?<![\w.])([a-z]+[A-Z]\w*|[A-Z][a-z0-9]+[A-Z]\w*)"),  # camelCase, PascalCase
)


def question_identifiers(question: str) -> list[str]:
    """Code identifiers named in the question (`__slots__`, `Path.rglob`, `capture_output`), in order."""
    found: list[str] = []
    for pattern in _IDENTIFIER_PATTERNS:
        for match in pattern.finditer(question):
            ident = match.group(1).strip().removesuffix("()").strip(".")
            if not any(c.isalpha() for c in ident) or ident.lower().rstrip(".") in {"e.g", "i.e"}:
                continue
            if "_" in ident and not ident.strip("_"):
                continue
            if ident not in found:
                found.append(ident)
    return found


def _identifier_regex(ident: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w])" + re.escape(ident) + r"(?![\w])", re.IGNORECASE)


class _Scorer:
    """BM25 over a corpus of sentences, plus a bonus for naming a code identifier from the question."""

    def __init__(self, question: str, sentences: Sequence[str]) -> None:
        self.query = list(dict.fromkeys(_terms(question)))
        self.docs = [Counter(_terms(s)) for s in sentences]
        self.lengths = [sum(d.values()) for d in self.docs]
        n = len(self.docs)
        self.avg_len = (sum(self.lengths) / n) if n else 1.0
        df = Counter(term for doc in self.docs for term in doc)
        self.idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in self.query}
        self.identifiers = [_identifier_regex(i) for i in question_identifiers(question)]
        self.bonus = _IDENTIFIER_BONUS * max(self.idf.values(), default=1.0)

    def coverage(self, text: str) -> float:
        """Summed idf of the distinct query terms (and identifiers) `text` names anywhere."""
        words = set(_terms(text))
        total = sum(self.idf[t] for t in self.query if t in words)
        return total + self.bonus * sum(1 for rx in self.identifiers if rx.search(text))

    def score(self, index: int, sentence: str, title_terms: frozenset[str] = frozenset()) -> float:
        """BM25 of sentence `index`, plus the identifier bonus; a sentence that matches the question by
        itself also gets part of the weight of the question terms its page title names (the page topic,
        e.g. "pathlib", is rarely repeated in each of its sentences)."""
        doc, length = self.docs[index], self.lengths[index]
        total = 0.0
        for term in self.query:
            tf = doc.get(term, 0)
            if tf:
                norm = _K1 * (1 - _B + _B * length / (self.avg_len or 1.0))
                total += self.idf[term] * tf * (_K1 + 1) / (tf + norm)
        total += self.bonus * sum(1 for rx in self.identifiers if rx.search(sentence))
        if total > 0 and title_terms:
            total += _TITLE_WEIGHT * sum(self.idf[t] for t in self.query if t in title_terms and t not in doc)
        return total


def _score_all(question: str, sentences: Sequence[str]) -> list[float]:
    scorer = _Scorer(question, sentences)
    return [scorer.score(i, s) for i, s in enumerate(sentences)]


# --------------------------------------------------------------------------- notes


def _url_key(url: str) -> str:
    parts = urlsplit(url.strip())
    return f"{parts.netloc.lower()}{parts.path.rstrip('/')}?{parts.query}"


def _title_for(url: str, title: str) -> str:
    title = collapse_whitespace(title or "")
    return title or (urlsplit(url).hostname or url)


def summarize_extractive(question: str, pages: list[dict], hits: list[SearchHit],
                         source_limit: int, max_points: int = 4) -> Notes:
    """Notes quoting the sentences most relevant to `question`, from crawled pages or else search snippets.

    `pages` are `{"url", "title", "text"}` dicts; when empty, the hits' snippets are the sources
    (origin "snippet"). At most `source_limit` sources, best first, each with at most `max_points`
    verbatim key points in document order; `overall_insights` are the top sentences across sources.
    """
    max_points = max(1, max_points)
    hit_rank: dict[str, int] = {}
    for i, hit in enumerate(hits):
        hit_rank.setdefault(_url_key(hit.url), i)

    # (url, title, origin, raw text, search rank)
    raw_sources: list[tuple[str, str, str, str, int]] = []
    if pages:
        for j, page in enumerate(pages):
            url = str(page.get("url") or "").strip()
            raw_sources.append((url, str(page.get("title") or ""), "crawl", str(page.get("text") or ""),
                                hit_rank.get(_url_key(url), len(hits) + j)))
    else:
        for i, hit in enumerate(hits):
            raw_sources.append((hit.url.strip(), hit.title, "snippet", hit.snippet or "", i))

    seen: set[str] = set()
    candidates: list[dict] = []
    for url, title, origin, text, rank in raw_sources:
        key = _url_key(url)
        if not url or key in seen:
            continue
        seen.add(key)
        bounded = _bounded(text)
        summary = collapse_whitespace(bounded)
        sentences = list(dict.fromkeys(split_sentences(bounded)))
        if not sentences and origin == "snippet" and MIN_SENTENCE_CHARS <= len(summary) <= MAX_SENTENCE_CHARS:
            sentences = [summary]  # a snippet is often one unpunctuated fragment; still verbatim
        if sentences:
            candidates.append(dict(url=url, title=_title_for(url, title), origin=origin,
                                   summary=summary, sentences=sentences, rank=rank))

    corpus = [s for c in candidates for s in c["sentences"]]
    scorer = _Scorer(question, corpus)
    offset = 0
    for c in candidates:
        title_terms = frozenset(_terms(c["title"]))
        c["scores"] = [scorer.score(offset + i, s, title_terms) for i, s in enumerate(c["sentences"])]
        offset += len(c["sentences"])
        top = sorted(c["scores"], reverse=True)[:3]
        c["evidence"] = sum(w * s for w, s in zip((1.0, 0.5, 0.25), top))
        c["coverage"] = scorer.coverage(c["title"] + " " + c["summary"])
    # Normalised so the weights mean the same whatever the question: best quoted evidence first,
    # then which question terms the whole page names (headings, code and title included), then
    # a small prior for search rank.
    max_evidence = max((c["evidence"] for c in candidates), default=0.0) or 1.0
    max_coverage = max((c["coverage"] for c in candidates), default=0.0) or 1.0
    for c in candidates:
        c["raw"] = c["evidence"] / max_evidence + _COVERAGE_WEIGHT * c["coverage"] / max_coverage
        c["total"] = c["raw"] + _PRIOR_WEIGHT / (1 + c["rank"])
    candidates.sort(key=lambda c: (-c["total"], c["rank"]))
    kept = candidates[:max(0, source_limit)]
    best_total = kept[0]["total"] if kept else 0.0

    notes: list[SourceNote] = []
    ranked_points: list[tuple[float, int, int, str]] = []  # (score, source index, position, sentence)
    for si, c in enumerate(kept):
        order = sorted(range(len(c["sentences"])), key=lambda i: (-c["scores"][i], i))
        chosen = [i for i in order if c["scores"][i] > 0][:max_points]
        if len(chosen) < min(2, max_points):  # little or nothing matched: add the lead sentences
            chosen += [i for i in range(len(c["sentences"])) if i not in chosen][:min(2, max_points) - len(chosen)]
        chosen.sort()
        notes.append(SourceNote(
            url=c["url"], title=c["title"], origin=c["origin"], summary=c["summary"],
            key_points=[c["sentences"][i] for i in chosen],
            relevance=round(c["total"] / best_total, 4) if best_total > 0 and c["raw"] > 0 else 0.0,
        ))
        ranked_points += [(c["scores"][i], si, i, c["sentences"][i]) for i in chosen]

    ranked_points.sort(key=lambda p: (-p[0], p[1], p[2]))
    # Nothing matched the question: the lead sentence of each source, best source first.
    positive = [p for p in ranked_points if p[0] > 0] or sorted(ranked_points, key=lambda p: (p[2], p[1]))
    insights: list[str] = []
    for _, _, _, sentence in positive:
        if sentence not in insights:
            insights.append(sentence)
        if len(insights) == OVERALL_INSIGHTS:
            break
    return Notes(question=question, sources=notes, overall_insights=insights, method="extractive")


# --------------------------------------------------------------------------- report


def _md_text(text: str) -> str:
    """Escape text that is not quoted evidence (titles) so it cannot break the Markdown around it."""
    text = collapse_whitespace(text).replace("“", '"').replace("”", '"')  # keep “…” for citations only
    return re.sub(r"([\\`*_\[\]<>])", r"\\\1", text)


def _md_url(url: str) -> str:
    return url.replace(" ", "%20").replace("(", "%28").replace(")", "%29")


def _quote(sentence: str, n: int) -> str:
    return f"“{sentence}” [{n}]"


def _cite_list(numbers: Iterable[int]) -> str:
    return ", ".join(f"[{n}]" for n in numbers)


def _key_terms(question: str) -> list[tuple[str, str | re.Pattern[str]]]:
    """The question's key terms, as (display form, stem or identifier regex), in question order."""
    terms: list[tuple[str, str | re.Pattern[str]]] = []
    idents = question_identifiers(question)
    covered: set[str] = set()
    for ident in idents:
        terms.append((ident, _identifier_regex(ident)))
        covered.update(_terms(ident))
    for token in _TOKEN.findall(question):
        lowered = token.lower()
        if lowered in _STOPWORDS or len(lowered) < 2:
            continue
        stem = _stem(lowered)
        if stem in covered:
            continue
        covered.add(stem)
        terms.append((lowered, stem))
    return terms


def _mentions(term: str | re.Pattern[str], text: str, text_terms: set[str]) -> bool:
    return bool(term.search(text)) if isinstance(term, re.Pattern) else term in text_terms


def render_report(question: str, notes: Notes, fallbacks: list[str], mode: str) -> tuple[str, list[Source]]:
    """The extractive Markdown report and its numbered sources ([n] in the text is sources[n-1])."""
    question = collapse_whitespace(question)
    lines = [f"# {question}", "", LABEL]
    if fallbacks:
        lines += ["", f"_Fallbacks used: {'; '.join(collapse_whitespace(f) for f in fallbacks)}._"]

    notes_sources = [s for s in notes.sources if s.url]
    sources = [Source(n=n, url=s.url, title=_title_for(s.url, s.title), origin=s.origin)
               for n, s in enumerate(notes_sources, start=1)]
    fallback_note = (f"This research ran with fallbacks ({'; '.join(fallbacks)}), so it may be less "
                     "complete than usual.") if fallbacks else ""

    if not any(s.key_points for s in notes_sources):
        lines += ["", "## Executive summary", "",
                  "No sources were found for this question, so there is nothing to quote. "
                  "Try rephrasing the question, adding seed URLs or another search provider."]
        lines += ["", "## Open questions", ""]
        lines.append(f"- The whole question remains open: no source addressed “{question}”.")
        if fallback_note:
            lines.append(f"- {fallback_note}")
        lines += ["", "## Sources", ""]
        lines += [f"{s.n}. [{_md_text(s.title)}]({_md_url(s.url)})" for s in sources] or ["None."]
        return "\n".join(lines) + "\n", sources

    # Rank every key point once more (notes keep document order) to pick the best ones.
    points = [(n, i, p) for n, s in enumerate(notes_sources, start=1) for i, p in enumerate(s.key_points)]
    scores = _score_all(question, [p for _, _, p in points])
    best_of: dict[int, str] = {}
    for (n, i, p), score in sorted(zip(points, scores), key=lambda x: (-x[1], x[0][0], x[0][1])):
        best_of.setdefault(n, p)
    source_of: dict[str, int] = {}
    for n, _, p in points:
        source_of.setdefault(p, n)

    # Executive summary: the overall insights, topped up with other sources' best sentences.
    target = 4 if mode == "max" else 3
    summary: list[tuple[str, int]] = []
    for sentence in [*notes.overall_insights, *(best_of[n] for n in sorted(best_of))]:
        n = source_of.get(sentence)
        if n is not None and all(sentence != s for s, _ in summary) and len(summary) < target:
            summary.append((sentence, n))
    lines += ["", "## Executive summary", "", " ".join(_quote(s, n) for s, n in summary)]

    lines += ["", "## Key findings", ""]
    lines += [f"- {_quote(best_of[n], n)}" for n in sorted(best_of)]

    lines += ["", "## Evidence and context", ""]
    for n, note in enumerate(notes_sources, start=1):
        if not note.key_points:
            continue
        kind = "search snippet" if note.origin == "snippet" else "page"
        lines += [f"**{_md_text(note.title)}** ({kind}) — " + " ".join(_quote(p, n) for p in note.key_points), ""]
    lines.pop()

    # Which sources address which of the question's terms (page text, not just key points).
    key_terms = _key_terms(question)
    source_text = {n: f"{s.title} {s.summary}" for n, s in enumerate(notes_sources, start=1)}
    source_terms = {n: set(_terms(text)) for n, text in source_text.items()}
    coverage = {display: [n for n in source_text if _mentions(term, source_text[n], source_terms[n])]
                for display, term in key_terms}
    shared = [(d, ns) for d, ns in coverage.items() if len(ns) >= 2]
    lines += ["", "## Implications and trade-offs", "",
              "Extractive mode cannot weigh trade-offs, reconcile disagreements or judge which source is "
              "right; it only shows where the sources speak to the same terms of the question."]
    single = [(d, ns[0]) for d, ns in coverage.items() if len(ns) == 1]
    if len(notes_sources) == 1:
        lines += ["", "Only one source was found, so there is nothing to compare it with."]
    elif shared:
        lines += ["", "Sources that address the same key terms (common ground to compare, not proof of agreement):", ""]
        lines += [f"- `{d}`: {_cite_list(ns)}" for d, ns in shared]
    else:
        lines += ["", "No key term of the question appears in more than one source, so the sources cannot be "
                  "compared on it."]
    if single and len(notes_sources) > 1:
        lines += ["", "Addressed by one source only: " + ", ".join(f"`{d}` [{n}]" for d, n in single) + "."]

    lines += ["", "## Open questions", ""]
    open_items: list[str] = []
    missing = [d for d, ns in coverage.items() if not ns]
    if missing:
        open_items.append("No source mentions " + ", ".join(f"`{d}`" for d in missing)
                          + "; that part of the question remains unanswered.")
    snippets = [n for n, s in enumerate(notes_sources, start=1) if s.origin == "snippet"]
    if snippets:
        open_items.append(f"{_cite_list(snippets)} {'is a search snippet' if len(snippets) == 1 else 'are search snippets'}"
                          " only; the pages themselves were not read, so context may be missing.")
    if fallback_note:
        open_items.append(fallback_note)
    open_items.append("Whether the quoted sentences fully answer the question is not judged here; "
                      "an LLM-backed report (or a read of the sources) is needed for that.")
    lines += [f"- {item}" for item in open_items]

    lines += ["", "## Sources", ""]
    lines += [f"{s.n}. [{_md_text(s.title)}]({_md_url(s.url)})" for s in sources]
    return "\n".join(lines) + "\n", sources


# --------------------------------------------------------------------------- verification

_CITATION = re.compile(r"“(.+?)”\s*\[(\d+)\]")


def cited_sentences(markdown: str) -> list[tuple[str, int]]:
    """Every quoted citation `“sentence” [n]` of the report, in order."""
    return [(m.group(1), int(m.group(2))) for m in _CITATION.finditer(markdown)]


def verify_citations(markdown: str, sources_text: dict[int, str]) -> list[str]:
    """Cited sentences that are NOT verbatim in the (whitespace-collapsed) text of the source they cite.

    An empty list means the extractive guarantee holds. A citation of a number missing from
    `sources_text` counts as not verbatim.
    """
    collapsed = {n: collapse_whitespace(t) for n, t in sources_text.items()}
    return [sentence for sentence, n in cited_sentences(markdown)
            if n not in collapsed or collapse_whitespace(sentence) != sentence or sentence not in collapsed[n]]
