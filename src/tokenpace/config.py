"""Run configuration: one plain dataclass that the CLI fills and the library consumes."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from tokenpace.errors import UsageError
from tokenpace.redact import strip_url_credentials, url_has_credentials

Arrival = Literal["constant", "poisson", "gamma"]
ARRIVALS: tuple[str, ...] = ("constant", "poisson", "gamma")
APIS: tuple[str, ...] = ("chat", "completions", "responses", "anthropic")  # client/formats/
API_HELP = ("chat (default), completions, responses (OpenAI Responses) or anthropic (Anthropic Messages; "
            "key from $ANTHROPIC_API_KEY)")
CACHE_BREAKPOINTS: tuple[str, ...] = ("none", "prefix", "system")


def default_api_key_env(api: str) -> str:
    """The variable holding the key when --api-key-env is not given: each provider's own."""
    return "ANTHROPIC_API_KEY" if api == "anthropic" else "OPENAI_API_KEY"
PROGRESS_MODES: tuple[str, ...] = ("auto", "live", "plain", "json", "off")  # tokenpace.runner.progress

DEFAULT_CONCURRENCY = 16
DEFAULT_REQUESTS = 200
DEFAULT_GRACE_S = 10.0
DEFAULT_SCRAPE_INTERVAL_S = 1.0  # --scrape-interval
MIN_SCRAPE_INTERVAL_S = 0.1  # each scrape costs the client's event loop about a millisecond
MAX_SECONDS = 30 * 24 * 3600.0  # any duration or timeout: longer is a typo, and overflows the clock
MAX_SEED = 2**64 - 1  # seeds feed numpy's generators: non-negative, 64 bits


