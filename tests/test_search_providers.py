"""Web search providers against a loopback server speaking each provider's wire format; the
factory (registry, loader, overrides, several providers); the search activity's retry delay."""

from __future__ import annotations

import asyncio
import socket
import textwrap
from datetime import timedelta

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

import starter
from activities.deps import Deps, to_application_error
from activities.search import SearchActivities
from deep_research.config import load_settings
from deep_research.models import MAX_RAW_CONTENT_CHARS, SearchHit, SearchInput
from deep_research.search import factory as F
from deep_research.search.base import ConfigurationError, SearchError, SearchProvider
from deep_research.search.urls import normalize_url
from tests.fake_search_servers import KEYS, PROVIDERS, FakeSearchServer

AUTH_HEADER = {"serper": "X-API-KEY", "tavily": "Authorization", "brave": "X-Subscription-Token"}


@pytest.fixture(scope="module")
def server():
    fake = FakeSearchServer().start()
    yield fake
    fake.stop()


@pytest.fixture(autouse=True)
def _reset(server):
    server.reset()
    yield
    F.clear_overrides()


def provider(server, name: str, **env: str) -> SearchProvider:
    return F.build_provider(name, server.env(**env))


# --------------------------------------------------------------------------- each provider


@pytest.mark.parametrize("name", PROVIDERS)
async def test_results_are_normalised(server, name):
    hits = await provider(server, name).search("python asyncio", max_results=10)
    assert hits, name
    assert all(h.provider == name for h in hits)
    assert all(h.url.startswith("https://") and h.title for h in hits)
    assert all("<strong>" not in h.snippet and "&amp;" not in h.snippet for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].score == 1.0
    assert all(h.raw_content is None for h in hits)
    request = server.requests[-1]
    if name in AUTH_HEADER:
        sent = request["headers"][AUTH_HEADER[name]]
        assert KEYS[name] in sent
        assert KEYS[name] not in str(request["params"])  # header only, never in the URL
    query = request["params"].get("q") or request["body"].get("q") or request["body"].get("query")
    assert query == "python asyncio"


async def test_wire_details(server):
    await provider(server, "searxng").search("q1", max_results=2)
    assert server.requests[-1]["params"]["format"] == "json"
    await provider(server, "serper").search("q2", max_results=2)
    assert server.requests[-1]["body"] == {"q": "q2", "num": 2}
    hits = await provider(server, "brave").search("q3", max_results=1)
    assert server.requests[-1]["params"]["count"] == "1" and len(hits) == 1
    await provider(server, "tavily").search("q4", max_results=50)
    body = server.requests[-1]["body"]
    assert body["query"] == "q4" and body["max_results"] == 20 and body["include_raw_content"] is False
    assert server.requests[-1]["headers"]["Authorization"] == f"Bearer {KEYS['tavily']}"
    # SearxNG cannot limit its page: cut here.
    assert len(await provider(server, "searxng").search("q5", max_results=1)) == 1


async def test_brave_snippets_lose_their_markup(server):
    hits = await provider(server, "brave").search("asyncio", max_results=5)
    assert hits[0].snippet == "asyncio is a library to write concurrent code using the async/await syntax."
    assert hits[1].snippet.endswith("concurrent programming & more.")


async def test_tavily_raw_content_is_optional_and_bounded(server):
    hits = await provider(server, "tavily", TAVILY_RAW_CONTENT="1").search("asyncio", max_results=5)
    assert server.requests[-1]["body"]["include_raw_content"] is True
    assert all(h.raw_content and len(h.raw_content) == MAX_RAW_CONTENT_CHARS for h in hits)
    assert hits[0].raw_content.startswith("Coroutines and Tasks")


@pytest.mark.parametrize("name", PROVIDERS)
async def test_empty_results_are_not_an_error(server, name):
    server.mode[name] = "empty"
    p = provider(server, name)
    assert await p.search("nothing matches this", max_results=10) == []
    assert await p.suggestions("nothing matches this", limit=3) == []


