"""Citation check for an LLM-written report: deterministic, lexical, no LLM needed.

Every `[n]` (also `[1, 2]`, `[1-3]`, `[1][2]`) must name a source in `sources_text`; an invalid
number is marked inline as `[7]⚠ (no such source)`.

Every sentence carrying a citation is a *claim*, compared with the text of the source(s) it cites
(together) by lexical support: the share of the claim's distinct content words (stopwords dropped,
light stemming, the same terms as the extractive scorer) that occur in the cited text.

- support < SUPPORT_THRESHOLD (0.5), or a number in the claim (two digits or more, or a dotted
  version such as 3.11) that the cited text never contains -> unsupported, marked inline with
  ` ⚠ *(not supported by source n)*` (no brackets, so the mark is not itself a citation);
- claims with fewer than MIN_CLAIM_TERMS content words are too short to judge and pass;
- a claim that cites only invalid numbers is unsupported.

This catches fabricated citations and claims about things the source never mentions. It cannot
catch a claim that reuses the source's words with the opposite meaning: it is a floor, not proof.
Headings, code blocks and the Sources/References section are not checked.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from deep_research.report.extractive import _terms  # the extractive scorer's content words

SUPPORT_THRESHOLD = 0.5
MIN_CLAIM_TERMS = 2
MAX_RANGE = 20  # [1-300] is not a range of sources

_GROUP = r"\[\d{1,3}(?:\s*[,;–-]\s*\d{1,3})*\](?!\()"
_CITATION = re.compile(_GROUP)
# A sentence end: terminal punctuation (closing quotes/emphasis), then any citations, then space or end.
_SENTENCE_END = re.compile(r"[.!?]+[\"'”’)*_]*(?:\s*" + _GROUP + r")*(?=\s|$)")
_ABBREVIATIONS = {"e.g", "i.e", "vs", "cf", "approx", "fig", "no", "dr", "mr", "mrs", "ms", "al", "etc"}
_LIST_MARKER = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_URL = re.compile(r"\(?https?://[^\s)]+\)?")
_SOURCES_HEADING = re.compile(r"^#{1,6}\s*(?:sources|references|bibliography)\b", re.IGNORECASE)
_NUMBER = re.compile(r"^\d+(?:\.\d+)*$")


class CitationReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    checked: int = 0  # claims (sentences) carrying at least one citation
    unsupported: int = 0  # claims marked as not supported by what they cite
    invalid_numbers: list[int] = Field(default_factory=list)  # cited numbers with no such source
    unsupported_claims: list[str] = Field(default_factory=list)
    marked_markdown: str = ""


def _numbers(group: str) -> list[int]:
    numbers: list[int] = []
    for part in re.split(r"\s*[,;]\s*", group.strip("[]")):
        bounds = [int(x) for x in re.split(r"\s*[–-]\s*", part) if x]
        if len(bounds) == 2 and 0 <= bounds[1] - bounds[0] <= MAX_RANGE:
            numbers += range(bounds[0], bounds[1] + 1)
        else:
            numbers += bounds
    return numbers


def _sentences(line: str) -> list[str]:
    """`line` cut into sentences whose concatenation is `line` (each keeps its trailing citations)."""
    pieces, start = [], 0
    for match in _SENTENCE_END.finditer(line):
        word = line[start:match.start()].rpartition(" ")[2].lower().lstrip("(\"'“*_")
        if word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
            continue
        pieces.append(line[start:match.end()])
        start = match.end()
    if line[start:]:
        pieces.append(line[start:])
    return pieces


def _claim_text(sentence: str) -> str:
    text = " ".join(_CITATION.sub("", _LIST_MARKER.sub("", sentence)).split())
    return re.sub(r"\s+([.!?,;:])", r"\1", text)


def _claim_terms(sentence: str) -> set[str]:
    text = _CITATION.sub(" ", _URL.sub(" ", _LIST_MARKER.sub("", sentence)))
    return set(_terms(text))


def _mark_invalid(sentence: str, valid: set[int]) -> str:
    def repl(match: re.Match[str]) -> str:
        bad = [n for n in _numbers(match.group()) if n not in valid]
        if not bad:
            return match.group()
        if len(bad) == len(_numbers(match.group())):
            return f"{match.group()}⚠ (no such source)"
        return f"{match.group()}⚠ (no such source: {', '.join(map(str, bad))})"
    return _CITATION.sub(repl, sentence)


def check_citations(markdown: str, sources_text: dict[int, str]) -> CitationReport:
    """Check every `[n]` of `markdown` against `sources_text` (n -> the text source n says); see module doc."""
    source_terms = {n: set(_terms(text)) for n, text in sources_text.items()}
    valid = set(sources_text)
    report = CitationReport()
    invalid: set[int] = set()
    out_lines: list[str] = []
    in_code = in_sources = False
    for line in markdown.split("\n"):
        stripped = line.strip()
        if stripped.startswith("```"):
            in_code = not in_code
        if stripped.startswith("#"):
            in_sources = bool(_SOURCES_HEADING.match(stripped))
        if in_code or in_sources or stripped.startswith(("#", "```")) or not _CITATION.search(line):
            out_lines.append(line)
            continue
        out: list[str] = []
        for sentence in _sentences(line):
            cited = [n for m in _CITATION.finditer(sentence) for n in _numbers(m.group())]
            if not cited:
                out.append(sentence)
                continue
            report.checked += 1
            good = list(dict.fromkeys(n for n in cited if n in valid))
            invalid.update(n for n in cited if n not in valid)
            marked = _mark_invalid(sentence, valid)
            if not _supported(sentence, good, source_terms):
                report.unsupported += 1
                report.unsupported_claims.append(_claim_text(sentence))
                trail = marked[len(marked.rstrip()):]
                if good:
                    label = "source" if len(good) == 1 else "sources"
                    note = f" ⚠ *(not supported by {label} {', '.join(map(str, good))})*"
                else:
                    note = " ⚠ *(cites no existing source)*"
                marked = marked.rstrip() + note + trail
            out.append(marked)
        out_lines.append("".join(out))
    report.invalid_numbers = sorted(invalid)
    report.marked_markdown = "\n".join(out_lines)
    return report


def _supported(sentence: str, cited: list[int], source_terms: dict[int, set[str]]) -> bool:
    if not cited:
        return False
    claim = _claim_terms(sentence)
    if len(claim) < MIN_CLAIM_TERMS:
        return True
    available = set().union(*(source_terms[n] for n in cited))
    missing_numbers = [t for t in claim if _NUMBER.match(t) and (len(t) >= 2 or "." in t) and t not in available]
    if missing_numbers:
        return False
    return len(claim & available) / len(claim) >= SUPPORT_THRESHOLD
