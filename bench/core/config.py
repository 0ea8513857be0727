"""One typed settings object for a run, parsed once.

The same flags are accepted by ``ralp-bench run`` (which wraps mpirun) and by
``python -m bench.run`` (what each MPI rank executes, also what a user runs
under their own ``mpirun -H ...`` on a real cluster), so both share
``add_run_arguments``.
"""
import argparse
import dataclasses
import ipaddress
import json
import math
import os
import typing
from dataclasses import dataclass, field
from typing import Optional

from bench.core.errors import UserError
from bench.core.strategy_specs import AUTO, SPECS, rings_tower, spec_of, strategy_names
from bench.models.sources import format_shape, get_spec
from ralp.codec_spec import parse_codec
from ralp.hardware import load_hardware
from ralp.links import LinkSpec
from ralp.strategy_costs import CODECS_OF, PIPELINED  # the hybrid's codecs (stateless) and micro-batches

STRATEGIES = strategy_names()  # every registered strategy (bench/core/strategy_specs.py) and auto
PS_PLACEMENTS = ("dedicated", "colocated")
MAX_WORKERS = 64
# model: the model's own step timed under the host's quota; hardware: micro-benchmarks only.
CALIBRATIONS = ("model", "hardware")  # an emulated or local run beyond this is certainly a typo


def setting(default=None, help=None, *, cli=("run",), rank=True, row=None, choices=None, factory=None, **flag):
    """A RunConfig field declared once: its default, its flag's help and choices, where the flag
    is offered (``cli``: "run" = ``ralp-bench run`` and every rank, "cluster" = the driver's
    cluster flags, "rank" = ``python -m bench.run`` only; () = no flag), whether the ranks get it
    (``rank``), and the result-row column it fills (``row``: a name, or True for its own)."""
    meta = {"help": help, "cli": tuple(cli), "rank": rank, "row": row, "choices": choices, "flag": flag}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


# Settings that take a number or auto; auto is resolved before launch (bench/driver/planning.py ``resolve``).
NUMBERS_OR_AUTO = ("micro_batches", "hybrid_bucket_mb")


def or_auto(kind, expects: str):
    """A flag's parser for a number (``kind``) or auto: a setting the driver resolves before launch
    (bench/driver/planning.py ``resolve``), so the ranks and the row get a number."""
    def parse(text):
        if str(text).strip().lower() == AUTO:
            return AUTO
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expects {expects} or auto, got {text!r}") from None
    return parse