@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.parametrize("mode, wait", [("429", 7.0), ("429-date", 30.0)])
async def test_rate_limit_is_retryable_with_retry_after(server, name, mode, wait):
    server.mode[name] = mode
    with pytest.raises(SearchError) as info:
        await provider(server, name).search("asyncio", max_results=5)
    err = info.value
    assert err.retryable and "rate limited (429)" in str(err) and str(err).startswith(f"{name}:")
    assert err.retry_after_s == pytest.approx(wait, abs=2.0)


@pytest.mark.parametrize("name", PROVIDERS)
async def test_server_errors_are_retryable(server, name):
    server.mode[name] = "500"
    with pytest.raises(SearchError) as info:
        await provider(server, name).search("asyncio", max_results=5)
    assert info.value.retryable and "server error (500)" in str(info.value)
    assert info.value.retry_after_s is None
    server.mode[name] = "503"
    with pytest.raises(SearchError) as info:
        await provider(server, name).search("asyncio", max_results=5)
    assert info.value.retryable and info.value.retry_after_s == 3.0


@pytest.mark.parametrize("name", PROVIDERS)
async def test_rejected_credentials_are_not_retryable_and_never_shown(server, name):
    server.mode[name] = "401"
    with pytest.raises(SearchError) as info:
        await provider(server, name).search("asyncio", max_results=5)
    message = str(info.value)
    assert not info.value.retryable
    assert message.startswith(f"{name}: ")
    assert ("authentication" if name == "searxng" else "API key rejected") in message
    assert all(key not in message for key in KEYS.values())
    app = to_application_error(info.value)
    assert app.non_retryable and app.type == "SearchError"


@pytest.mark.parametrize("name", ["serper", "tavily", "brave"])
async def test_wrong_key_is_rejected(server, name):
    p = provider(server, name, **{f"{name.upper()}_API_KEY": "wrong-key-000"})
    with pytest.raises(SearchError) as info:
        await p.search("asyncio", max_results=5)
    assert not info.value.retryable and "API key rejected" in str(info.value)
    assert "wrong-key-000" not in str(info.value) and "wrong-key-000" not in repr(p)


async def test_provider_message_is_shown_with_the_key_masked(server):
    server.mode["serper"] = "bad-request"
    with pytest.raises(SearchError) as info:
        await provider(server, "serper").search("asyncio", max_results=5)
    message = str(info.value)
    assert not info.value.retryable
    assert "request rejected (400): Not enough credits for key ***" in message
    assert KEYS["serper"] not in message


@pytest.mark.parametrize("name", PROVIDERS)
async def test_malformed_and_misshapen_answers(server, name):
    server.mode[name] = "malformed"
    with pytest.raises(SearchError) as info:
        await provider(server, name).search("asyncio", max_results=5)
    assert info.value.retryable and "not JSON" in str(info.value)  # a proxy's error page: transient
    server.mode[name] = "shape"
    with pytest.raises(SearchError) as info:
        await provider(server, name).search("asyncio", max_results=5)
    assert not info.value.retryable and "unexpected answer" in str(info.value)


async def test_unreachable_and_slow_servers_are_retryable(server):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = F.build_provider("searxng", {"SEARXNG_URL": f"http://127.0.0.1:{port}"})
    with pytest.raises(SearchError) as info:
        await p.search("asyncio", max_results=5)
    assert info.value.retryable and "cannot reach" in str(info.value)

    server.delay_s = 1.0
    p = provider(server, "brave", DR_SEARCH_TIMEOUT_S="0.2")
    with pytest.raises(SearchError) as info:
        await p.search("asyncio", max_results=5)
    assert info.value.retryable and "within 0.2s" in str(info.value)


async def test_searxng_with_every_engine_unresponsive_is_retryable(server):
    server.mode["searxng"] = "unresponsive"
    with pytest.raises(SearchError) as info:
        await provider(server, "searxng").search("asyncio", max_results=5)
    assert info.value.retryable and "google, brave" in str(info.value)


