"""A progress bar on standard error for long work (issue 20), never on standard output.

The bar is drawn only when standard error is a terminal: a pipe, a file or a test's capture
gets nothing from here. It appears once the work has run for DELAY_S: a quick run draws
nothing at all. It is transient: the terminal is left as it was, and stdout is untouched.
"""

from __future__ import annotations

import time
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

from rmc.console import err_console

DELAY_S = 2.0  # work that ends sooner shows no bar


class Steps:
    """Named steps of one long piece of work, each with its own bar; `update` is cheap
    enough to be called often (the bar is redrawn by rich's own thread)."""

    def __init__(self, console: Console | None = None, delay_s: float | None = None):
        self.console = console if console is not None else err_console()
        self.delay_s = DELAY_S if delay_s is None else delay_s
        self.enabled = self.console.is_terminal and not self.console.is_dumb_terminal
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TimeRemainingColumn(),
            console=self.console,
            transient=True,
            # rich would send what is printed meanwhile to the bar's console: stdout must
            # stay stdout (the statement, the JSON)
            redirect_stdout=False,
            redirect_stderr=False,
            disable=not self.enabled,
        )
        self._t0 = time.monotonic()
        self._shown = False
        self._task: int | None = None

    def step(self, description: str, total: float) -> None:
        """Start a new step (the previous one is complete)."""
        if not self.enabled:
            return
        if self._task is not None:
            self._progress.update(self._task, visible=False)  # one bar: the current step
        self._task = self._progress.add_task(description, total=total)
        self._show()

    def update(self, completed: float) -> None:
        if self.enabled and self._task is not None:
            self._progress.update(self._task, completed=completed)
            self._show()

    def _show(self) -> None:
        if not self._shown and time.monotonic() - self._t0 >= self.delay_s:
            self._shown = True
            self._progress.start()

    def close(self) -> None:
        if self._shown:
            self._progress.stop()
            self._shown = False

    def __enter__(self) -> Steps:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
