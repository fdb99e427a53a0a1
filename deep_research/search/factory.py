"""Search providers by name: a registry, a dynamic loader, overrides, and several at once.

A backend name becomes a provider in this order:

1. an override (`override_provider(name, builder_or_instance)`: tests, or replacing a built-in);
2. the registry (`register_provider(name, builder)`); built in: local, searxng, serper, tavily,
   brave;
3. the dynamic loader, for names the worker's configuration allows (listed in
   DR_SEARCH_PROVIDER or DR_SEARCH_CUSTOM_PROVIDERS; a name coming from a workflow input alone
   never imports anything): module `deep_research.search.providers.<backend>`, then a module
   named `<backend>` (dotted names allowed, e.g. `mycompany.search`). The module exposes
   `build(env) -> SearchProvider`, or `PROVIDER_CLASS` (built with `PROVIDER_CLASS.from_env(env)`
   if it has it, else `PROVIDER_CLASS()`), or `register_search_provider(register)` which calls
   `register(name, builder)`.

Anything wrong (unknown backend, missing key or URL, a module that does not import) is a
`ConfigurationError` naming the backend or the environment variable; it is never retried.

A comma list (`searxng,brave`) gives a `MultiProvider`: every provider is asked at once, their
results merged and deduplicated by normalised URL; one provider failing is logged and the
others' results used; all failing raises (retryable if any failure is).

Builders take the environment (`Mapping[str, str]`): keys and URLs are read from the worker's
environment when a provider is first needed, and instances are cached per name by the factory.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import structlog

from deep_research.config import Settings
from deep_research.models import SearchHit
from deep_research.search.base import ConfigurationError, SearchError, SearchProvider
from deep_research.search.urls import dedupe_and_rank

log = structlog.get_logger("search")

Builder = Callable[[Mapping[str, str]], SearchProvider]

PROVIDERS_PACKAGE = "deep_research.search.providers"
BUILTIN_WEB = ("searxng", "serper", "tavily", "brave")
_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")

_REGISTRY: dict[str, Builder] = {}
_OVERRIDES: dict[str, Builder] = {}


def _check_name(name: str) -> str:
    name = name.strip()
    if not _NAME_RE.match(name):
        raise ConfigurationError(f"invalid search provider name {name!r}")
    return name


def _as_builder(target: Builder | SearchProvider) -> Builder:
    if isinstance(target, SearchProvider):
        return lambda env: target
    if not callable(target):
        raise TypeError(f"a search provider builder must be callable or a SearchProvider, got {target!r}")
    return target


def register_provider(name: str, builder: Builder | SearchProvider) -> None:
    """Add (or replace) a named provider in the registry."""
    _REGISTRY[_check_name(name)] = _as_builder(builder)


def override_provider(name: str, builder: Builder | SearchProvider) -> None:
    """Make `name` resolve to this builder (or instance) before the registry and the loader."""
    _OVERRIDES[_check_name(name)] = _as_builder(builder)


def clear_overrides(name: str | None = None) -> None:
    if name is None:
        _OVERRIDES.clear()
    else:
        _OVERRIDES.pop(name, None)


@contextmanager
def overridden(name: str, builder: Builder | SearchProvider) -> Iterator[None]:
    """`with overridden("brave", fake): ...` (restores what was there before)."""
    previous = _OVERRIDES.get(name)
    override_provider(name, builder)
    try:
        yield
    finally:
        if previous is None:
            _OVERRIDES.pop(name, None)
        else:
            _OVERRIDES[name] = previous


def known_providers() -> list[str]:
    return sorted(set(_REGISTRY) | set(_OVERRIDES))


def _build_local(env: Mapping[str, str]) -> SearchProvider:
    from deep_research.search.local_index import LocalIndexProvider

    path = (env.get("DR_SEARCH_INDEX") or "").strip()
    if not path:
        raise ConfigurationError("local: DR_SEARCH_INDEX is not set (path of the local search index)")
    return LocalIndexProvider(path)


def _builtin(backend: str) -> Builder:
    def build(env: Mapping[str, str]) -> SearchProvider:
        module = importlib.import_module(f"{PROVIDERS_PACKAGE}.{backend}")
        return module.build(env)

    return build


register_provider("local", _build_local)
for _backend in BUILTIN_WEB:
    register_provider(_backend, _builtin(_backend))


# --------------------------------------------------------------------------- dynamic loading


def _missing(exc: ModuleNotFoundError, module_name: str) -> bool:
    """Whether the import failed because `module_name` itself (or a parent) does not exist,
    as opposed to the module existing and failing on an import of its own."""
    missing = exc.name or ""
    return bool(missing) and (module_name == missing or module_name.startswith(missing + "."))


def _builder_from_module(module: Any, backend: str) -> Builder:
    build = getattr(module, "build", None)
    if callable(build):
        return build
    cls = getattr(module, "PROVIDER_CLASS", None)
    if cls is not None:
        from_env = getattr(cls, "from_env", None)
        return from_env if callable(from_env) else (lambda env: cls())
    register = getattr(module, "register_search_provider", None)
    if callable(register):
        found: dict[str, Builder] = {}
        register(lambda name, builder: found.__setitem__(name, _as_builder(builder)))
        if backend in found:
            return found[backend]
        if len(found) == 1:
            return next(iter(found.values()))
        raise ConfigurationError(
            f"search provider module {module.__name__!r} registered {sorted(found)}, not {backend!r}"
        )
    raise ConfigurationError(
        f"search provider module {module.__name__!r} has no build(env), PROVIDER_CLASS or "
        f"register_search_provider(register)"
    )


def load_backend(backend: str) -> Builder:
    """The builder of a backend from `deep_research.search.providers.<backend>`, else from a
    module named `<backend>`; ConfigurationError if neither exists or the module is unusable."""
    backend = _check_name(backend)
    candidates = [f"{PROVIDERS_PACKAGE}.{backend}", backend]
    for module_name in candidates:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if _missing(exc, module_name):
                continue
            raise ConfigurationError(f"search provider module {module_name!r} failed to import: {exc}") from exc
        except Exception as exc:  # a module that exists but is broken
            raise ConfigurationError(
                f"search provider module {module_name!r} failed to import: {type(exc).__name__}: {exc}"
            ) from exc
        return _builder_from_module(module, backend)
    raise ConfigurationError(
        f"unknown search provider {backend!r} (known: {', '.join(known_providers())}; "
        f"no module {candidates[0]} or {candidates[1]})"
    )


def build_provider(name: str, env: Mapping[str, str], *, allow_dynamic: bool = True) -> SearchProvider:
    """One provider by backend name (see the module docstring for the order)."""
    name = _check_name(name)
    builder = _OVERRIDES.get(name) or _REGISTRY.get(name)
    if builder is None:
        if not allow_dynamic:
            raise ConfigurationError(
                f"unknown search provider {name!r} (known: {', '.join(known_providers())}; a custom "
                f"provider module must be listed in the worker's DR_SEARCH_PROVIDER or "
                f"DR_SEARCH_CUSTOM_PROVIDERS)"
            )
        builder = load_backend(name)
    try:
        provider = builder(env)
    except SearchError:
        raise
    except Exception as exc:
        raise ConfigurationError(f"{name}: building the provider failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(provider, SearchProvider):
        raise ConfigurationError(f"{name}: the builder returned {type(provider).__name__}, not a SearchProvider")
    return provider


def split_names(spec: str) -> list[str]:
    names: list[str] = []
    for part in spec.split(","):
        part = part.strip()
        if part and part not in names:
            names.append(part)
    return names


# --------------------------------------------------------------------------- several at once


class MultiProvider(SearchProvider):
    """Several providers asked at once; results merged and deduplicated by normalised URL."""

    def __init__(self, providers: list[SearchProvider]) -> None:
        if not providers:
            raise ConfigurationError("no search providers given")
        self.providers = list(providers)
        self.name = "+".join(p.name for p in self.providers)

    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        results = await asyncio.gather(
            *(p.search(query, max_results=max_results) for p in self.providers), return_exceptions=True
        )
        hits: list[SearchHit] = []
        errors: list[tuple[SearchProvider, BaseException]] = []
        for provider, result in zip(self.providers, results):
            if isinstance(result, BaseException):
                if not isinstance(result, Exception):  # cancellation and the like
                    raise result
                errors.append((provider, result))
            else:
                hits.extend(result)
        if errors and len(errors) == len(self.providers):
            if len(errors) == 1:
                raise errors[0][1]
            retryable = any(getattr(e, "retryable", True) for _, e in errors)
            waits = [w for _, e in errors if (w := getattr(e, "retry_after_s", None)) is not None]
            raise SearchError("; ".join(str(e) for _, e in errors), retryable=retryable,
                              retry_after_s=max(waits) if waits else None)
        for provider, error in errors:
            log.warning("search provider failed; using the others", provider=provider.name, error=str(error))
        return dedupe_and_rank(hits, max_results)

    async def suggestions(self, query: str, *, limit: int) -> list[str]:
        out: list[str] = []
        for provider in self.providers:
            if len(out) >= limit:
                break
            try:
                found = await provider.suggestions(query, limit=limit)
            except SearchError as exc:
                log.warning("search suggestions failed", provider=provider.name, error=str(exc))
                continue
            out.extend(s for s in found if s not in out)
        return out[:limit]


# --------------------------------------------------------------------------- the worker's factory


def make_search_factory(settings: Settings, env: Mapping[str, str] | None = None
                        ) -> Callable[[str | None], SearchProvider]:
    """Provider by name (None: the configured DR_SEARCH_PROVIDER), instances cached per name.

    `env` defaults to the worker's environment, read when a provider is first built.
    """
    cache: dict[str, SearchProvider] = {}

    def factory(name: str | None) -> SearchProvider:
        spec = (name or settings.search_provider or "").strip()
        if spec in cache:
            return cache[spec]
        names = split_names(spec)
        if not names:
            raise ConfigurationError("no search provider configured (DR_SEARCH_PROVIDER is empty)")
        current = dict(os.environ if env is None else env)
        current["DR_SEARCH_INDEX"] = str(settings.search_index)
        allowed = set(split_names(settings.search_provider or "")) | set(
            split_names(current.get("DR_SEARCH_CUSTOM_PROVIDERS", "")))
        providers = []
        for backend in names:
            if backend not in cache:
                cache[backend] = build_provider(backend, current, allow_dynamic=backend in allowed)
            providers.append(cache[backend])
        provider = providers[0] if len(providers) == 1 else MultiProvider(providers)
        cache[spec] = provider
        return provider

    return factory