async def test_suggestions_come_with_the_results(server):
    expected = {
        "searxng": ["asyncio tutorial", "asyncio example"],
        "serper": ["asyncio vs threading", "asyncio gather", "What is asyncio used for?"],
        "brave": ["asyncio python"],
        "tavily": [],
    }
    for name, suggestions in expected.items():
        p = provider(server, name)
        await p.search("asyncio", max_results=5)
        before = len(server.requests)
        assert await p.suggestions("asyncio", limit=5) == suggestions, name
        assert len(server.requests) == before  # remembered from the result page
        assert await p.suggestions("asyncio", limit=1) == suggestions[:1]


async def test_suggestions_without_a_search_ask_when_the_api_offers_them(server):
    p = provider(server, "searxng")
    assert await p.suggestions("pathlib", limit=2) == ["pathlib tutorial", "pathlib example"]
    assert len(server.requests) == 1
    p = provider(server, "tavily")
    assert await p.suggestions("pathlib", limit=2) == []
    assert len(server.requests) == 1  # Tavily: nothing to ask for


@pytest.mark.parametrize("limit", [1, 2, 5])
async def test_concurrency_limit_per_provider(server, limit):
    server.delay_s = 0.15
    p = provider(server, "serper", DR_SEARCH_CONCURRENCY=str(limit))
    results = await asyncio.gather(*(p.search(f"q{i}", max_results=3) for i in range(6)))
    assert all(results)
    assert server.max_in_flight == limit


# --------------------------------------------------------------------------- factory


def settings_for(tmp_path, **env):
    return load_settings({"DR_DATA_DIR": str(tmp_path), **env})


def test_registry_knows_the_builtin_providers():
    assert {"local", "searxng", "serper", "tavily", "brave"} <= set(F.known_providers())


def test_unknown_backend_is_a_configuration_error_naming_it(server, tmp_path):
    factory = F.make_search_factory(settings_for(tmp_path, DR_SEARCH_PROVIDER="bingo"), server.env())
    with pytest.raises(ConfigurationError) as info:
        factory(None)
    assert "unknown search provider 'bingo'" in str(info.value)
    assert "deep_research.search.providers.bingo" in str(info.value)
    app = to_application_error(info.value)
    assert app.non_retryable and app.type == "ConfigurationError"


def test_unknown_name_from_a_workflow_input_imports_nothing(server, tmp_path):
    factory = F.make_search_factory(settings_for(tmp_path), server.env())
    with pytest.raises(ConfigurationError) as info:
        factory("antigravity")
    assert "unknown search provider 'antigravity'" in str(info.value)
    assert "DR_SEARCH_CUSTOM_PROVIDERS" in str(info.value)


@pytest.mark.parametrize("name, var", [("serper", "SERPER_API_KEY"), ("tavily", "TAVILY_API_KEY"),
                                       ("brave", "BRAVE_API_KEY"), ("searxng", "SEARXNG_URL")])
def test_missing_setting_names_the_variable(tmp_path, name, var):
    factory = F.make_search_factory(settings_for(tmp_path), {})
    with pytest.raises(ConfigurationError) as info:
        factory(name)
    assert str(info.value).startswith(f"{name}: {var} is not set")


def test_bad_settings_are_configuration_errors(tmp_path):
    factory = F.make_search_factory(settings_for(tmp_path), {"SEARXNG_URL": "ftp://x", "DR_SEARCH_TIMEOUT_S": "1"})
    with pytest.raises(ConfigurationError, match="SEARXNG_URL must be an http"):
        factory("searxng")
    factory = F.make_search_factory(settings_for(tmp_path), {"SEARXNG_URL": "http://x", "DR_SEARCH_TIMEOUT_S": "soon"})
    with pytest.raises(ConfigurationError, match="DR_SEARCH_TIMEOUT_S='soon' is not a number"):
        factory("searxng")


