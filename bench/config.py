"""One typed settings object for a run, parsed once.

The same flags are accepted by ``ralp-bench run`` (which wraps mpirun) and by
``python -m bench.run`` (what each MPI rank executes, also what a user runs
under their own ``mpirun -H ...`` on a real cluster), so both share
``add_run_arguments``.
"""
import argparse
import dataclasses
import json
import os
from dataclasses import dataclass, field
from typing import Optional

from bench.errors import UserError
from bench.strategy_specs import SPECS, spec_of, strategy_names

STRATEGIES = strategy_names()  # every registered strategy (bench/strategy_specs.py) and auto
PS_PLACEMENTS = ("dedicated", "colocated")
MAX_WORKERS = 64
# model: the model's own step timed under the host's quota; hardware: micro-benchmarks only.
CALIBRATIONS = ("model", "hardware")  # an emulated or local run beyond this is certainly a typo


@dataclass
class RunConfig:
    model: str = "alexnet_cifar"  # a zoo name, keras:NAME, a .keras/.h5 file, or module|file.py:function
    input_shape: Optional[str] = None  # "H,W,C": the data's and a user model's input (default: the model's)
    classes: Optional[int] = None      # the model's outputs (default: the model's)
    model_sha256: Optional[str] = None  # the driver's hash of the model's file; every rank checks it
    strategy: str = field(default="ralp", metadata={"rank": False})  # each rank is told the resolved one
    workers: int = 2
    ps: int = 1
    ps_placement: str = "dedicated"  # sync PS: dedicated (S PS hosts) | colocated (one PS task per worker host)
    batch_size: int = 32          # per worker
    steps: int = 10               # timed steps (the minimum when target_ci is set)
    target_ci: Optional[float] = None  # add steps until the median's 95% interval is within ±this share
    max_steps: Optional[int] = None    # at most this many timed steps with target_ci (default 10 x steps)
    time_cap: Optional[float] = None   # ... or until this many seconds of timed steps have run
    warmup_steps: int = 2         # excluded from timing
    learning_rate: float = 0.01
    momentum: float = 0.9
    seed: int = 0
    dataset: str = "synthetic"
    data_dir: Optional[str] = None
    cut: Optional[str] = None     # ralp cut layer; None = the analyzer's choice
    compression: str = "none"
    intra_threads: Optional[int] = None
    inter_threads: Optional[int] = None
    step_timeout: float = 120.0   # seconds one step may take before the run is declared hung
    train_to_accuracy: Optional[float] = None
    eval_every: int = 0
    hardware: Optional[str] = None   # analyzer hardware preset or JSON file (auto, predictions)
    bandwidth: Optional[str] = None  # link rate the analyzer assumes, e.g. "1gbit"
    # Driver-only (metadata rank=False): the ranks get the plan, not the link settings it came from;
    # the launcher adds --network itself.
    ps_bandwidth: Optional[str] = field(default=None, metadata={"rank": False})  # PS hosts' link rate if different
    latency: Optional[str] = field(default=None, metadata={"rank": False})       # one-way latency assumed
    network: Optional[str] = field(default=None, metadata={"rank": False})  # CIDR of the cluster network
    horovod_ops: str = "gloo"      # Horovod's controller + CPU collectives: gloo | mpi (bench/hvd_init.py)
    horovod_fusion_mb: float = 128.0  # HOROVOD_FUSION_THRESHOLD (Horovod 0.28's default: 128 MiB)
    horovod_cycle_ms: float = 1.0     # HOROVOD_CYCLE_TIME (its default: 1 ms)
    horovod_autotune: bool = False    # HOROVOD_AUTOTUNE: Horovod tunes fusion and cycle during the run
    cpus_per_host: Optional[float] = None  # each host's CPU quota (emulated cluster); calibration runs under it
    # What the cost model measures under that quota: model | hardware (RALP_CALIBRATION sets the default).
    calibration: str = field(default_factory=lambda: os.environ.get("RALP_CALIBRATION", "model"))
    out: Optional[str] = field(default=None, metadata={"rank": False})  # where rank 0 writes its JSON result
    dump_weights: Optional[str] = None  # .npz of final trainable weights (tests)
    extra: dict = field(default_factory=dict, metadata={"rank": False})

    def model_spec(self):
        """The model as every layer sees it (bench/models/registry.py), TF-free."""
        from bench.models.registry import get_spec

        return get_spec(self.model, self.input_shape, self.classes)

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
    def global_batch(self) -> int:
        return self.batch_size * self.workers

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def rank_fields(cls):
        """The settings every rank receives as flags (all but the driver-only ones)."""
        return [f.name for f in dataclasses.fields(cls) if f.metadata.get("rank", True)]

    @classmethod
    def from_args(cls, args) -> "RunConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in vars(args).items() if k in names and v is not None})

    def validate(self) -> "RunConfig":
        """Refuse bad settings with one line naming the fix, before anything starts. Long because
        it is a flat list of independent checks, one per setting, easier to read in one place."""
        from bench.models.sources import format_shape

        model = self.model_spec()  # a bad spelling, shape or class count: one line naming the fix
        self.input_shape = format_shape(model.input_shape) if self.input_shape else None
        if self.strategy != "auto":
            spec_of(self.strategy)  # one line naming the valid strategies
        from ralp.codec_spec import parse_codec

        # One spelling from here on: planning, predictions and rows compare it as text.
        self.compression = str(self.compression).strip().lower()
        if self.compression != "auto":  # auto: the analyzer picks (bench.planning)
            parse_codec(self.compression)  # a bad codec spec fails here, before anything is launched
        if self.strategy != "auto" and not spec_of(self.strategy).codecs and self.compression != "none":
            with_codecs = ", ".join(name for name, spec in SPECS.items() if spec.codecs)
            raise UserError(f"{self.strategy} does not support --compression ({spec_of(self.strategy).description}); "
                            f"use --compression none, or one of {with_codecs}")
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
        if self.target_ci is not None and not 0 < self.target_ci < 1:
            raise UserError(f"--target-ci is a share of the median in (0, 1), e.g. 0.05; got {self.target_ci}")
        if self.max_steps is not None and self.max_steps < self.steps:
            raise UserError(f"--max-steps ({self.max_steps}) must be at least --steps ({self.steps})")
        if self.time_cap is not None and not self.time_cap > 0:
            raise UserError(f"--time-cap must be a positive number of seconds, got {self.time_cap}")
        if not self.step_timeout > 0:
            raise UserError(f"--step-timeout must be a positive number of seconds, got {self.step_timeout}")
        if self.network is not None:
            import ipaddress

            try:
                ipaddress.ip_network(self.network, strict=False)
            except ValueError:
                raise UserError(f"--network {self.network!r} is not a CIDR such as 10.0.0.0/24") from None
        if self.hardware not in (None, "local"):
            from ralp.hardware import load_hardware

            load_hardware(self.hardware)  # a preset name or a readable JSON file, else one line naming the fix
        if self.warmup_steps < 0:
            raise UserError(f"--warmup-steps must be >= 0, got {self.warmup_steps}")
        if self.learning_rate <= 0:
            raise UserError(f"--learning-rate must be positive, got {self.learning_rate}")
        if self.train_to_accuracy is not None and not 0 < self.train_to_accuracy <= 1:
            raise UserError(f"--train-to-accuracy is a fraction in (0, 1], got {self.train_to_accuracy}")
        if self.horovod_ops not in ("gloo", "mpi"):
            raise UserError(f"--horovod-ops must be gloo or mpi, got {self.horovod_ops!r}")
        if not self.horovod_fusion_mb >= 0 or not self.horovod_cycle_ms > 0:
            raise UserError("--horovod-fusion-mb must be >= 0 and --horovod-cycle-ms > 0, e.g. 64 and 5")
        if self.calibration not in CALIBRATIONS:
            raise UserError(f"--calibration must be one of {', '.join(CALIBRATIONS)}, got {self.calibration!r}")
        if self.train_to_accuracy is not None and self.eval_every < 1:
            self.eval_every = 10
        return self