@dataclass
class BenchConfig:
    # Target. url=None means: start the built-in simulated server on a free loopback port.
    url: str | None = None
    model: str | None = None  # None: the first model the server lists
    api: str = "chat"
    stream: bool = True
    api_key_env: str = "OPENAI_API_KEY"  # name of the variable; the key itself is never stored
    # --api anthropic: where Anthropic cache_control goes: "prefix" (the end of the shared prefix),
    # "system" (the end of the system prompt) or "none".
    cache_breakpoint: str = "none"

    # Load. Closed loop when rate is None; open loop otherwise (optionally capped by concurrency).
    concurrency: int | None = None
    rate: float | None = None  # requests per second
    arrival: str = "poisson"
    burstiness: float = 1.0  # gamma shape; 1.0 is Poisson, < 1 burstier, > 1 smoother
    requests: int | None = None  # measured requests (warmup excluded)
    duration_s: float | None = None  # measured seconds (warmup excluded)
    warmup_requests: int = 0
    warmup_s: float = 0.0
    ramp_s: float = 0.0  # the load rises linearly to its target over this long (tokenpace.workload.ramp)
    # In-flight requests may finish for this long after the run ends: after --duration or a signal,
    # default 10 s; after a count-bounded run has sent its last request, default --timeout (so the
    # count completes unless a request is truly stuck). See end_grace_s().
    grace_s: float | None = None
    timeout_s: float | None = 600.0  # total per-request timeout (None: none, simulated runs only)
    connect_timeout_s: float | None = None  # TCP (and TLS) connect
    ttft_timeout_s: float | None = None  # sent to first token
    idle_timeout_s: float | None = None  # longest silence (after the first token, or always without a TTFT limit)
    retries: int = 0  # retries of a request that failed before its first token (off by default)
    retry_backoff_s: float = 0.5  # first backoff when the server sends no Retry-After; doubles
    seed: int = 0

    # Workload.
    input_tokens: str = "512"  # a length spec: see tokenpace.workload.lengths
    output_tokens: str = "128"
    ignore_eos: bool = True
    extra_body: dict[str, Any] = field(default_factory=dict)
    # Workload shapes (tokenpace.workload.build.workload_from_config reads and checks these).
    tokenizer: str | None = None  # tokenizer.json, HF folder, .gguf file, or HF name in the local cache
    dataset: str | None = None  # ShareGPT JSON or JSONL of messages/prompts
    trace: str | None = None  # Mooncake-style trace JSONL: arrival times and lengths
    time_scale: float = 1.0  # trace offsets are multiplied by this (0.5: twice as fast)
    skip_bad_lines: bool = False  # dataset/trace: skip (and count) bad lines instead of stopping
    sort_trace: bool = False  # trace: replay in timestamp order (else a line out of order is refused)
    shared_prefix: str | None = None  # groups=8,prefix-tokens=2048,per-group=50,order=grouped
    conversations: str | None = None  # sessions=20,turns=6,think-time=exp:3s
    reasoning_effort: str | None = None  # low|medium|high, sent as reasoning_effort
    tools: int = 0  # synthetic function tools attached to every request

    # SLO and cost.
    slo: str | None = None  # a preset name or an expression, parsed by tokenpace.metrics.parse_slo
    gpu_hour_usd: float | None = None
    gpus: int = 1
    # Per-token prices of a hosted API (USD per million tokens) and its cache multipliers
    # (None: tokenpace.metrics.token_cost.CACHE_PRICE_MULTIPLIERS, Anthropic's).
    input_usd_per_mtok: float | None = None
    output_usd_per_mtok: float | None = None
    cache_price_multipliers: dict[str, float] | None = None

    # Built-in server options (used only when url is None).
    server_tokens_per_chunk: int = 1
    builtin_timing: str = "sim"  # "sim": the engine simulator; "parametric": the simple model

    # Engine metrics (tokenpace.observe): scrape the target's Prometheus /metrics during the run.
    scrape_metrics: bool = False
    metrics_url: str | None = None  # None: the target's base URL without /v1, plus /metrics
    scrape_interval_s: float = DEFAULT_SCRAPE_INTERVAL_S

    # Scale-out (tokenpace.runner.workers): the load in worker processes on this machine, or in
    # Ray actors across a cluster. workers=0: chosen from the load and the CPU count (auto_workers);
    # None: 1 process, or with ray one actor per node.
    workers: int | None = None
    ray: str | None = None  # a Ray cluster address, or "auto" (the one `ray start` runs here)
    max_clock_offset_ms: float = 50.0  # --ray: refuse a node whose clock is further off than this

    # Output.
    out: str | None = None  # result JSON path; records go beside it as *.records.jsonl
    progress: bool = True  # False: no progress output at all (as progress_mode "off")
    # The live view (tokenpace.runner.progress): auto (live on a terminal, plain lines otherwise),
    # live, plain, json or off.
    progress_mode: str = "auto"
    progress_step: str | None = None  # a sweep's step label, shown in its title

    def end_grace_s(self, *, by_count: bool) -> float | None:
        """The grace period: --grace when given, else --timeout at the end of a count-bounded run
        and 10 s after --duration or a signal."""
        if self.grace_s is not None:
            return self.grace_s
        return self.timeout_s if by_count else DEFAULT_GRACE_S  # None: wait for every request

    def effective_concurrency(self) -> int | None:
        """Closed loop: --concurrency, else the default, never above --requests (a default the
        count cannot hold would label the run with a load it never ran). Open loop: the cap."""
        if self.rate is None:
            if self.concurrency is not None:
                return self.concurrency
            return DEFAULT_CONCURRENCY if self.requests is None else min(DEFAULT_CONCURRENCY, self.requests)
        return self.concurrency

    def effective_requests(self) -> int | None:
        if self.requests is None and self.duration_s is None:
            return DEFAULT_REQUESTS
        return self.requests

    def validate(self) -> BenchConfig:
        """Raise UsageError on the first invalid value; return self so calls can chain."""
        if self.builtin_timing not in ("sim", "parametric"):
            raise UsageError(f"--builtin-timing must be sim or parametric, not {self.builtin_timing!r}")
        if self.api not in APIS:
            raise UsageError(f"--api must be one of {', '.join(APIS)}, not {self.api!r}")
        if self.cache_breakpoint not in CACHE_BREAKPOINTS:
            raise UsageError(f"--cache-breakpoint must be one of {', '.join(CACHE_BREAKPOINTS)}, "
                             f"not {self.cache_breakpoint!r}")
        if self.cache_breakpoint != "none" and self.api != "anthropic":
            raise UsageError("--cache-breakpoint places Anthropic cache_control: it needs --api anthropic "
                             "(the other APIs cache prefixes without being told)")
        if self.arrival not in ARRIVALS:
            raise UsageError(f"--arrival must be one of {', '.join(ARRIVALS)}, not {self.arrival!r}")
        _positive("--concurrency", self.concurrency, integer=True)
        _positive("--rate", self.rate)
        _positive("--burstiness", self.burstiness)
        _positive("--requests", self.requests, integer=True)
        _positive("--duration", self.duration_s)
        _positive("--timeout", self.timeout_s)
        _positive("--connect-timeout", self.connect_timeout_s)
        _positive("--ttft-timeout", self.ttft_timeout_s)
        _positive("--idle-timeout", self.idle_timeout_s)
        _positive("--gpus", self.gpus, integer=True)
        _positive("--tokens-per-chunk", self.server_tokens_per_chunk, integer=True)
        if self.gpu_hour_usd is not None and not (math.isfinite(self.gpu_hour_usd)
                                                   and self.gpu_hour_usd >= 0):
            raise UsageError(f"--gpu-hour-usd must be a finite number >= 0, not {self.gpu_hour_usd}")
        for name, value in (("--warmup", self.warmup_s), ("--warmup", self.warmup_requests),
                            ("--ramp", self.ramp_s),
                            ("--grace", 0.0 if self.grace_s is None else self.grace_s),
                            ("--retries", self.retries),
                            ("--retry-backoff", self.retry_backoff_s)):
            if not (math.isfinite(value) and value >= 0):
                raise UsageError(f"{name} must be a finite number >= 0, not {value}")
        for name, value in (("--duration", self.duration_s), ("--warmup", self.warmup_s),
                            ("--grace", self.grace_s), ("--timeout", self.timeout_s),
                            ("--connect-timeout", self.connect_timeout_s),
                            ("--ttft-timeout", self.ttft_timeout_s),
                            ("--idle-timeout", self.idle_timeout_s),
                            ("--retry-backoff", self.retry_backoff_s),
                            ("--scrape-interval", self.scrape_interval_s)):
            check_seconds(name, value)
        check_seed(self.seed)
        if (self.input_usd_per_mtok is None) != (self.output_usd_per_mtok is None):
            raise UsageError("give --input-usd-per-mtok and --output-usd-per-mtok together")
        try:
            self.token_prices()
        except ValueError as exc:
            raise UsageError(f"token prices: {exc}") from None
        if self.requests is not None and self.duration_s is not None:
            raise UsageError("give --requests or --duration, not both")
        if self.workers is not None and not (isinstance(self.workers, int) and self.workers >= 0):
            raise UsageError(f"--workers must be a whole number >= 1 or auto, not {self.workers}")
        if (self.workers or 1) > 1 and self.rate is None and self.workers > (self.effective_concurrency() or 1):
            raise UsageError(f"--workers {self.workers} is more than --concurrency "
                             f"{self.effective_concurrency()}: each worker needs at least one stream")
        if not (math.isfinite(self.max_clock_offset_ms) and self.max_clock_offset_ms > 0):
            raise UsageError(f"--max-clock-offset must be a number of milliseconds > 0, "
                             f"not {self.max_clock_offset_ms}")
        if self.ramp_s and (self.trace or self.conversations):
            raise UsageError("--ramp shapes a rate or a concurrency: a --trace or --conversations run has its own arrivals")
        _check_url("--url", self.url)
        if self.progress_mode not in PROGRESS_MODES:
            raise UsageError(f"--progress must be one of {', '.join(PROGRESS_MODES)}, not {self.progress_mode!r}")
        _check_url("--scrape-metrics URL", self.metrics_url)
        if not (math.isfinite(self.scrape_interval_s) and self.scrape_interval_s >= MIN_SCRAPE_INTERVAL_S):
            raise UsageError(f"--scrape-interval must be a number of seconds >= {MIN_SCRAPE_INTERVAL_S:g}, "
                             f"not {self.scrape_interval_s}")
        return self

    def token_prices(self) -> Any:
        """The per-token prices as ``TokenPrices``, or None when not given."""
        return token_prices_of(asdict(self))

    def to_dict(self) -> dict[str, Any]:
        """The exact configuration, as saved in the result file (no secrets: only the key's variable name)."""
        return asdict(self)


