"""One activity per step of the research workflow; `all_activities` lists them for a worker."""

from __future__ import annotations

from typing import Callable

from activities.crawl import CrawlActivities
from activities.deps import Deps
from activities.report import ReportActivities
from activities.sandbox_lifecycle import SandboxLifecycleActivities
from activities.search import SearchActivities
from activities.setup import SetupActivities


def all_activities(deps: Deps) -> list[Callable]:
    search = SearchActivities(deps)
    life = SandboxLifecycleActivities(deps)
    setup = SetupActivities(deps)
    crawl = CrawlActivities(deps)
    report = ReportActivities(deps)
    return [
        search.search,
        life.create_sandbox, life.warmup_sandbox, life.extend_sandbox, life.terminate_sandbox,
        setup.install_runtime, setup.verify_browser, setup.install_system_deps, setup.install_browser,
        crawl.crawl_pages, crawl.collect_output,
        report.summarize, report.generate_report,
    ]
