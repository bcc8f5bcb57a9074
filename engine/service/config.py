"""ServiceConfig: the engine service's YAML (model, codec, KV budget, batching, endpoints, limits).

Loaded with ``yaml.safe_load`` (a key given twice refused: engine/yaml_files.py); every section is a dataclass
validated when
built; unknown keys are rejected by name with their section. Every socket binds
to 127.0.0.1 unless an endpoint says otherwise.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from connectors.column_map import MAP_KEYS, inline_spelling
from connectors.feed import check_endpoint
from connectors.map_options import map_from_options
from connectors.map_vocabulary import ZERO_BID_READINGS
from connectors.stream_selection import StreamSelection
from engine.settings import WEIGHT_FORMATS, CacheSpec, SchedulerConfig
from engine.stream_patterns import did_you_mean
from engine.rust_paths import written_path
from engine.text_files import read_text
from engine.yaml_files import safe_load_unique, yaml_error_line, yaml_kind
from queries.limits import excerpt  # values as YAML writes them: got true, got null (not True, None)

DTYPES = ("float32", "bfloat16", "float16")
KERNEL_CACHE = 1024  # oneDNN's own default  # torch dtypes by name (getattr(torch, name)): no torch import here


class ConfigError(ValueError):
    """A service config that cannot be used, naming the key and the reason."""


@dataclass(frozen=True)
class ModelSection:
    path: str | None = None  # Hugging Face checkpoint directory; None: the built-in tick model
    dtype: str = "float32"
    device: str = "cpu"
    id: str | None = None  # model id stamped on answers
    # torch CPU threads for the forward. 1 by measurement (docs/benchmarks.md, benchmarks/threads.py): on a
    # shared machine a second thread spin-waits behind other processes and a small model gains little from it
    threads: int | None = 1
    # The linears' weights on CPU (engine/models/linear.py): float32 (oneDNN or MKL by CPU vendor; float32-mkl,
    # float32-onednn pin one), bfloat16 (bf16 GEMMs with fp32 accumulation; activations and KV stay in dtype),
    # torch (nn.Linear as loaded); null follows dtype
    weights: str | None = None
    # On CUDA: replay probes and small steps as captured graphs (engine/cuda_graphs.py); off: every forward eager
    cuda_graphs: bool = True
    # oneDNN GEMM kernels kept compiled (engine/models/linear.py), ~0.5 MB each. 1,024 holds every one the built-in
    # model can reach (~550); lower caps measured no lower RSS, only recompiles (docs/configuration.md#memory)
    kernel_cache: int = KERNEL_CACHE

    def __post_init__(self) -> None:
        if self.threads is not None and (type(self.threads) is not int or self.threads < 1):
            raise ConfigError(f"model.threads must be an integer >= 1 (or null: torch's default), "
                              f"got {excerpt(self.threads)}")
        if type(self.kernel_cache) is not int or self.kernel_cache < 1:
            raise ConfigError(f"model.kernel_cache must be an integer >= 1, got {excerpt(self.kernel_cache)}")
        if self.dtype not in DTYPES:
            raise ConfigError(f"model.dtype must be one of {DTYPES}, got {excerpt(self.dtype)}")
        if self.weights is not None and self.weights not in WEIGHT_FORMATS:
            raise ConfigError(f"model.weights must be one of {WEIGHT_FORMATS} (or null: follow model.dtype), "
                              f"got {excerpt(self.weights)}")
        if not (self.device == "cpu" or self.device.startswith("cuda")):
            raise ConfigError(f"model.device must be 'cpu' or 'cuda[:N]', got {excerpt(self.device)}")

    @property
    def model_id(self) -> str:
        # the directory's own name, also for `--model .` or `../my-model`
        return self.id or (Path(os.path.abspath(self.path)).name if self.path else "flashtick-tick")


@dataclass(frozen=True)
class CodecSection:
    kind: str = "auto"  # auto: binned for the built-in model, text for a Hugging Face model
    trade_template: str | None = None
    quote_template: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("auto", "binned", "text"):
            raise ConfigError(f"codec.kind must be auto, binned or text, got {excerpt(self.kind)}")


ADAPT_MODES = ("online", "off")


@dataclass(frozen=True)
class AnswersSection:
    # online: a named tick question's answers (direction, volatility, move) are mixed, per stream and query, with
    # that stream's own realised class frequencies (queries/adapt.py), which is what is published, with the
    # model's own distribution beside it (`model_probs`); off: the model's answer is published as it is
    adapt: str | bool = "online"  # a bool only as YAML 1.1 reads a bare off / on: made "off" / "online" below
    # an answer whose label horizon crosses a pause in its stream's event times this long or longer (a weekend, a
    # night, a halt) gets no realised label: live scores, the adaptation and backtest scores leave it out
    # (backtest --session-gap); None: a horizon counts ticks whatever time passes between them
    session_gap_s: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.adapt, bool):  # YAML 1.1 reads a bare `off` (and `on`) as a boolean
            object.__setattr__(self, "adapt", "online" if self.adapt else "off")
        if self.adapt not in ADAPT_MODES:
            raise ConfigError(f"answers.adapt must be one of {ADAPT_MODES}, got {excerpt(self.adapt)}")
        gap = self.session_gap_s
        if gap is not None and (isinstance(gap, bool) or not isinstance(gap, (int, float)) or not 0 < gap < math.inf):
            raise ConfigError(f"answers.session_gap_s must be a number of seconds > 0 (or null: off), got "
                              f"{excerpt(gap)}")

    @property
    def session_gap_ns(self) -> int | None:
        return None if self.session_gap_s is None else int(round(self.session_gap_s * 1e9))


# The default KV pool: 65536 cells is 256 MiB of the built-in model's 4 KiB cells (fp32); a checkpoint with wider
# cells gets as many as 256 MiB holds (64 KiB cells, Llama-3-8B's per-layer width x 8 layers: 4096), not GiBs
DEFAULT_KV_CELLS = 65536
DEFAULT_KV_MAX_BYTES = 256 * 2**20


@dataclass(frozen=True)
class KVSection:
    cells: int | None = None  # neither cells nor bytes: DEFAULT_KV_CELLS, at most DEFAULT_KV_MAX_BYTES
    bytes: int | None = None
    block_size: int = 32

    def __post_init__(self) -> None:  # CacheSpec's checks need no model: refused here, with the config's name
        self.spec()

    @property
    def is_default(self) -> bool:
        return self.cells is None and self.bytes is None

    def spec(self) -> CacheSpec:
        cells = DEFAULT_KV_CELLS if self.is_default else None if self.bytes is not None else self.cells
        try:
            return CacheSpec(block_size=self.block_size, cells=cells, bytes=self.bytes,
                             max_bytes=DEFAULT_KV_MAX_BYTES if self.is_default else None)
        except ValueError as e:
            raise ConfigError(_keyed("kv", KVSection, str(e))) from None


def _keyed(section: str, section_type: type, message: str) -> str:
    """A section's refusal, its key named as the file writes it: `scheduler.keep_fraction must be ...`
    (a message that names no key of the section keeps the section in front: `kv: give cells or bytes`)."""
    message = message.removeprefix(f"{section}: ")
    if message.startswith(f"{section}."):
        return message
    key = message.split(" ", 1)[0]
    if key in {f.name for f in dataclasses.fields(section_type)}:
        return f"{section}.{message}"
    return f"{section}: {message}"


@dataclass(frozen=True)
class EndpointsSection:
    ingest: str = "tcp://127.0.0.1:5555"
    answers: str = "tcp://127.0.0.1:5556"
    control: str = "tcp://127.0.0.1:5557"
    feeds: tuple[str, ...] = ()  # external PUB feeds to subscribe to (SUB connects)
    metrics_port: int | None = None  # Prometheus text format on 127.0.0.1:PORT/metrics
    metrics_host: str = "127.0.0.1"

    def __post_init__(self) -> None:
        for name in ("ingest", "answers", "control"):
            value = getattr(self, name)
            if not isinstance(value, str) or "://" not in value:
                raise ConfigError(f"endpoints.{name} must be a ZeroMQ endpoint like tcp://127.0.0.1:5555, "
                                  f"got {excerpt(value)}")
            port = value.rsplit(":", 1)[-1] if value.startswith("tcp://") and value.count(":") >= 2 else None
            # ZeroMQ binds tcp://host:99999 to port 34463 (the number modulo 65536) without a word; 0 or *: any free
            if port is not None and port != "*" and not (port.isdigit() and int(port) <= 65535):
                raise ConfigError(f"endpoints.{name} {value!r}: a tcp port is 1 to 65535 (0 or *: any free one)")
        if self.metrics_port is not None and not 0 <= self.metrics_port < 65536:
            raise ConfigError(f"endpoints.metrics_port must be a TCP port, got {self.metrics_port}")
        self._check_distinct_ports()
        for feed in self.feeds if isinstance(self.feeds, tuple) else ():
            try:
                check_endpoint(feed, "an endpoints.feeds entry")
            except ValueError as e:
                raise ConfigError(str(e)) from None
        if isinstance(self.feeds, tuple) and len(set(self.feeds)) < len(self.feeds):  # each tick would come twice
            twice = sorted({feed for feed in self.feeds if self.feeds.count(feed) > 1})
            raise ConfigError(f"endpoints.feeds lists {', '.join(twice)} more than once: every tick published there "
                              f"would be taken once per entry; list each feed once")

    def _check_distinct_ports(self) -> None:
        """Two of the engine's own sockets on one port: said here by key, not as a bind error that reads
        "is another flashtick serve running?" when the clash is inside this file. Hosts that name one address
        (localhost and 127.0.0.1) or that overlap (a wildcard, * or 0.0.0.0, takes the port on every address)
        clash; a host name is not looked up (the bind says those)."""
        taken: list[tuple[str, str, int]] = []  # (key, host as written, port)
        bound = [(name, *getattr(self, name)[len("tcp://"):].rsplit(":", 1))
                 for name in ("ingest", "answers", "control") if getattr(self, name).startswith("tcp://")]
        if isinstance(self.metrics_port, int) and not isinstance(self.metrics_port, bool):
            bound.append(("metrics_port", self.metrics_host, str(self.metrics_port)))
        for name, host, port in bound:
            if not port.isdigit() or int(port) == 0:  # any free port: never a clash
                continue
            for other, other_host, other_port in taken:
                if other_port == int(port) and _hosts_overlap(host, other_host):
                    where = f"on {host}" if host == other_host else (
                        f"on {other_host} and {host}, " + ("the same address" if _bind_address(host) ==
                                                           _bind_address(other_host) else "which overlap"))
                    raise ConfigError(f"endpoints.{name} and endpoints.{other} both use port {port} {where}: "
                                      f"give each socket its own port (or 0 for any free one)")
            taken.append((name, host, int(port)))


# names ZeroMQ (and the metrics server) bind as the loopback address; what binds every address at once
LOOPBACK_NAMES = {"localhost": "127.0.0.1", "lo": "127.0.0.1"}  # (lo: ZeroMQ takes an interface name)
WILDCARD_HOSTS = {"*", "0.0.0.0", "::", ""}  # ("": the metrics server's every address)


def _bind_address(host: str) -> str:
    host = host.strip().lower().removeprefix("[").removesuffix("]")  # (tcp://[::1]:5555's host, metrics_host's ::1)
    return LOOPBACK_NAMES.get(host, host)


def _hosts_overlap(host: str, other: str) -> bool:
    a, b = _bind_address(host), _bind_address(other)
    return a == b or a in WILDCARD_HOSTS or b in WILDCARD_HOSTS


WHEN_BEHIND = ("lag", "shed", "conflate")
INGEST_WIRE_FACTOR = 8  # the ingest socket reads messages up to this many times limits.max_message_bytes
SUBSCRIBE_COMMAND_BYTES = 10  # ZMTP 3.1 frames a subscription as a command: its name's length byte and "SUBSCRIBE"


@dataclass(frozen=True)
class LimitsSection:
    max_message_bytes: int = 1 << 20  # an ingest message larger than this is rejected (counted)
    ingest_hwm: int = 100_000  # messages queued per feed connection before ZeroMQ pushes back (or a SUB drops)
    # bytes one PUSH connection may queue at the ingest socket: its high-water mark is this over the largest message
    # the socket takes (ingest_wire_bytes), so a flood of large messages is pushed back, not held in memory
    ingest_queue_bytes: int = 256 << 20
    answers_hwm: int = 100_000  # per subscriber; past it ZeroMQ drops for that slow subscriber only
    heartbeat_s: float = 1.0
    max_ingest_per_step: int = 10_000  # messages drained between two forwards
    # service
    max_control_bytes: int = 4 << 20  # ZeroMQ drops the connection of a peer sending a larger control request
    # bytes of replies the service holds for one control connection that is not reading them (beyond ZeroMQ's
    # queue of CONTROL_SNDHWM replies); past it a reply to it is dropped (counted as control_replies_dropped)
    control_queue_bytes: int = 16 << 20
    max_backlog_tokens: int = 1_000_000  # accepted tokens waiting for a forward before the engine is "behind"
    max_lag_s: float = 5.0  # ... or the oldest accepted tick (or an unread ingest message) waiting longer than this
    # lag: keep everything, say so (heartbeat, metric, warning); shed: refuse new ticks; conflate: keep every trade
    # and of each stream's quotes only the newest that arrived between two forwards
    when_behind: str = "lag"
    drain_s: float = 10.0  # on SIGTERM/SIGINT/SIGHUP, seconds from the signal to read the queue and compute, then exit
    max_waiting_asks: int = 1024  # asks waiting for a forward, all clients together; more are refused at once
    # queries
    max_yaml_bytes: int = 256 << 10  # a query document (file or register request)
    max_yaml_nodes: int = 100_000  # nodes of a query document, every alias expanded
    max_queries: int = 1000  # standing queries registered at once
    max_topic_bytes: int = 256  # a query's topic, without the stream name
    # streams
    max_stream_bytes: int = 128  # longest stream name in UTF-8 bytes (the name rule: connectors/ticks.py check_stream)
    # a tick stamped further ahead of the service's wall clock than this is refused (ts_in_future): one tick from
    # year 2191 would otherwise refuse every real tick of its stream after it as ts_backwards. A day: above any
    # clock skew or a venue's local time read as UTC (at most 14 h), below any corrupt or mis-scaled time. None: off
    max_ts_ahead_s: float | None = 86_400.0
    # a quote's 0 bid beside an ask above it: no_bid (TAQ's "no bid": a one-sided quote, refused as missing_field)
    # or price (an option nobody bids: taken, its mark ask / 2)
    zero_bid: str = "no_bid"

    @property
    def ingest_wire_bytes(self) -> int:
        """The largest message the ingest socket reads (ZeroMQ cuts a peer sending more off unread): well above
        max_message_bytes, so a message over it is still read and refused as `oversize`, with a reason."""
        return INGEST_WIRE_FACTOR * self.max_message_bytes

    @property
    def ingest_rcvhwm(self) -> int:
        """The ingest PULL socket's high-water mark per connection: ingest_hwm messages, and no more than
        ingest_queue_bytes of messages of the largest size it reads (at least one)."""
        return max(1, min(self.ingest_hwm, self.ingest_queue_bytes // self.ingest_wire_bytes))

    @property
    def longest_subscription_bytes(self) -> int:
        """The answers socket's largest inbound message: a subscription to the longest topic a query can publish on
        (max_topic_bytes plus a stream name of max_stream_bytes, and a byte to spare), framed as ZeroMQ's SUBSCRIBE
        command. A longer subscription can match nothing, and each byte of one costs the service ~46 bytes in
        libzmq's subscription trie, so ZeroMQ drops the connection that sends one."""
        return self.max_topic_bytes + self.max_stream_bytes + 1 + SUBSCRIBE_COMMAND_BYTES

    @property
    def max_ts_ahead_ns(self) -> int | None:
        return None if self.max_ts_ahead_s is None else round(self.max_ts_ahead_s * 1e9)

    def __post_init__(self) -> None:
        if self.when_behind not in WHEN_BEHIND:
            raise ConfigError(f"limits.when_behind must be one of {', '.join(map(repr, WHEN_BEHIND))}, "
                              f"got {excerpt(self.when_behind)}")
        if self.zero_bid not in ZERO_BID_READINGS:
            raise ConfigError(f"limits.zero_bid must be one of {', '.join(map(repr, ZERO_BID_READINGS))}, "
                              f"got {excerpt(self.zero_bid)}")
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            if not 0 < value < math.inf:  # NaN and inf too: each becomes a count or a timer (an int) somewhere
                raise ConfigError(f"limits.{f.name} must be a finite number > 0, got {value}")
            if isinstance(value, int) and value >= MAX_LIMIT:  # ZeroMQ's options and timers take a C long
                raise ConfigError(f"limits.{f.name} must be below {MAX_LIMIT:.0e}, got {value}")