def token_prices_of(config: dict[str, Any]) -> Any:
    """``TokenPrices`` from a (saved) configuration's price fields; None when it has none."""
    if config.get("input_usd_per_mtok") is None or config.get("output_usd_per_mtok") is None:
        return None
    from tokenpace.metrics.token_cost import CACHE_PRICE_MULTIPLIERS, TokenPrices

    return TokenPrices(config["input_usd_per_mtok"], config["output_usd_per_mtok"],
                       dict(config.get("cache_price_multipliers") or CACHE_PRICE_MULTIPLIERS))


def _check_url(flag: str, url: str | None) -> None:
    if url is None:
        return
    shown = strip_url_credentials(url)  # never echo a password
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"{flag} must start with http:// or https://, not {shown!r}")
    if url_has_credentials(url):
        # Refused rather than sent as basic auth: a password in a URL would be printed and saved
        # with the URL (console, result file), and it collides with the API key's Authorization.
        raise UsageError(f"{flag} {shown}: a user name or password in the URL is not supported; remove it "
                         "(an API key goes in the variable named by --api-key-env)")


def _positive(flag: str, value: float | int | None, *, integer: bool = False) -> None:
    if value is None:
        return
    if not math.isfinite(value):
        raise UsageError(f"{flag} must be a finite number, not {value}")
    if integer and int(value) != value:
        raise UsageError(f"{flag} must be a whole number, not {value}")
    if not value > 0:
        raise UsageError(f"{flag} must be > 0, not {value}")


def check_seconds(flag: str, value: float | None) -> None:
    if value is not None and value > MAX_SECONDS:
        raise UsageError(f"{flag} must be at most {MAX_SECONDS:.0f} seconds (30 days), not {value:g}")


def check_seed(seed: int) -> None:
    if not (isinstance(seed, int) and 0 <= seed <= MAX_SEED):
        raise UsageError(f"--seed must be a whole number from 0 to 2**64-1, not {seed}")