def test_instances_are_cached_per_name(server, tmp_path):
    factory = F.make_search_factory(settings_for(tmp_path, DR_SEARCH_PROVIDER="searxng"), server.env())
    assert factory(None) is factory("searxng") is factory("searxng")
    assert factory("brave") is not factory("searxng")
    local = factory("local")
    assert local.name == "local" and str(local.db_path) == str(tmp_path / "index.sqlite")


class _Fake(SearchProvider):
    name = "fake"

    def __init__(self, hits):
        self.hits = hits

    async def search(self, query, *, max_results):
        return self.hits[:max_results]


async def test_override_replaces_a_builtin(server, tmp_path):
    fake = _Fake([SearchHit(url="https://example.org/", title="Example", provider="fake")])
    with F.overridden("brave", fake):
        factory = F.make_search_factory(settings_for(tmp_path), {})  # no BRAVE_API_KEY needed
        assert factory("brave") is fake
    assert "brave" in F.known_providers()
    with pytest.raises(ConfigurationError):
        F.make_search_factory(settings_for(tmp_path), {})("brave")


def test_register_provider_adds_a_name(tmp_path):
    F.register_provider("fake-test", lambda env: _Fake([]))
    try:
        assert "fake-test" in F.known_providers()
        assert F.make_search_factory(settings_for(tmp_path), {})("fake-test").name == "fake"
    finally:
        F._REGISTRY.pop("fake-test", None)


