"""What a listening session's votes say: who won, by how much, and how sure.

- Head to head, for every two runs: wins, losses and "same" answers; the win rate is wins over
  the decisive votes (wins + losses), with its Wilson 95% interval (eval.scoring.rates), so 9 of
  10 reads [60%, 98%], not 90% flat. "Same" answers are counted and shown, not split.
- With more than two runs, Bradley-Terry strengths fitted to every vote (Hunter's MM algorithm;
  a "same" answer counts as half a win each way, as Davidson's model does with ties' share), each
  pair of runs given one virtual "same" so no strength runs to infinity on a small sample; the
  score is the log strength, centred on 0 over the runs (a run 0.69 above another wins two votes
  in three against it); 95% intervals from 1000 bootstrap resamples of the votes.
"""

from __future__ import annotations

import itertools

import numpy as np

from eval.scoring.rates import wilson

REPLICATES = 1000
SEED = 20261202


def head_to_head(votes: list[dict], runs: list[str]) -> list[dict]:
    out = []
    for x, y in itertools.combinations(runs, 2):
        vs = [v for v in votes if {v["a"], v["b"]} == {x, y}]
        wins, losses = sum(v["winner"] == x for v in vs), sum(v["winner"] == y for v in vs)
        ties = len(vs) - wins - losses
        low, high = wilson(wins, wins + losses)
        out.append({"run": x, "against": y, "votes": len(vs), "wins": wins, "losses": losses, "same": ties,
                    "win_rate": wins / (wins + losses) if wins + losses else float("nan"),
                    "ci_low": low, "ci_high": high})
    return out


def _fit(wins: np.ndarray, games: np.ndarray, iterations: int = 1000, tol: float = 1e-9) -> np.ndarray:
    """Bradley-Terry strengths (log, centred) from wins[i, j] (i over j, halves for ties): Hunter's
    MM update until no log strength moves by more than `tol`."""
    w = wins.sum(1)
    s = np.zeros(len(wins))
    for _ in range(iterations):
        p = np.exp(s)
        new = np.log(w / (games / (p[:, None] + p[None, :])).sum(1))
        new -= new.mean()
        if np.max(np.abs(new - s)) < tol:
            return new
        s = new
    return s


def _vote_arrays(votes: list[dict], runs: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each vote as (winner index, loser index, weight): a "same" is two half wins, one each way."""
    k = {r: i for i, r in enumerate(runs)}
    win, lose, weight = [], [], []
    for v in votes:
        i, j = k[v["a"]], k[v["b"]]
        if v["winner"] is None:
            win += [i, j]
            lose += [j, i]
            weight += [0.5, 0.5]
        else:
            w, lo = (i, j) if v["winner"] == v["a"] else (j, i)
            win.append(w)
            lose.append(lo)
            weight.append(1.0)
    return np.array(win, int), np.array(lose, int), np.array(weight)


def _matrix(n: int, win: np.ndarray, lose: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    wins = np.full((n, n), 0.5)  # one virtual "same" per pair of runs (module docstring)
    np.fill_diagonal(wins, 0.0)
    np.add.at(wins, (win, lose), weight)
    return wins, wins + wins.T


def bradley_terry(votes: list[dict], runs: list[str], replicates: int = REPLICATES, seed: int = SEED) -> list[dict]:
    if not votes:
        return [{"run": r, "score": 0.0, "ci_low": float("nan"), "ci_high": float("nan")} for r in runs]
    win, lose, weight = _vote_arrays(votes, runs)
    # A vote's rows in the arrays (one, or two for a "same"), so a resample draws whole votes.
    rows = np.split(np.arange(len(win)), np.cumsum([2 if v["winner"] is None else 1 for v in votes])[:-1])
    point = _fit(*_matrix(len(runs), win, lose, weight))
    rng = np.random.default_rng(seed)
    reps = []
    for _ in range(replicates):
        take = np.concatenate([rows[i] for i in rng.integers(0, len(votes), len(votes))])
        reps.append(_fit(*_matrix(len(runs), win[take], lose[take], weight[take])))
    low, high = np.quantile(np.array(reps), [0.025, 0.975], axis=0)
    order = np.argsort(-point)
    return [{"run": runs[i], "score": float(point[i]), "ci_low": float(low[i]), "ci_high": float(high[i])} for i in order]


def summary(votes: list[dict], runs: list[str]) -> dict:
    listeners = sorted({v["who"] for v in votes})
    return {"votes": len(votes), "listeners": listeners, "head_to_head": head_to_head(votes, runs),
            "bradley_terry": bradley_terry(votes, runs) if len(runs) > 2 else None}


def markdown(name: str, runs: list[str], pairs: int, s: dict) -> str:
    lines = [f"# Listening test {name}", "", f"Runs: {', '.join(runs)}; {pairs} pairs (same sentence and seed, A/B "
             f"shuffled per pair); {s['votes']} votes from {len(s['listeners'])} listener(s): {', '.join(s['listeners']) or 'none'}.",
             "", "| run | against | votes | wins | losses | same | win rate [Wilson 95%] |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for h in s["head_to_head"]:
        rate = "–" if h["wins"] + h["losses"] == 0 else f"{100 * h['win_rate']:.0f}% [{100 * h['ci_low']:.0f}, {100 * h['ci_high']:.0f}]"
        lines.append(f"| {h['run']} | {h['against']} | {h['votes']} | {h['wins']} | {h['losses']} | {h['same']} | {rate} |")
    if s["bradley_terry"]:
        lines += ["", "Bradley-Terry (log strength, centred; 95% bootstrap over votes):", "",
                  "| run | score | 95% |", "| --- | --- | --- |"]
        lines += [f"| {b['run']} | {b['score']:+.2f} | [{b['ci_low']:+.2f}, {b['ci_high']:+.2f}] |" for b in s["bradley_terry"]]
    return "\n".join(lines) + "\n"