@dataclass(frozen=True)
class RunConfig:
    """Every run setting, declared once: the flags of ``ralp-bench run`` and of each rank
    (``add_setting_arguments``), the sweep keys (bench/driver/sweep.py), what the ranks are sent
    (``rank_fields``) and the row's config columns (``row_fields``) all come from here."""
    model: str = setting("alexnet_cifar", "a zoo name (see `ralp-bench models`), keras:NAME (tf.keras.applications), "
                         "a .keras/.h5 file, or package.module:function / path/file.py:function", row=True)
    input_shape: Optional[str] = setting(None, "H,W,C the model takes (default: the model's own)", row=True)
    classes: Optional[int] = setting(None, "classes the model outputs (default: the model's own)", row=True)
    # The driver's hash of a user's model file; every rank checks its own copy against it.
    model_sha256: Optional[str] = setting(None, argparse.SUPPRESS, row=True)
    # Each rank is told the resolved strategy (never auto), so this one is not forwarded.
    strategy: str = setting("ralp", "strategies: " + ", ".join(STRATEGIES), rank=False, row=True)
    workers: int = setting(2, "worker processes", row=True)
    ps: int = setting(1, "parameter-server tasks (variables sharded over them)", row=True)
    ps_placement: str = setting("dedicated", "sync PS layout: dedicated (--ps PS hosts) or colocated (one PS task on "
                                "every worker host, variables sharded greedily by size, as tf_cnn_benchmarks does)",
                                choices=PS_PLACEMENTS, row=True)
    batch_size: int = setting(32, "images per worker per step", row=True)
    micro_batches: typing.Union[int, str] = setting(
        1, "ralp-hybrid: pipeline each worker's batch in this many micro-batches (the same update; activations of "
        "one travel while the next is computed; auto: the count the cost model prices fastest)", row=True,
        type=or_auto(int, "a positive integer"))
    hybrid_bucket_mb: typing.Union[float, str] = setting(
        4.0, "ralp-hybrid: MiB of fp32 tower gradients per ring all-reduce, whole layers in backward order, each "
        "ring starting as its layers' backward ends (0: one fused ring after the whole backward; auto: the size the "
        "cost model prices fastest, as ralp-bench analyze chooses it)", row=True,
        type=or_auto(float, "MiB >= 0 (0: one fused ring)"))
    steps: int = setting(10, "timed steps (after warm-up; the minimum with --target-ci)", row=True)
    warmup_steps: int = setting(2, "untimed warm-up steps", row=True)
    target_ci: Optional[float] = setting(None, "after --steps, add timed steps until the median step time's 95%% "
                                         "interval is within ±this share of it (e.g. 0.05), up to --max-steps or "
                                         "--time-cap", row=True)
    max_steps: Optional[int] = setting(None, "most timed steps with --target-ci (default 10x --steps)")
    time_cap: Optional[float] = setting(None, "with --target-ci: stop adding steps after this many seconds of "
                                        "timed steps")
    learning_rate: float = setting(0.01, "SGD learning rate")
    momentum: float = setting(0.9, "SGD momentum")
    seed: int = setting(0, "seed of the initial weights and the data")
    dataset: str = setting("synthetic", "synthetic | mnist | digits | cifar10 | imagenet", row=True)
    data_dir: Optional[str] = setting(None, "directory with the data set's files (cifar10, imagenet)")
    cut: Optional[str] = setting(None, "ralp: layer after which to split (default: the analyzer's choice)")
    compression: str = setting("none", "none | fp16 | int8 | topk:FRACTION | auto (the analyzer picks)", row=True)
    intra_threads: Optional[int] = setting(None, "TF intra-op threads per rank (default: from cores)", row=True)
    inter_threads: Optional[int] = setting(None, "TF inter-op threads per rank (default 2)", row=True)
    step_timeout: float = setting(120.0, "seconds a step may take before the run is declared hung")
    train_to_accuracy: Optional[float] = setting(None, "stop when held-out top-1 reaches this",
                                                 row="target_accuracy")
    eval_every: int = setting(0, "evaluate every N steps (accuracy runs)")
    hardware: Optional[str] = setting(None, "analyzer hardware preset or JSON (for auto and predictions)")
    bandwidth: Optional[str] = setting(None, "link rate: the emulated NICs', and what the analyzer assumes, "
                                       "e.g. 1gbit (default 1gbit emulated, 10gbit assumed elsewhere)")
    # The link settings below reach the ranks as the plan they produce, not as flags.
    ps_bandwidth: Optional[str] = setting(None, "PS hosts' link rate if different (emulated and assumed)",
                                          cli=("cluster",), rank=False)
    latency: Optional[str] = setting(None, "one-way latency of every link, e.g. 0.1ms (emulated and assumed)",
                                     cli=("cluster",), rank=False)
    # The launcher adds --network itself.
    network: Optional[str] = setting(None, "CIDR of the cluster network when hosts have several NICs", rank=False)
    horovod_ops: str = setting("gloo", "Horovod's controller and CPU collectives (gloo: blocking waits, no "
                               "spinning; bench/rank/hvd_init.py)", choices=("gloo", "mpi"))
    horovod_fusion_mb: float = setting(128.0, "Horovod's tensor-fusion buffer in MiB (Horovod 0.28's own default)")
    horovod_cycle_ms: float = setting(1.0, "Horovod's background cycle in ms (Horovod's own default)")
    horovod_autotune: bool = setting(False, "let Horovod's autotuner pick fusion and cycle during the run "
                                     "(warm-up steps included)")
    horovod_hierarchical: bool = setting(False, "Horovod's hierarchical all-reduce (HOROVOD_HIERARCHICAL_ALLREDUCE): "
                                         "NCCL reduce-scatter inside each host, an MPI all-reduce of each GPU's "
                                         "1/k shard across hosts, NCCL all-gather; GPU hosts with Horovod built "
                                         "with NCCL, --horovod-ops mpi; priced by the cost model")
    cpus_per_host: Optional[float] = setting(None, "CPU cores each emulated host may use, a hard cgroup cap "
                                             "(default: this machine's cores / hosts; 0: no cap); the "
                                             "calibration runs under it", cli=("cluster", "rank"))
    workers_per_host: Optional[int] = setting(None, "workers sharing one worker host and its NIC, as the cluster "
                                              "places them (hosts/Slurm: from the slots; default: one per host); "
                                              "the cost model prices their shared NIC", cli=("rank",), row=True)
    # What the cost model measures under that quota (RALP_CALIBRATION sets the default).
    calibration: str = setting(None, "cost model's compute figures: the model's own step timed on one host (model) "
                               "or conv/matmul micro-benchmarks (hardware)", choices=CALIBRATIONS,
                               factory=lambda: os.environ.get("RALP_CALIBRATION", "model"))
    # Driver-only: the cluster host whose CPUs price compute (hosts/Slurm: the first worker host,
    # set with how to reach it by bench/driver/clusters.py apply_cluster; None: this machine under
    # cpus_per_host, or no calibration at all with a --hardware preset or file). Rows record it.
    calibrate_on: Optional[str] = setting(None, cli=(), rank=False, row="calibrated_on")
    out: Optional[str] = setting(None, "rank 0 writes the result JSON to this file on its own host (default: "
                                 "RALP-RESULT lines on stdout; python -m bench.rank.result < OUTPUT decodes them)",
                                 cli=("rank",), rank=False)
    # Set by the driver for a Horovod run that makes its cluster's link check (bench/launch/link_probe.py).
    link_probe_floats: Optional[int] = setting(None, "horovod: before training, time 3 all-reduces of this many fp32 "
                                               "values in the run's own ranks (the all-reduce link check; "
                                               "ralp-bench run sets it)", cli=("rank",))
    dump_weights: Optional[str] = setting(None, "rank 0 saves final trainable weights (.npz) to this path on its own "
                                          "host", cli=("rank",))
    extra: dict = setting(None, cli=(), rank=False, factory=dict)

    def link(self, default_bandwidth: str):
        """The links this run's analyzer assumes (ralp/links.py): the cluster's, which the driver
        wrote into bandwidth/ps_bandwidth/latency (bench/driver/clusters.py), else the flags given."""
        return LinkSpec.parse(self.bandwidth or default_bandwidth, self.ps_bandwidth, self.latency)

    def model_spec(self):
        """The model as every layer sees it (bench/models/registry.py), TF-free."""
        return get_spec(self.model, self.input_shape, self.classes)

    def _pipelines(self) -> bool:
        """Does the strategy run --micro-batches (the cost model's PIPELINED, read through its spec)?"""
        return self.strategy in SPECS and SPECS[self.strategy].priced_as in PIPELINED

    def _rings_tower(self) -> bool:
        return rings_tower(self.strategy)

    def colocated(self, strategy: str) -> bool:
        """Does ``strategy`` run with a PS task beside every worker? Only sync PS shards its
        variables that way (tf_cnn_benchmarks' layout); RALP's head and ps-async's
        coordinator keep the dedicated PS host."""
        return strategy in SPECS and SPECS[strategy].colocatable and self.ps_placement == "colocated"

    def images_per_step(self, strategy: str) -> int:
        """Images one timed step trains: the global batch, or one batch for the one-process reference."""
        return self.batch_size if strategy in SPECS and SPECS[strategy].one_batch_per_step else self.global_batch

    def ps_tasks(self, strategy: str) -> int:
        """PS tasks ``strategy`` runs with: one per worker when colocated, else --ps."""
        return self.workers if self.colocated(strategy) else self.ps

    @property
    def step_limit(self) -> int:
        """Most timed steps this run may take."""
        return (self.max_steps or 10 * self.steps) if self.target_ci is not None else self.steps

    @property
    def broadcast_window_s(self) -> float:
        """How much longer than its start-up work a rank's setup may take when it broadcasts the
        model from rank 0 (bench/rank/trainer.py arms the setup with --step-timeout plus this).
        Gloo's broadcast is a binomial tree of d = ceil(log2 N) rounds whose sends a rank posts
        all at once: rank 0's d copies share its link, then its first child's d-1 copies share
        that child's, and so on, so the last rank has its copy after d(d+1)/2 copies' time, where
        a ring all-reduce step carries 2(N-1)/N copies. The broadcast may take that many steps'
        worth of --step-timeout (VGG-16 at 8 workers on 29.7 Mbit/s links: 6 x 553 MB, about
        900 s, sampled per host on 2026-12-07, against a 285 s step)."""
        n = self.workers
        if n < 2 or not (self.strategy == AUTO or spec_of(self.strategy).broadcasts_model):
            return 0.0
        rounds = math.ceil(math.log2(n))
        return self.step_timeout * rounds * (rounds + 1) / 2 * n / (2 * (n - 1))

    @property
    def setup_window_s(self) -> float:
        """How long a rank's setup may take before the run is declared hung."""
        return max(300.0, self.step_timeout) + self.broadcast_window_s

    @property
    def warmup_window_s(self) -> float:
        """How long the warm-up may take before the run is declared hung (bench/rank/trainer.py;
        the first call traces the step)."""
        return self.step_timeout * (self.warmup_steps + 2)

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.workers

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def row_fields(cls):
        """(field, row column) of the settings a result row records."""
        return [(f.name, f.name if f.metadata["row"] is True else f.metadata["row"])
                for f in dataclasses.fields(cls) if f.metadata.get("row")]

    @classmethod
    def rank_fields(cls):
        """The settings every rank receives as flags (all but the driver-only ones)."""
        return [f.name for f in dataclasses.fields(cls) if f.metadata.get("rank", True)]

    @classmethod
    def from_args(cls, args) -> "RunConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in vars(args).items() if k in names and v is not None})

    def validate(self) -> "RunConfig":
        """The configuration in its one spelling (input shape, codec), checked (``_check``), with
        the README tests' smoke limits applied: a new frozen RunConfig, the only kind that runs."""
        model = self.model_spec()  # a bad spelling, shape or class count: one line naming the fix
        # One spelling from here on: planning, predictions and rows compare them as text.
        cfg = dataclasses.replace(self, input_shape=format_shape(model.input_shape) if self.input_shape else None,
                                  compression=str(self.compression).strip().lower())
        cfg._check()
        if cfg.train_to_accuracy is not None and cfg.eval_every < 1:
            cfg = dataclasses.replace(cfg, eval_every=10)
        return smoke_limits(cfg)

    def _check(self):
        """Refuse bad settings with one line naming the fix, before anything starts. Long because
        it is a flat list of independent checks, one per setting, easier to read in one place."""
        if self.strategy != "auto":
            spec_of(self.strategy)  # one line naming the valid strategies
        if self.compression != "auto":  # auto: the analyzer picks (bench.driver.planning)
            parse_codec(self.compression)  # a bad codec spec fails here, before anything is launched
        if self.strategy != "auto" and not spec_of(self.strategy).codecs and self.compression != "none":
            with_codecs = ", ".join(name for name, spec in SPECS.items() if spec.codecs)
            raise UserError(f"{self.strategy} does not support --compression ({spec_of(self.strategy).description}); "
                            f"use --compression none, or one of {with_codecs}")

        if (self._rings_tower() and self.compression != "auto"
                and parse_codec(self.compression).kind not in ("none",) + CODECS_OF["ralp-hybrid"]):
            raise UserError(f"ralp-hybrid's ring re-encodes partial sums at every hop, where {self.compression} would "
                            "need error feedback per hop; use --compression fp16 or int8")
        if not 1 <= self.workers <= MAX_WORKERS:
            raise UserError(f"--workers must be between 1 and {MAX_WORKERS}, got {self.workers}")
        if not 1 <= self.ps <= 8:
            raise UserError(f"--ps must be between 1 and 8, got {self.ps}")
        if self.ps_placement not in PS_PLACEMENTS:
            raise UserError(f"--ps-placement must be one of {', '.join(PS_PLACEMENTS)}, got {self.ps_placement!r}")
        if self.ps_placement == "colocated" and self.ps != 1:
            raise UserError("--ps-placement colocated puts one PS task beside each worker; drop --ps "
                            f"{self.ps} (it sets the dedicated layout's PS hosts)")
        for name in ("batch_size", "steps"):
            if getattr(self, name) < 1:
                raise UserError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.link_probe_floats is not None and self.link_probe_floats < 1:
            raise UserError(f"--link-probe-floats must be at least 1, got {self.link_probe_floats}")
        if self.micro_batches != AUTO:
            if not (isinstance(self.micro_batches, int) and self.micro_batches >= 1):
                raise UserError(f"--micro-batches must be at least 1 or auto, got {self.micro_batches!r}")
            if self.micro_batches > 1 and self.strategy != "auto" and not self._pipelines():
                raise UserError(f"--micro-batches pipelines ralp-hybrid's batches; {self.strategy} has none: "
                                "drop --micro-batches or use --strategy ralp-hybrid")
            if self.batch_size % self.micro_batches:
                raise UserError(f"--batch-size {self.batch_size} does not split into {self.micro_batches} equal "
                                "micro-batches; pick a --micro-batches that divides it")
        if self.hybrid_bucket_mb != AUTO and not (isinstance(self.hybrid_bucket_mb, (int, float))
                                                  and self.hybrid_bucket_mb >= 0):
            raise UserError(f"--hybrid-bucket-mb must be MiB >= 0 (0: one fused ring) or auto, "
                            f"got {self.hybrid_bucket_mb!r}")
        if self.target_ci is not None and not 0 < self.target_ci < 1:
            raise UserError(f"--target-ci is a share of the median in (0, 1), e.g. 0.05; got {self.target_ci}")
        if self.max_steps is not None and self.max_steps < self.steps:
            raise UserError(f"--max-steps ({self.max_steps}) must be at least --steps ({self.steps})")
        if self.time_cap is not None and not self.time_cap > 0:
            raise UserError(f"--time-cap must be a positive number of seconds, got {self.time_cap}")
        if not self.step_timeout > 0:
            raise UserError(f"--step-timeout must be a positive number of seconds, got {self.step_timeout}")
        if self.network is not None:
            try:
                ipaddress.ip_network(self.network, strict=False)
            except ValueError:
                raise UserError(f"--network {self.network!r} is not a CIDR such as 10.0.0.0/24") from None
        if self.hardware not in (None, "local"):
            load_hardware(self.hardware)  # a preset name or a readable JSON file, else one line naming the fix
        if self.warmup_steps < 0:
            raise UserError(f"--warmup-steps must be >= 0, got {self.warmup_steps}")
        if self.learning_rate <= 0:
            raise UserError(f"--learning-rate must be positive, got {self.learning_rate}")
        if self.train_to_accuracy is not None and not 0 < self.train_to_accuracy <= 1:
            raise UserError(f"--train-to-accuracy is a fraction in (0, 1], got {self.train_to_accuracy}")
        if self.horovod_ops not in ("gloo", "mpi"):
            raise UserError(f"--horovod-ops must be gloo or mpi, got {self.horovod_ops!r}")
        if self.horovod_hierarchical and self.strategy == "horovod":  # other strategies ignore Horovod's knobs
            self._check_hierarchical()
        if not self.horovod_fusion_mb >= 0 or not self.horovod_cycle_ms > 0:
            raise UserError("--horovod-fusion-mb must be >= 0 and --horovod-cycle-ms > 0, e.g. 64 and 5")
        if self.calibration not in CALIBRATIONS:
            raise UserError(f"--calibration must be one of {', '.join(CALIBRATIONS)}, got {self.calibration!r}")

    def _check_hierarchical(self):
        """Horovod runs its hierarchical all-reduce only as NCCL inside a host and MPI across hosts
        (NCCLHierarchicalAllreduce, built with MPI): under Gloo, or on tensors in host memory, the
        variable is ignored and a row would say hierarchical of a flat ring. Whether this Horovod
        has NCCL is asked before launch (planning.check_hierarchical) and again on each rank (hvd_init)."""
        if self.horovod_ops != "mpi":
            raise UserError("--horovod-hierarchical needs --horovod-ops mpi: Horovod's hierarchical all-reduce "
                            "crosses hosts over MPI")
        if self.compression == "auto" or parse_codec(self.compression).kind in ("int8", "topk"):
            raise UserError(f"--horovod-hierarchical sums in rings; --compression {self.compression} may be "
                            "all-gathered: use none or fp16")


