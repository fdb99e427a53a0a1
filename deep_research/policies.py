"""Every retry policy and timeout of the research workflow, in one place.

Temporal is the one retry layer: the sandbox, search and LLM clients never retry on their own.
The numbers come from seed 000 ("Retry and Error Handling", "Warmup Phase", "Playwright
Installation"); the comment on each says why.

Seed 000 retries with "1.5 s initial, doubling"; Temporal's initial_interval + backoff_coefficient=2
gives exactly that schedule (1.5 s, 3 s, 6 s, 12 s) between attempts.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy

# Error types (ApplicationError.type) that no retry can fix. Listed on every policy so a
# misconfigured sandbox or a bad input fails fast instead of burning attempts.
NON_RETRYABLE = [
    "SandboxNotFound",  # the sandbox is gone (terminated, expired, server restarted)
    "InvalidInput",  # the request itself is wrong
    "ConfigurationError",  # missing index, unknown provider, missing key
    "InstallImpossible",  # e.g. apt-get on a read-only host: retrying changes nothing
]

# Where sandbox retries live (decided once): HERE. The Sandy HTTP client
# (deep_research/sandbox/sandy.py) never retries: no loop, no transport retries, one request per
# call with the seed's 10-minute timeout. It only classifies failures: 5xx, 429, an "Upstream error"
# body, connection errors and timeouts -> SandboxUnavailable (retryable); 404 -> SandboxNotFound and
# other 4xx -> SandboxRejected (non-retryable, fail fast). These policies are the one retry layer,
# so the attempts and backoff visible in the workflow history are exactly the seed's numbers
# (a retry loop inside the client as well would multiply them: 4 x 4 = 16 calls).
# Sandbox API calls (status, exec, files): seed says 3 retries => 4 attempts, 1.5 s doubling.
SANDBOX_API_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1.5),
    backoff_coefficient=2.0,
    maximum_attempts=4,
    non_retryable_error_types=NON_RETRYABLE,
)

# Sandbox creation: seed gives creation one more retry (4 => 5 attempts) since allocation is the
# step most often hit by capacity 429s.
CREATE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1.5),
    backoff_coefficient=2.0,
    maximum_attempts=5,
    non_retryable_error_types=NON_RETRYABLE,
)

# Warmup: up to 5 attempts, waiting 2 s x attempt plus jitter between them (502 while the sandbox
# starts is expected). Linear backoff with jitter is not a Temporal RetryPolicy shape, so the
# workflow loops over single-attempt activities and sleeps on durable timers in between; the jitter
# comes from workflow.random(), which is deterministic on replay.
WARMUP_ATTEMPTS = 5
WARMUP_DELAY_PER_ATTEMPT = timedelta(seconds=2)
WARMUP_JITTER_MAX_S = 1.0
WARMUP_CHECK_TIMEOUT = timedelta(seconds=30)  # one health check + exec "true"
SINGLE_ATTEMPT = RetryPolicy(maximum_attempts=1)

# apt-get of browser system deps: 3 tries 20 s apart (seed), to ride out dpkg lock contention.
APT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=20),
    backoff_coefficient=1.0,
    maximum_attempts=3,
    non_retryable_error_types=NON_RETRYABLE,
)
APT_TIMEOUT = timedelta(minutes=10)  # the seed's 10-minute request timeout

# Search: a few quick attempts; a provider down for longer than that fails the research clearly.
SEARCH_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_attempts=3,
    non_retryable_error_types=NON_RETRYABLE,
)
SEARCH_TIMEOUT = timedelta(seconds=60)

CREATE_TIMEOUT = timedelta(minutes=2)
# Runtime check / pip install of the crawler runtime inside the sandbox (a fresh pip install can
# take minutes; the seed's request timeout is 10 minutes).
INSTALL_TIMEOUT = timedelta(minutes=10)
INSTALL_HEARTBEAT = timedelta(minutes=2)
# Browser launch test: a cold Chromium start is a few seconds; 90 s covers a loaded host.
VERIFY_TIMEOUT = timedelta(seconds=90)

# Crawl: one long activity that heartbeats every poll (1.2 s). A worker that dies is noticed after
# CRAWL_HEARTBEAT_TIMEOUT and the retry re-attaches to the crawler still running in the sandbox.
CRAWL_POLL_INTERVAL_S = 1.2
CRAWL_HEARTBEAT_TIMEOUT = timedelta(seconds=20)
CRAWL_TIMEOUT_MARGIN = timedelta(minutes=2)  # beyond the crawl's own duration cap
CRAWL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_attempts=4,
    non_retryable_error_types=NON_RETRYABLE,
)
# A crawler whose alive-file is older than this is dead (it writes it every 2 s).
CRAWLER_STALE_AFTER_S = 15.0
# Time kept back from the deadline for reading output, summarizing and writing the report.
FINALIZE_RESERVE = timedelta(seconds=60)
MIN_CRAWL_BUDGET = timedelta(seconds=20)

# Reading crawler output (files API, then chunked dd, then cat), summarizing and generating.
COLLECT_TIMEOUT = timedelta(minutes=2)
SUMMARIZE_TIMEOUT = timedelta(minutes=5)
GENERATE_TIMEOUT = timedelta(minutes=10)
STEP_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_attempts=3,
    non_retryable_error_types=NON_RETRYABLE,
)

# Terminate must happen: more attempts than any other call, and it is never cancelled.
TERMINATE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1.5),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=8,
    non_retryable_error_types=NON_RETRYABLE,
)
TERMINATE_TIMEOUT = timedelta(minutes=1)

# Extending the deadline: each extend adds 0 < minutes <= MAX_EXTEND_MINUTES, and the total never
# goes beyond MAX_TOTAL_MINUTES from the start, so a stuck research cannot live forever.
MAX_EXTEND_MINUTES = 60.0
MAX_TOTAL_MINUTES = 6 * 60.0

# Moving a sandbox's expiry after `extend`: one quick API call.
EXTEND_SANDBOX_TIMEOUT = timedelta(seconds=30)

# Server-side expiry of a sandbox, a backstop if everything else fails: the research's duration
# plus this margin.
SANDBOX_TTL_MARGIN = timedelta(minutes=15)