# the log section's numeric keys: each one's unit, with an example in that unit beside the suffixed text a user may
# write for it (a duration's "7d" is refused with a duration's example, not a size's)
LOG_NUMBER_UNITS = {
    "group_ms": "milliseconds (e.g. 5, not '5ms')",
    "segment_bytes": "bytes (e.g. 67108864, not '64MB')",
    "retention_bytes": "bytes (e.g. 1073741824, not '1GB')",
    "retention_s": "seconds (e.g. 604800, not '7d')",
    "answers_keep": "answers (e.g. 100000, not '100k')",
    "answers_segment_bytes": "bytes (e.g. 16777216, not '16MB')",
    "answers_retention_bytes": "bytes (e.g. 268435456, not '256MB')",
}


@dataclass(frozen=True)
class LogSection:
    """The on-disk tick and answer logs (engine/service/durability.py). `serve` keeps them unless --no-log or
    ``enabled: false``, in ``dir`` (default: the user's state directory); in-process runs never do."""

    enabled: bool = True
    dir: str | None = None  # data directory: ticks/, answers/, queries.yaml
    fsync: str = "group"  # always | group (at most every group_ms) | never
    group_ms: float = 5.0
    segment_bytes: int = 64 << 20
    retention_bytes: int | None = 2 << 30  # drop the oldest segments past this total (~20M ticks); None: keep all
    retention_s: float | None = None  # drop segments older than this; None: keep all
    skip_corrupt: bool = False  # on start, skip damaged records (counted) instead of refusing to start
    answers_keep: int = 100_000  # published answers kept in memory for the `answers` op (gap fills)
    answers_segment_bytes: int = 16 << 20
    answers_retention_bytes: int | None = 256 << 20  # the answer log on disk (seqs survive it: checkpointed)

    def __post_init__(self) -> None:
        if self.fsync not in ("always", "group", "never"):
            raise ConfigError(f"log.fsync must be always, group or never, got {excerpt(self.fsync)}")
        for name, unit in LOG_NUMBER_UNITS.items():
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ConfigError(f"log.{name} must be a number of {unit}, got {excerpt(value)}")
            if value is not None and not 0 < value < math.inf:  # NaN too: group_ms NaN spun the fsync threads
                raise ConfigError(f"log.{name} must be a finite number > 0, got {excerpt(value)}")
        for name in ("enabled", "skip_corrupt"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"log.{name} must be true or false, got {excerpt(getattr(self, name))}")