def add_run_arguments(p: argparse.ArgumentParser, multi_strategy: bool = False):
    """Flags shared by `ralp-bench run` and `python -m bench.run`, from RunConfig's fields."""
    add_setting_arguments(p, "run", multi_strategy)


def add_setting_arguments(p: argparse.ArgumentParser, where: str, multi_strategy: bool = False):
    """A flag for every RunConfig field offered ``where`` ("run", "cluster", "rank"); defaults stay
    None so ``RunConfig.from_args`` keeps the field's own default (shown in the help)."""
    for f in dataclasses.fields(RunConfig):
        meta = f.metadata
        if where not in meta.get("cli", ()):
            continue
        kind = next((t for t in typing.get_args(f.type) if t is not type(None)), f.type)
        default = f.default if f.default is not dataclasses.MISSING else None
        text = meta["help"]
        if f.name == "strategy" and multi_strategy:
            text = "comma-separated list of " + text
        if text not in (None, argparse.SUPPRESS) and default not in (None, False):
            text += f" (default {default})"
        kwargs = dict(default=None, help=text, **meta["flag"])
        if kind is bool:
            kwargs.update(action="store_const", const=True)
        else:  # a field's own parser (``flag`` type=...) where its values are not all of one type
            kwargs.setdefault("type", kind if kind in (int, float) else str)
            kwargs.update(choices=meta.get("choices"))
        p.add_argument("--" + f.name.replace("_", "-"), **kwargs)


