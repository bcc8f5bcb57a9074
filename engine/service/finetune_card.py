"""The model card of a `flashtick train` run: TRAINING.md beside the checkpoint, written from the run's record
(base, data, split, training, losses, answer calibration, answer heads, the test slice against the baselines), and
the phrases the card shares with the command's own output (``start_kept``, ``split_text``). Apart from the fit
(finetune.py) so that what the card says is found, and changed, in one place; the built-in model's card is
train_builtin.py's."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

import torch

from connectors.ticks import counted
from engine.service.evaluation_report import format_table, heldout_text, uncalibrated_why
from engine.service.features import HEAD_FILE
from engine.service.output_paths import write_text_atomically
from engine.service.splits import SplitSpec
from engine.service.untrained_tokens import never_trained_line


def start_kept(stats: dict[str, Any]) -> str:
    """What the best step being 0 means, said wherever the best step is: no step beat the starting weights."""
    return ("; the starting weights were kept: no training step beat their validation loss (step 0)"
            if stats.get("best_step") == 0 else "")


def _calibration_lines(calibration: dict[str, Any]) -> str:
    def line(name: str, c: dict[str, Any]) -> str:
        if (why := uncalibrated_why(c)) is not None:  # fit_answer_calibration left it as it was
            return f"  - `{name}`: not calibrated (temperature 1, no bias): {why}"
        held = (f"; held out (each half scored by the fit on the other): {heldout_text(c)}"
                if c.get("heldout_nll_raw") is not None else "")
        return (f"  - `{name}`: temperature {c['temperature']:.3f}, "
                f"bias [{', '.join(f'{b:+.3f}' for b in c['bias'])}]; "
                f"{c['points']} points, NLL {c.get('nll_raw')} -> {c.get('nll_calibrated')} nats on the points it "
                f"was fitted to{held}")
    lines = [line(name, c) for name, c in calibration["questions"].items()]
    return "\n".join(lines) or "  - (no question calibrated)"


def _head_lines(heads: dict[str, dict[str, Any]]) -> str:
    if not heads:
        return " none (the model's answers alone)"
    return "".join(f"\n  - `{name}`: w = {h['model_weight']:g}; validation Brier {h['brier_model']} (model) -> "
                   f"{h['brier_blend']} (blended), {h['validation_points']} points; regression on {h['points']} "
                   f"train points" for name, h in heads.items())


def split_text(spec: SplitSpec, gap: int) -> str:
    return "/".join(f"{100 * x:g}" for x in (spec.train, spec.validation, spec.test)) + f" (gap {gap} ticks)"


def _reading_line(reading: dict[str, str]) -> str:
    """How the training files were read, where not as detected (`--price-offset CLK0=38`, `--tz ...`): every answer
    of the model depends on it, and the card is what a colleague reads (review374 #10). Before `- Data`, so that
    no option's words are taken for the data's market (market_caveat.card_data)."""
    from engine.service.reading_record import FILE_READING, shown

    read = {key: value for key, value in reading.items() if key in FILE_READING}
    if not read:
        return ""
    line = (f"\n- Read with: {shown(read, read)} (evaluation.json's trained_on.reading; `evaluate`, `backtest "
            f"--model`, `feed replay` and `serve` read files and ticks so unless given otherwise: docs/model.md)")
    if "price_offset" in read:
        line += ("\n  Its prices were shifted by that offset: its `direction_*` answers read a move's sign as the "
                 "market made it, but `volatility_*` and `move_bps_*` count bps of the shifted level, so they "
                 "measure the offset, not the market: ask `direction_*` of these instruments (docs/replay.md)")
    return line


def write_model_card(out: Path, record: dict[str, Any], plotted: bool) -> None:
    stats, cfg, ev = record["training"], record["config"], record["evaluation"]
    span = lambda r: f"[{r[0]}, {r[1]})"  # noqa: E731  (JSON keeps a range as [start, stop])
    streams = "\n".join(f"  - `{name}`: {s['ticks']} ticks; train {span(s['train'])}, validation "
                        f"{span(s['validation'])}, test {span(s['test'])} (tick index ranges [start, stop))"
                        for name, s in ev["streams"].items())
    base_heads = (" (its answer heads not kept: the ones below are fitted to these weights)"
                  if (Path(record["base"]) / HEAD_FILE).is_file() else "")
    left_out = "".join(f"\n  - left out {line}" for line in record["skipped"])
    left_out += f"\n  - note: {record['overlap']}" if record.get("overlap") else ""
    left_out += f"\n  - note: {record['validation_note']}" if record.get("validation_note") else ""
    left_out += f"\n  - warning: {record['in_sample']}" if record.get("in_sample") else ""  # (review443 #1)
    session_gap = record["reading"].get("session_gap")
    paused = (f", none across a pause in event time of {session_gap} or more (--session-gap {session_gap})"
              if session_gap else "")
    val = stats["validation"]
    still = (f"; still improving at its last check (step {stats['best_step']}): more --max-minutes or --steps "
             f"may help" if val and val[-1][0] == stats["best_step"] and len(val) > 1 else "")
    best_line = (f"best validation loss {stats['best_validation_loss']} at step {stats['best_step']} (weights kept "
                 f"from there){start_kept(stats)}" if stats['best_validation_loss'] is not None else
                 "no validation part: the weights of the last step")
    steps = f"{stats['steps_done']} step{'' if stats['steps_done'] == 1 else 's'}"
    last_losses = (f"last {counted(min(20, stats['steps_done']), 'training step')} next-token "
                   f"{stats['final_lm_loss']}, answer {stats['final_qa_loss']} nats")
    plot_note = " and calibration.png the reliability diagram" if plotted else ""
    text = f"""# Tick model trained with `flashtick train`

- Base: {record['base']}{base_heads}; {record['params'] / 1e6:.2f}M parameters; window {cfg['window_ticks']} ticks
  ({cfg['max_positions']} positions): keep at most {cfg['window_ticks']} ticks in a session window\
{_reading_line(record.get("reading") or {})}
- Data: {', '.join(f'`{f}`' for f in record['files'])}; rows rejected: {record['rejected'] or 'none'}
- Split per stream, in time: {record['split']}; labels of each part use that part's ticks only{paused}
{streams}{left_out}
- Training: {steps} (of {cfg['steps']}; {stats['stopped']}) x batch {cfg['batch']} windows
  + {cfg['questions_per_window']} question probes each; AdamW lr {cfg['lr']}, seed {cfg['seed']}; on {record['device']}
  ({platform.machine()}, torch {torch.__version__}); {stats['train_seconds']} s of optimisation,
  {record['total_seconds']} s in all
- Losses: {last_losses};
  {best_line}{still}
{never_trained_line(record.get("never_trained") or [])}\
- Answer calibration (calibration.json; answers are softmax(z / temperature + bias) over the answer logits z; a
  question's fit is kept only where, fitted on either half of its validation points, it beat no calibration on the
  other half, "held out" below):
  {'fitted on ' if record['calibration']['questions'] else ''}{record['calibration']['source']}
{_calibration_lines(record['calibration'])}
- Answer heads (answer_head.json; the published answer is w x the calibrated model's + (1 - w) x a logistic
  regression's on the stream's microstructure features, the regression fitted on the train part, w on the
  validation part):{_head_lines(record.get('heads') or {})}

## Test slice: model vs baselines fitted on the train slice

`prior` = each stream's train class frequencies, `major` = always its train majority class, `logit` =
multinomial logistic regression on microstructure features; intervals are 95% block-bootstrap intervals of model \
minus logistic
(blocks of {ev['options']['block']} consecutive answer points). evaluation.json has every number{plot_note}.

```
{format_table(ev)}
```
"""
    write_text_atomically(out / "TRAINING.md", text)