def add_run_arguments(p: argparse.ArgumentParser, multi_strategy: bool = False):
    """Flags shared by `ralp-bench run` and `python -m bench.run`."""
    d = RunConfig()
    p.add_argument("--model", default=d.model,
                   help=f"a zoo name (default {d.model}; see `ralp-bench models`), keras:NAME (tf.keras.applications), "
                        "a .keras/.h5 file, or package.module:function / path/file.py:function")
    p.add_argument("--input-shape", default=None, help="H,W,C the model takes (default: the model's own)")
    p.add_argument("--classes", type=int, default=None, help="classes the model outputs (default: the model's own)")
    p.add_argument("--model-sha256", default=None, help=argparse.SUPPRESS)  # set by the driver for the ranks
    p.add_argument("--strategy", default=d.strategy,
                   help=("comma-separated list of " if multi_strategy else "") + f"strategies: {', '.join(STRATEGIES)}")
    p.add_argument("--workers", type=int, default=d.workers, help="worker processes (default 2)")
    p.add_argument("--ps", type=int, default=d.ps, help="parameter-server tasks (variables sharded over them)")
    p.add_argument("--ps-placement", default=None, choices=PS_PLACEMENTS,
                   help="sync PS layout: dedicated (default: --ps PS hosts) or colocated (one PS task on every "
                        "worker host, variables sharded greedily by size, as tf_cnn_benchmarks does)")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="images per worker per step")
    p.add_argument("--steps", type=int, default=d.steps, help="timed steps (after warm-up)")
    p.add_argument("--warmup-steps", type=int, default=d.warmup_steps, help="untimed warm-up steps")
    p.add_argument("--target-ci", type=float, default=None,
                   help="after --steps, add timed steps until the median step time's 95%% interval is within "
                        "±this share of it (e.g. 0.05), up to --max-steps or --time-cap")
    p.add_argument("--max-steps", type=int, default=None, help="most timed steps with --target-ci (default 10x --steps)")
    p.add_argument("--time-cap", type=float, default=None,
                   help="with --target-ci: stop adding steps after this many seconds of timed steps")
    p.add_argument("--learning-rate", type=float, default=d.learning_rate)
    p.add_argument("--momentum", type=float, default=d.momentum)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--dataset", default=d.dataset, help="synthetic | mnist | cifar10 | imagenet")
    p.add_argument("--data-dir", default=None, help="directory with the data set's files (cifar10, imagenet)")
    p.add_argument("--cut", default=None, help="ralp: layer after which to split (default: the analyzer's choice)")
    p.add_argument("--compression", default=d.compression, help="none | fp16 | int8 | topk:FRACTION | auto (the analyzer picks)")
    p.add_argument("--intra-threads", type=int, default=None, help="TF intra-op threads per rank (default: from cores)")
    p.add_argument("--inter-threads", type=int, default=None, help="TF inter-op threads per rank")
    p.add_argument("--step-timeout", type=float, default=d.step_timeout,
                   help="seconds a step may take before the run is declared hung")
    p.add_argument("--train-to-accuracy", type=float, default=None, help="stop when held-out top-1 reaches this")
    p.add_argument("--eval-every", type=int, default=0, help="evaluate every N steps (accuracy runs)")
    p.add_argument("--hardware", default=None, help="analyzer hardware preset or JSON (for auto and predictions)")
    p.add_argument("--bandwidth", default=None, help="link rate the analyzer assumes, e.g. 10gbit")
    p.add_argument("--network", default=None, help="CIDR of the cluster network when hosts have several NICs")
    p.add_argument("--horovod-ops", default=None, choices=("gloo", "mpi"),
                   help="Horovod's controller and CPU collectives (default gloo: blocking waits, no spinning)")
    p.add_argument("--horovod-fusion-mb", type=float, default=None,
                   help="Horovod's tensor-fusion buffer in MiB (default 128, Horovod's own)")
    p.add_argument("--horovod-cycle-ms", type=float, default=None,
                   help="Horovod's background cycle in ms (default 1, Horovod's own)")
    p.add_argument("--horovod-autotune", action="store_const", const=True, default=None,
                   help="let Horovod's autotuner pick fusion and cycle during the run (warm-up steps included)")
    p.add_argument("--calibration", default=None, choices=CALIBRATIONS,
                   help="cost model's compute figures: the model's own step timed on one host (model, default) "
                        "or conv/matmul micro-benchmarks (hardware)")


def check_repeats(repeats) -> int:
    """--repeats: at least 1 (default 1)."""
    if repeats is None:
        return 1
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise UserError(f"--repeats must be a positive integer, got {repeats!r}")
    return repeats
