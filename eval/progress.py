"""Progress on stderr for the long commands: tqdm bars, as `eval run` draws its own, with the time
left (tqdm's `<remaining>`, from the pace so far).

`FractionBar` is the Eval tab's progress signature, callable(fraction, description), drawn as one
bar of 100%: sweep reports through it, so the command line and the tab say the same ("point 3 of
27"). Commands that count units (stream-chart's measured rows, tail-chart's clips) use tqdm itself.
"""

from __future__ import annotations

from tqdm import tqdm

BAR = "{desc}: {percentage:3.0f}%|{bar}| {postfix} [{elapsed}<{remaining}]"


class FractionBar:
    def __init__(self, desc: str):
        self.bar = tqdm(total=100, desc=desc, bar_format=BAR)

    def __call__(self, fraction: float, description: str) -> None:
        target = round(100 * min(max(fraction, 0.0), 1.0), 2)
        self.bar.set_postfix_str(description, refresh=False)
        if target > self.bar.n:
            self.bar.update(target - self.bar.n)  # an update is what tqdm's pace, so the time left, reads
        else:
            self.bar.refresh()

    def close(self) -> None:
        self.bar.close()
