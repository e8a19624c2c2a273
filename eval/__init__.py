"""Evaluation of Gepard (and reference engines): test sets, batch runs, ASR, metrics, reports.

Entry point: `python -m eval {run,score,report,compare,listening,sweep,stream-chart,tail-chart,sets,load}` (cli.py; its flags: parser.py).

Packages, lower first (each imports only those above it; tests/house/test_layout.py keeps it so):
- jsonio.py  crash-safe files: atomic writes, JSONL rows appended one a write
- progress.py  the long commands' progress bars (tqdm, on stderr), with the time left
- scoring/   ASR, text normalisation, metrics, bootstrap, speaker similarity
- engines/   what synthesizes: gepard_demo locally, Piper, a served Gepard
- runs/      run folders: batch synthesis, scoring, sets, seeds
- charts/    chart style, run charts, streaming and end-of-speech charts
- report/    summary, report.md, the failure table, several samples per sentence
- compare/   runs against a base: paired deltas overall and per category, a gate file, charts
- listening/ a blind listening test between runs: sessions, votes, win rates, Bradley-Terry
- sweeps/    sampling grids, one-pass thresholds, heatmaps, stop-head calibration
- load/      a speech server under load as `vllm bench serve` measures it: figures, a gate, the knee
- ui/        the app's Eval tab
"""
