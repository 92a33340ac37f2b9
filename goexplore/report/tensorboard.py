"""``goexplore run --tensorboard``: the metrics rows as TensorBoard scalars.

Each new row of ``metrics.jsonl`` becomes one scalar per numeric field (step:
agent steps) under ``RUN_DIR/tb``. Needs ``tensorboardX`` (``pip install
goexplore[tensorboard]``) or, failing that, PyTorch's
``torch.utils.tensorboard`` with the ``tensorboard`` package.
"""

from __future__ import annotations

from pathlib import Path

from goexplore.formats import parse_metrics_line

SKIP = {"batch", "frames", "time"}
INSTALL_HINT = "pip install 'goexplore[tensorboard]'  (or: pip install tensorboardX)"


def _summary_writer_class():
    try:
        from tensorboardX import SummaryWriter

        return SummaryWriter
    except ImportError:
        pass
    try:
        from torch.utils.tensorboard import SummaryWriter

        return SummaryWriter
    except Exception:  # torch missing, or torch without the tensorboard package
        return None


def available() -> bool:
    return _summary_writer_class() is not None


class MetricsToTensorBoard:
    """Follows ``metrics.jsonl`` and writes the rows that appear after
    ``after_frames`` (rows of an earlier session are not written twice)."""

    def __init__(self, metrics_path: Path, log_dir: Path, after_frames: int = 0):
        cls = _summary_writer_class()
        if cls is None:
            raise ImportError(f"TensorBoard logging needs tensorboardX: {INSTALL_HINT}")
        self.metrics_path = Path(metrics_path)
        self.log_dir = Path(log_dir)
        self.after = after_frames
        self.writer = cls(str(self.log_dir))
        self._offset = 0
        self._prev: dict | None = None
        self.rows_written = 0

    def update(self, progress=None) -> None:
        """Call as often as you like (a progress that is not ``logged`` is skipped)."""
        if progress is not None and not getattr(progress, "logged", True):
            return
        if not self.metrics_path.exists():
            return
        with open(self.metrics_path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n")
        if end < 0:
            return
        self._offset += end + 1
        for line in data[:end].splitlines():
            if line.strip():  # the run dir's one rule for a line (goexplore.formats)
                self._prev = parse_metrics_line(line, str(self.metrics_path), self._prev)
                self.write_row(self._prev)
        self.writer.flush()

    def write_row(self, row: dict) -> None:
        step = int(row.get("frames", 0))
        if step <= self.after:
            return
        for k, v in row.items():
            if k in SKIP or isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            self.writer.add_scalar(f"goexplore/{k}", float(v), step)
        self.rows_written += 1

    def close(self) -> None:
        self.update()
        self.writer.close()