async def test_custom_module_is_loaded_dynamically(tmp_path, monkeypatch):
    pkg = tmp_path / "acme_search"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "engine.py").write_text(textwrap.dedent('''
        from deep_research.models import SearchHit
        from deep_research.search.base import SearchProvider

        class AcmeProvider(SearchProvider):
            name = "acme"

            def __init__(self, greeting):
                self.greeting = greeting

            async def search(self, query, *, max_results):
                return [SearchHit(url="https://acme.test/" + query, title=self.greeting, provider=self.name)]

        def build(env):
            return AcmeProvider(env.get("ACME_GREETING", "hello"))
    '''))
    (tmp_path / "plainsearch.py").write_text(textwrap.dedent('''
        from deep_research.search.base import SearchProvider

        class Plain(SearchProvider):
            name = "plain"

            @classmethod
            def from_env(cls, env):
                return cls()

            async def search(self, query, *, max_results):
                return []

        PROVIDER_CLASS = Plain
    '''))
    (tmp_path / "brokensearch.py").write_text("import no_such_module_here\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    settings = settings_for(tmp_path, DR_SEARCH_PROVIDER="acme_search.engine")
    factory = F.make_search_factory(settings, {"ACME_GREETING": "hi", "DR_SEARCH_CUSTOM_PROVIDERS": "plainsearch,brokensearch"})
    acme = factory(None)
    hits = await acme.search("x", max_results=3)
    assert hits[0].title == "hi" and hits[0].provider == "acme"
    assert factory("plainsearch").name == "plain"
    with pytest.raises(ConfigurationError) as info:
        factory("brokensearch")
    assert "'brokensearch' failed to import" in str(info.value) and "no_such_module_here" in str(info.value)


# --------------------------------------------------------------------------- several providers


async def test_several_providers_are_merged_and_deduplicated(server, tmp_path):
    factory = F.make_search_factory(settings_for(tmp_path, DR_SEARCH_PROVIDER="searxng,serper,tavily,brave"),
                                    server.env())
    multi = factory(None)
    assert multi.name == "searxng+serper+tavily+brave"
    hits = await multi.search("asyncio", max_results=20)
    keys = [normalize_url(h.url) for h in hits]
    assert len(keys) == len(set(keys))
    # Tracking parameters, fragments, host case and trailing slashes collapsed:
    assert keys.count("https://docs.python.org/3/library/asyncio.html") == 1
    assert keys.count("https://realpython.com/async-io-python") == 1
    assert "https://docs.python.org/3/library/asyncio-task.html" in keys
    assert {h.provider for h in hits} == {"searxng", "serper", "tavily", "brave"}
    assert len(hits) == 6
    assert {"asyncio tutorial", "asyncio vs threading"} <= set(await multi.suggestions("asyncio", limit=10))


async def test_one_provider_failing_leaves_the_others(server, tmp_path):
    factory = F.make_search_factory(settings_for(tmp_path), server.env())
    server.mode["brave"] = "500"
    hits = await factory("searxng,brave").search("asyncio", max_results=10)
    assert hits and {h.provider for h in hits} == {"searxng"}
    server.mode["searxng"] = "429"
    with pytest.raises(SearchError) as info:
        await factory("searxng,brave").search("asyncio", max_results=10)
    assert info.value.retryable and info.value.retry_after_s == 7.0
    assert "searxng: rate limited" in str(info.value) and "brave: server error" in str(info.value)


# --------------------------------------------------------------------------- the search activity


def _deps(factory) -> Deps:
    return Deps(settings=None, sandbox=None, artifacts=None, search_provider=factory)  # type: ignore[arg-type]


async def test_activity_merges_related_queries_with_domain_diversity(server, tmp_path):
    factory = F.make_search_factory(settings_for(tmp_path, DR_SEARCH_PROVIDER="serper"), server.env())
    out = await ActivityEnvironment().run(
        SearchActivities(_deps(factory)).search,
        SearchInput(question="asyncio", max_results=6, related_queries=2),
    )
    assert out.provider == "serper"
    assert out.queries == ["asyncio", "asyncio vs threading", "asyncio gather"]
    assert len([r for r in server.requests if r["provider"] == "serper"]) == 3
    keys = [normalize_url(h.url) for h in out.hits]
    assert len(keys) == len(set(keys)) == 3


async def test_activity_turns_retry_after_into_next_retry_delay(server, tmp_path):
    factory = F.make_search_factory(settings_for(tmp_path, DR_SEARCH_PROVIDER="brave"), server.env())
    server.mode["brave"] = "429"
    with pytest.raises(ApplicationError) as info:
        await ActivityEnvironment().run(SearchActivities(_deps(factory)).search,
                                        SearchInput(question="asyncio", max_results=5, related_queries=1))
    assert info.value.next_retry_delay == timedelta(seconds=7)
    assert not info.value.non_retryable and info.value.type == "SearchError"


async def test_activity_reports_configuration_errors_as_non_retryable(server, tmp_path):
    factory = F.make_search_factory(settings_for(tmp_path), {})
    with pytest.raises(ApplicationError) as info:
        await ActivityEnvironment().run(SearchActivities(_deps(factory)).search,
                                        SearchInput(question="asyncio", max_results=5, related_queries=1,
                                                    provider="tavily"))
    assert info.value.non_retryable and info.value.type == "ConfigurationError"
    assert "TAVILY_API_KEY is not set" in str(info.value)


# --------------------------------------------------------------------------- CLI and worker


def test_starter_refuses_an_unknown_provider(capsys, monkeypatch):
    monkeypatch.setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
    assert starter.main(["start", "What is the GIL?", "--provider", "bingo"]) == 2
    err = capsys.readouterr().err
    assert "unknown search provider 'bingo'" in err and "searxng" in err and "Temporal" not in err


def test_starter_accepts_known_lists_and_dotted_modules():
    assert starter.check_provider("searxng, brave") == "searxng,brave"
    assert starter.check_provider("acme_search.engine") == "acme_search.engine"
    assert starter.check_provider(None) is None


def test_worker_factory_delegates_to_the_registry(server, tmp_path, monkeypatch):
    import worker

    for key, value in server.env().items():
        monkeypatch.setenv(key, value)
    factory = worker.make_search_factory(settings_for(tmp_path, DR_SEARCH_PROVIDER="searxng"))
    assert factory(None).name == "searxng" and factory("brave").name == "brave"