@dataclass(frozen=True)
class CurveSection:
    """CURVE encryption and authentication (key files: zmq.auth certificates or bare z85 keys).

    `enabled` encrypts control and answers and authenticates the server;
    `clients_dir` also authenticates clients: only those whose public key is a
    ``*.key`` certificate in that directory get through (ZAP); `ingest` puts the
    ingest socket under the same rules (feeds then need the server's public key).
    """

    enabled: bool = False
    server_secret_key_file: str | None = None
    server_public_key_file: str | None = None  # optional: derived from the secret key
    clients_dir: str | None = None  # allowed client certificates (*.key); None: any client with the server key
    ingest: bool = False  # CURVE on the ingest socket too

    def __post_init__(self) -> None:
        for name in ("enabled", "ingest"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"curve.{name} must be true or false, got {excerpt(getattr(self, name))}")
        for name in ("server_secret_key_file", "server_public_key_file", "clients_dir"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ConfigError(f"curve.{name} must be a path, got {excerpt(value)}")
        if self.enabled and not self.server_secret_key_file:
            raise ConfigError("curve.enabled needs server_secret_key_file (a *.key_secret certificate or a z85 key)")
        if not self.enabled and (self.clients_dir is not None or self.ingest):
            key = "clients_dir" if self.clients_dir is not None else "ingest"
            raise ConfigError(f"curve.{key} needs curve.enabled: true (and the server's key files)")


@dataclass(frozen=True)
class ShardsSection:
    """Scale-out (engine/service/sharded.py, docs/scale-out.md): ``count`` engine shards as Ray actors behind
    this process's sockets; 0 runs the one engine in this process. Engine budgets (kv, scheduler) are per shard."""

    count: int = 0
    ray_address: str | None = None  # None: a local Ray instance; "auto" or HOST:PORT: join a running cluster
    cpus: float = 1.0  # CPUs Ray reserves for each shard (each also gets one GPU when model.device is cuda)
    max_restarts: int = -1  # times Ray restarts a shard that died (-1: always); each restart rebuilds from the log
    step_ms: float = 20.0  # a shard call steps its engine until idle or this long, then returns its answers
    start_timeout_s: float = 300.0  # how long the shards may take to start (model load) before serve gives up

    def __post_init__(self) -> None:
        if type(self.count) is not int or self.count < 0:
            raise ConfigError(f"shards.count must be an integer >= 0, got {excerpt(self.count)}")
        if self.ray_address is not None and (not isinstance(self.ray_address, str) or not self.ray_address):
            raise ConfigError(f"shards.ray_address must be 'auto' or HOST:PORT, got {excerpt(self.ray_address)}")
        if type(self.max_restarts) is not int or self.max_restarts < -1:
            raise ConfigError(f"shards.max_restarts must be an integer >= -1, got {excerpt(self.max_restarts)}")
        for name in ("cpus", "step_ms", "start_timeout_s"):
            value, least = getattr(self, name), 0 if name == "cpus" else None
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (
                    value == 0 and least is None):
                raise ConfigError(f"shards.{name} must be a number {'>= 0' if least == 0 else '> 0'}, "
                                  f"got {excerpt(value)}")


@dataclass(frozen=True)
class ReplaySection:
    """How `flashtick backtest --config` reads tick files (docs/replay.md); each command-line option of the
    same name replaces its value here. `columns` is a column map (the YAML form of docs/replay.md) and
    `preset` the base it overrides; names/ts_unit/tz/date/ts_format refine either. Nothing set: detect per file."""

    preset: str | None = None
    columns: dict | None = None
    names: tuple[str, ...] | None = None  # the columns of a header-less CSV, in order
    ts_unit: str | None = None
    tz: str | None = None  # IANA zone of naive times, e.g. Europe/London
    date: str | None = None  # the day of seconds_after_midnight times, e.g. 2024-03-01
    ts_format: str | None = None  # strftime codes of datetime text that is not ISO 8601
    batch_ms: float = 100.0  # event-time width of a batch
    checkpoint_s: float = 10.0  # wall seconds between answer checkpoints (resumable with --resume)
    streams: tuple[str, ...] | None = None  # the streams of the files to read (names or globs); None: every one

    def __post_init__(self) -> None:
        for name in ("batch_ms", "checkpoint_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"replay.{name} must be a number > 0, got {excerpt(value)}")
        if self.columns is not None and not isinstance(self.columns, dict):
            raise ConfigError(f"replay.columns must be a mapping of field -> column, got {excerpt(self.columns)}")
        if isinstance(self.date, datetime.date):  # YAML reads an unquoted 2024-03-01 as a date
            object.__setattr__(self, "date", self.date.isoformat())
        try:
            self.column_map()
            if self.streams is not None:  # a bad glob is refused when the config is loaded, as a query's is
                StreamSelection(self.streams)
        except ValueError as e:
            raise ConfigError(f"replay: {e}") from None

    def column_map(self) -> dict[str, Any] | None:
        """The map these keys describe (ColumnMap.from_dict form), or None: detect each file's layout. As on the
        command line, `tz`, `date`, ... alone refine each file's detected layout."""
        return map_from_options(self.preset, self.columns, detect=True, names=self.names, ts_unit=self.ts_unit,
                                tz=self.tz, date=self.date, ts_format=self.ts_format)


@dataclass(frozen=True)
class ServiceConfig:
    model: ModelSection = field(default_factory=ModelSection)
    codec: CodecSection = field(default_factory=CodecSection)
    kv: KVSection = field(default_factory=KVSection)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    endpoints: EndpointsSection = field(default_factory=EndpointsSection)
    limits: LimitsSection = field(default_factory=LimitsSection)
    curve: CurveSection = field(default_factory=CurveSection)
    log: LogSection = field(default_factory=LogSection)
    shards: ShardsSection = field(default_factory=ShardsSection)
    replay: ReplaySection = field(default_factory=ReplaySection)
    answers: AnswersSection = field(default_factory=AnswersSection)
    queries: str | None = None  # a queries YAML file registered at start

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None, source: str = "<config>") -> "ServiceConfig":
        raw = raw or {}
        if not isinstance(raw, dict):
            raise ConfigError(f"{source}: the config must be a mapping, got {yaml_kind(raw)}")
        sections = {f.name: f for f in dataclasses.fields(cls)}
        _reject_unknown(raw, sections, source, "top level")
        built: dict[str, Any] = {}
        for name, value in raw.items():
            section_type = _SECTION_TYPES.get(name)
            if section_type is None:  # `queries`, the one top-level key that is no section: a file's path
                if value is not None and not isinstance(value, str):
                    raise ConfigError(f"{source}: queries must be the path of a queries file, got {yaml_kind(value)} "
                                      f"(the queries themselves go in that file, under its own `queries:`)")
                built[name] = value
                continue
            if not isinstance(value, dict):
                raise ConfigError(f"{source}: section {name!r} must be a mapping, got {yaml_kind(value)}")
            _reject_unknown(value, {f.name for f in dataclasses.fields(section_type)}, source, f"section {name!r}")
            if name == "replay" and isinstance(value.get("columns"), dict):  # named here, where the file is known
                _check_replay_columns(value["columns"], source)
            value = {k: tuple(v) if isinstance(v, list) else v for k, v in value.items()}
            if name == "kv" and value.get("cells") is not None and value.get("bytes") is not None:
                raise ConfigError(f"{source}: kv: give cells or bytes, not both (got cells: {value['cells']!r}, "
                                  f"bytes: {value['bytes']!r})")
            try:  # the section's own checks speak first; a wrong type they let through is named after them
                built[name] = section_type(**value)
            except ValueError as e:
                raise ConfigError(f"{source}: {_keyed(name, section_type, str(e))}") from None
            except TypeError as e:  # a comparison or sum on a wrong type, most likely
                _check_types(value, section_type, f"{source}: {name}")
                raise ConfigError(f"{source}: {name}: {e}") from None
            _check_types(value, section_type, f"{source}: {name}")
        return cls(**built)

    @classmethod
    def load(cls, path: str | Path) -> "ServiceConfig":
        try:
            text = read_text(path)
            raw = _replay_columns_as_text(safe_load_unique(text), text)
        except yaml.YAMLError as e:  # one line: the problem and where
            raise ConfigError(f"{path}: not valid YAML: {yaml_error_line(e)}") from None
        except OSError as e:
            raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
        config = cls.from_dict(raw, str(path))
        here = Path(path).parent

        def beside(value: str | None) -> str | None:  # every path in a config file is relative to the file
            if value is None:
                return None
            value = written_path(value)  # as Python names the file, whatever the locale
            return value if Path(value).expanduser().is_absolute() else str(here / value)

        return dataclasses.replace(
            config, queries=beside(config.queries),
            model=dataclasses.replace(config.model, path=beside(config.model.path)),
            log=dataclasses.replace(config.log, dir=beside(config.log.dir)),
            curve=dataclasses.replace(config.curve, server_secret_key_file=beside(config.curve.server_secret_key_file),
                                      server_public_key_file=beside(config.curve.server_public_key_file),
                                      clients_dir=beside(config.curve.clients_dir)))


_SECTION_TYPES: dict[str, type] = {
    "model": ModelSection, "codec": CodecSection, "kv": KVSection, "scheduler": SchedulerConfig,
    "endpoints": EndpointsSection, "limits": LimitsSection, "curve": CurveSection, "log": LogSection,
    "shards": ShardsSection,
    "replay": ReplaySection, "answers": AnswersSection,
}


_TYPE_WORDS = {"int": "an integer", "float": "a number", "str": "a string", "bool": "true or false",
               "dict": "a mapping", "None": "null", "tuple[int, ...]": "a list of integers",
               "tuple[str, ...]": "a list of strings"}


def _fits(value: Any, kind: str) -> bool:
    if kind in ("int", "float") and isinstance(value, bool):
        return False
    if kind.startswith("tuple["):
        item = kind[len("tuple["):].split(",")[0]
        return isinstance(value, tuple) and all(_fits(v, item) for v in value)
    types = {"int": int, "float": (int, float), "str": str, "bool": bool, "dict": dict, "None": type(None)}
    return kind not in types or isinstance(value, types[kind])


def _check_types(values: dict, section_type: type, where: str) -> None:
    """Each key's value against its field's annotation (`int | None`, `tuple[str, ...]`, ...), so `heartbeat_s:
    fast` or `cells: "4096"` is refused by name here, not met as a TypeError deep in the service."""
    annotations = {f.name: str(f.type) for f in dataclasses.fields(section_type)}
    for key, value in values.items():
        kinds = [k.strip() for k in annotations[key].split("|")]
        if any(k.startswith("Literal[") for k in kinds) or any(_fits(value, k) for k in kinds):
            continue
        if isinstance(value, datetime.date) and "str" in kinds:  # YAML reads 2024-03-01 as a date; the section
            continue                                             # turns it back into text
        wanted = " or ".join(_TYPE_WORDS.get(k, k) for k in kinds)
        hint = ""
        if isinstance(value, str) and EXPONENT_AS_TEXT.match(value.strip()) and float(value).is_integer() \
                and abs(float(value)) < MAX_LIMIT:
            # PyYAML (YAML 1.1) reads a float only with a dot and a signed exponent: 1e9 and 1.5e9 are text
            hint = f" (YAML reads {value} as text: write {int(float(value))}, or drop the quotes if it is quoted)"
        elif isinstance(value, str) and EXPONENT_AS_TEXT.match(value.strip()):
            hint = f" (YAML reads {value} as text: write {float(value)!r}, or drop the quotes if it is quoted)"
        elif isinstance(value, str) and _fits(_number(value), kinds[0]):
            hint = " (quoted in the YAML: drop the quotes)"
        raise ConfigError(f"{where}.{key} must be {wanted}, got {excerpt(value)}{hint}")


MAX_LIMIT = 10**15  # far past any real limit, well inside a C long (a YAML 99999999999999999999999 is not)
EXPONENT_AS_TEXT = re.compile(r"^[-+]?\d+(\.\d*)?[eE][-+]?\d+$")  # a number YAML 1.1 may read as text


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return None


def _replay_columns_as_text(raw: Any, text: str) -> Any:
    """``raw`` with replay.columns read as a column map file is (engine/yaml_files.py: every value there is the text
    written, so `keep: {regular: [yes]}` keeps the rows of `yes` and `keep: {corr: [01]}` those of `01`, not 1); the
    rest of the config keeps YAML's numbers and booleans, so `log: {enabled: no}` is still false."""
    replay = raw.get("replay") if isinstance(raw, dict) else None
    if isinstance(replay, dict) and isinstance(replay.get("columns"), dict):
        replay["columns"] = safe_load_unique(text, text_words=True)["replay"]["columns"]
    return raw


def _check_replay_columns(columns: dict, source: str) -> None:
    """replay.columns' keys, and a list of streams under `stream` (`replay: {columns: {stream: ["X*"]}}`, following
    the hint for `replay: {stream: [...]}`): what it meant is replay.streams."""
    _reject_unknown(columns, MAP_KEYS, source, "replay.columns")
    if isinstance(columns.get("stream"), list):
        raise ConfigError(f"{source}: replay.columns.stream is one fixed stream name (a column of names is "
                          f"stream_col), got a list {excerpt(columns['stream'])}: the streams to read, as --streams, "
                          f"are replay.streams (replay: {{streams: [...]}})")


def _reject_unknown(raw: dict, allowed: Any, source: str, where: str) -> None:
    unknown = [k for k in raw if k not in allowed]
    if not unknown:
        return
    key = unknown[0]
    # the nearest key of this level first: `replay: {stream: [...]}` is a typo of `streams`, not a column map's key
    hint = did_you_mean([str(key)], [str(k) for k in allowed])
    if where == "section 'replay'" and key in MAP_KEYS:  # replay.hours or replay.price_format: a column map's key
        example = f"replay: {{columns: {{{key}: ...}}}}"
        hint += f" (as a column map's key, {key!r} goes under replay.columns: {example})" if hint else \
            f"; {key!r} is a column map's key: give it under replay.columns ({example})"
    if where == "replay.columns":
        hint += inline_spelling([str(key)])
    raise ConfigError(f"{source}: unknown key {key!r} in {where} (allowed: {', '.join(sorted(allowed))}){hint}")
