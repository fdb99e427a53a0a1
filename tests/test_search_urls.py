from __future__ import annotations

import pytest

from deep_research.models import SearchHit
from deep_research.search.urls import dedupe_and_rank, host_key, normalize_url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # scheme and host case
        ("HTTP://Example.COM/Path", "http://example.com/Path"),
        ("https://WWW.Example.com/a/B", "https://www.example.com/a/B"),
        # default ports dropped, others kept
        ("http://example.com:80/a", "http://example.com/a"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("http://example.com:8080/a", "http://example.com:8080/a"),
        ("https://example.com:80/a", "https://example.com:80/a"),
        # trailing slash: removed except for the root; empty path is the root
        ("https://example.com/docs/", "https://example.com/docs"),
        ("https://example.com/", "https://example.com/"),
        ("https://example.com", "https://example.com/"),
        # fragments dropped
        ("https://example.com/page#section-2", "https://example.com/page"),
        ("https://example.com/#top", "https://example.com/"),
        # tracking parameters dropped
        ("https://example.com/a?utm_source=x&utm_medium=y", "https://example.com/a"),
        ("https://example.com/a?id=3&gclid=abc&fbclid=def", "https://example.com/a?id=3"),
        ("https://example.com/a?ref=hn&mc_cid=1&mc_eid=2&q=x", "https://example.com/a?q=x"),
        ("https://example.com/a?UTM_Campaign=z&q=1", "https://example.com/a?q=1"),
        # remaining parameters sorted (blank values kept)
        ("https://example.com/s?q=python&a=1", "https://example.com/s?a=1&q=python"),
        ("https://example.com/s?b=2&a=&a=1", "https://example.com/s?a=&a=1&b=2"),
        # everything at once
        (
            "HTTPS://Docs.Python.org:443/3/library/?utm_campaign=x&z=1&a=2#frag",
            "https://docs.python.org/3/library?a=2&z=1",
        ),
        # not an absolute URL: returned stripped, unchanged
        ("  not a url  ", "not a url"),
    ],
)
def test_normalize_url(url: str, expected: str) -> None:
    assert normalize_url(url) == expected


def test_normalize_url_is_idempotent() -> None:
    url = "HTTPS://Example.com:443/a/b/?utm_source=x&z=1&a=2#f"
    once = normalize_url(url)
    assert normalize_url(once) == once


def test_host_key_ignores_www_and_case() -> None:
    assert host_key("https://WWW.Example.com/x") == "example.com"
    assert host_key("http://127.0.0.2:8765/a.html") == "127.0.0.2"


def _hit(url: str, score: float, snippet: str = "", title: str = "t") -> SearchHit:
    return SearchHit(url=url, title=title, snippet=snippet, score=score, provider="test")


def test_dedupe_keeps_best_score_and_longest_snippet() -> None:
    hits = [
        _hit("https://example.com/a?utm_source=x", 1.0, snippet="a much longer snippet here"),
        _hit("https://EXAMPLE.com/a/#frag", 5.0, snippet="short", title="best"),
        _hit("https://example.com/b", 3.0),
    ]
    out = dedupe_and_rank(hits, max_results=10)
    assert [h.url for h in out] == ["https://EXAMPLE.com/a/#frag", "https://example.com/b"]
    assert out[0].score == 5.0
    assert out[0].title == "best"
    assert out[0].snippet == "a much longer snippet here"


def test_rank_order_is_score_desc_with_ties_by_url() -> None:
    hits = [_hit("https://x.org/c", 1.0), _hit("https://x.org/b", 2.0), _hit("https://x.org/a", 1.0)]
    assert [h.url for h in dedupe_and_rank(hits, 10)] == [
        "https://x.org/b", "https://x.org/a", "https://x.org/c",
    ]
    # deterministic whatever the input order
    assert dedupe_and_rank(list(reversed(hits)), 10) == dedupe_and_rank(hits, 10)


def test_max_results() -> None:
    hits = [_hit(f"https://x.org/{i}", float(i)) for i in range(10)]
    out = dedupe_and_rank(hits, 3)
    assert [h.score for h in out] == [9.0, 8.0, 7.0]
    assert dedupe_and_rank(hits, 0) == []


def test_domain_diversity() -> None:
    hits = [_hit(f"https://big.example/{i}", 10.0 - i) for i in range(6)]
    hits += [_hit("https://other.org/1", 2.0), _hit("https://www.third.net/1", 1.0)]
    out = dedupe_and_rank(hits, max_results=4, max_per_host=2)
    assert [h.url for h in out] == [
        "https://big.example/0", "https://big.example/1", "https://other.org/1", "https://www.third.net/1",
    ]
    # without the cap the big host fills the list
    assert all(h.url.startswith("https://big.example/") for h in dedupe_and_rank(hits, 4))


def test_domain_diversity_fills_remaining_slots_with_deferred_hits() -> None:
    hits = [_hit(f"https://big.example/{i}", 10.0 - i) for i in range(5)] + [_hit("https://other.org/1", 1.0)]
    out = dedupe_and_rank(hits, max_results=5, max_per_host=2)
    assert [h.url for h in out] == [
        "https://big.example/0", "https://big.example/1", "https://other.org/1",
        "https://big.example/2", "https://big.example/3",
    ]
    # www. counts as the same host
    same = [_hit("https://www.a.com/1", 3.0), _hit("https://a.com/2", 2.0), _hit("https://b.com/1", 1.0)]
    assert [h.url for h in dedupe_and_rank(same, 2, max_per_host=1)] == ["https://www.a.com/1", "https://b.com/1"]
