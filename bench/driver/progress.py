"""Progress per configuration with an ETA (rich), or plain lines in quiet mode / CI."""
import sys
import time

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn


class RunProgress:
    def __init__(self, total_configs: int, quiet: bool = False):
        self.quiet = quiet or not sys.stderr.isatty()
        self.total = total_configs
        self.done = 0
        self.started = time.monotonic()
        self._progress = None
        if not self.quiet:
            self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TimeRemainingColumn(), transient=False)
            self._overall = self._progress.add_task("all configurations", total=total_configs)
            self._progress.start()

    @staticmethod
    def label(cfg) -> str:
        return f"{cfg.model} {cfg.strategy} x{cfg.workers}"

    def callback(self, cfg):
        if self.quiet:
            print(f"[{self.done + 1}/{self.total}] {self.label(cfg)} ...", file=sys.stderr, flush=True)
            return None
        task = self._progress.add_task(self.label(cfg), total=None)

        def update(done, total):
            self._progress.update(task, completed=done, total=total)
        self._task = task
        return update

    def finished(self, cfg, row):
        self.done += 1
        status = "ok" if row["status"] == "ok" else f"FAILED: {row['failure']}"
        speed = f"{row['images_per_sec']:.1f} img/s" if row.get("images_per_sec") else ""
        if self.quiet:
            print(f"[{self.done}/{self.total}] {self.label(cfg)}: {status} {speed}", file=sys.stderr, flush=True)
            return
        self._progress.update(self._task, description=f"{self.label(cfg)}: {status} {speed}")
        self._progress.update(self._overall, advance=1)

    def note(self, cfg, text):
        """A line about the point in progress (e.g. why it is measured again)."""
        line = f"[{self.done + 1}/{self.total}] {self.label(cfg)}: {text}"
        if self.quiet:
            print(line, file=sys.stderr, flush=True)
        else:
            self._progress.console.print(line)

    def skipped(self, cfg):
        """A point an earlier, interrupted run of the sweep already measured."""
        self.done += 1
        if self.quiet:
            print(f"[{self.done}/{self.total}] {self.label(cfg)}: done in the resumed run", file=sys.stderr,
                  flush=True)
            return
        self._progress.update(self._overall, advance=1)

    def close(self):
        if self._progress:
            self._progress.stop()