def check_repeats(repeats) -> int:
    """--repeats: at least 1 (default 1); one under RALP_SMOKE."""
    if repeats is None:
        return 1
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise UserError(f"--repeats must be a positive integer, got {repeats!r}")
    return 1 if smoke() else repeats


SMOKE_STEPS, SMOKE_WARMUP = 2, 1


def smoke() -> bool:
    """RALP_SMOKE=1: the README's one documented override, so its commands run as typed in CI
    (tests/test_readme.py) in minutes: every run takes SMOKE_WARMUP warm-up and at most
    SMOKE_STEPS timed steps, one repeat, no --target-ci; a sweep runs the first point of each
    strategy and of each grid (bench/driver/sweep.py). Everything else (models, clusters, links, rows) is as typed."""
    return os.environ.get("RALP_SMOKE", "") not in ("", "0")


def smoke_limits(cfg: "RunConfig") -> "RunConfig":
    if not smoke():
        return cfg
    cfg = dataclasses.replace(cfg, steps=min(cfg.steps, SMOKE_STEPS), warmup_steps=min(cfg.warmup_steps, SMOKE_WARMUP),
                              target_ci=None, max_steps=None, time_cap=None)
    if cfg.train_to_accuracy is not None:
        cfg = dataclasses.replace(cfg, train_to_accuracy=None, eval_every=0)
    return cfg
