"""Web search providers, one module per backend (`searxng`, `serper`, `tavily`, `brave`).

Each module exposes `PROVIDER_CLASS` and `build(env) -> SearchProvider`, which is what the
dynamic loader of `deep_research.search.factory` looks for; see that module for how a backend
name becomes a provider, and the README ("Search providers") for each one's settings.
"""
