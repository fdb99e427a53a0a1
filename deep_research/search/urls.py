"""URL normalisation (for deduplication) and ranking helpers shared by search providers.

`normalize_url` is deliberately conservative: it only applies rewrites that never change which
resource a URL names on an ordinary web server:

- scheme and host are lowercased; a trailing dot on the host is dropped;
- the default port (80 for http, 443 for https) is dropped;
- the fragment is dropped;
- tracking parameters (`utm_*`, `gclid`, `fbclid`, `ref`, `mc_cid`, `mc_eid`, ...) are dropped and
  the remaining query parameters are sorted (blank values are kept);
- an empty path becomes "/", and a trailing slash is removed from any other path.

It does not touch percent-encoding in the path, does not collapse `index.html` or `//`, and does
not strip `www.` (that is only done for the per-host grouping in `dedupe_and_rank`).
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from deep_research.models import SearchHit

DEFAULT_PORTS = {"http": 80, "https": 443}

TRACKING_PARAMS = frozenset({
    "gclid", "gclsrc", "dclid", "fbclid", "msclkid", "yclid", "igshid", "twclid", "ttclid",
    "mc_cid", "mc_eid", "ref", "ref_src", "ref_url", "_ga", "_gl", "_hsenc", "_hsmi",
    "mkt_tok", "oly_anon_id", "oly_enc_id", "vero_id", "wickedid", "srsltid",
})
TRACKING_PREFIXES = ("utm_",)


def _is_tracking(key: str) -> bool:
    key = key.lower()
    return key in TRACKING_PARAMS or key.startswith(TRACKING_PREFIXES)


def normalize_url(url: str) -> str:
    """A canonical form of `url` for deduplication (see the module docstring for the rules).

    Strings that are not absolute URLs (no scheme or no host) are returned stripped, unchanged.
    """
    url = url.strip()
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return url
    if not parts.scheme or not parts.netloc:
        return url
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".")
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host
    if parts.username is not None:
        userinfo = parts.username
        if parts.password is not None:
            userinfo += f":{parts.password}"
        netloc = f"{userinfo}@{host}"
    if port is not None and DEFAULT_PORTS.get(scheme) != port:
        netloc += f":{port}"
    path = parts.path or "/"
    if len(path) > 1:
        path = path.rstrip("/") or "/"
    query = ""
    if parts.query:
        pairs = [
            (k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not _is_tracking(k)
        ]
        query = urlencode(sorted(pairs))
    return urlunsplit((scheme, netloc, path, query, ""))


def host_key(url: str) -> str:
    """The host used for domain diversity: lowercased, without a leading `www.`."""
    try:
        host = (urlsplit(url.strip()).hostname or "").rstrip(".")
    except ValueError:
        return ""
    return host[4:] if host.startswith("www.") else host


def dedupe_and_rank(
    hits: list[SearchHit], max_results: int, max_per_host: int | None = None
) -> list[SearchHit]:
    """Merge duplicate hits, order them best first, and keep `max_results`.

    - Duplicates are hits whose URLs normalise to the same string. The merged hit takes the URL,
      title, score and provider of the best-scoring duplicate (the first one on a tie), the
      longest snippet of the group, and the longest title if the best one has none.
    - Ordering is by score descending, ties broken by normalised URL, so it is deterministic.
    - With `max_per_host`, at most that many hits of one host (`www.` ignored) are taken in the
      first pass; hits over the cap are deferred, not dropped: they fill the remaining slots, in
      rank order, only when the other hosts run out. One host therefore cannot crowd out the
      others, and a single-host result list is still filled.
    """
    if max_results <= 0:
        return []
    groups: dict[str, list[SearchHit]] = {}
    for hit in hits:
        groups.setdefault(normalize_url(hit.url), []).append(hit)

    merged: list[tuple[str, SearchHit]] = []
    for key, group in groups.items():
        best = max(group, key=lambda h: h.score)  # max() keeps the first of equal scores
        snippet = max((h.snippet for h in group), key=len)
        title = best.title or max((h.title for h in group), key=len)
        merged.append((key, best.model_copy(update={"snippet": snippet, "title": title})))
    merged.sort(key=lambda kh: (-kh[1].score, kh[0]))
    ranked = [hit for _, hit in merged]

    if max_per_host is None or max_per_host <= 0:
        return ranked[:max_results]

    chosen: list[SearchHit] = []
    deferred: list[SearchHit] = []
    per_host: dict[str, int] = {}
    for hit in ranked:
        host = host_key(hit.url)
        if per_host.get(host, 0) < max_per_host:
            per_host[host] = per_host.get(host, 0) + 1
            chosen.append(hit)
            if len(chosen) >= max_results:
                return chosen
        else:
            deferred.append(hit)
    return chosen + deferred[: max_results - len(chosen)]
