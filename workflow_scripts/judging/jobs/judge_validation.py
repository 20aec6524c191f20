"""Rule judge_validation: the grounded judge's correctness against a reference label, and PPI replays
(judging/validation.py).

In:  every judged policy's grounded judgments and answers, the questions (reference answers) and the splits (groups);
     params: the policies, `judging.validate`, `judging.scoring`, the bootstrap settings.
Out: results/<dataset>/judging/agreement.csv, ppi_replay.csv, items.parquet (output `judged`: the pooled judged
     answers with their reference label), verdict.csv (validated under judging.validate.gate or not),
     reference_comparisons.csv (the reference label's paired differences), report.md and validation.png.
"""

from pathlib import Path
from typing import Any

from workflow_scripts.core.atomic import write_text_atomic
from workflow_scripts.core.contracts import (
    GENERATIONS,
    JUDGE_AGREEMENT,
    JUDGE_VALIDATION_ITEMS,
    JUDGE_VERDICT,
    JUDGMENTS_GROUNDED,
    PPI_REPLAY,
    QUESTIONS,
    REFERENCE_COMPARISONS,
    SPLITS,
)
from workflow_scripts.core.tables import read_table, write_report, write_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.judging import validation


def main(smk: Any) -> None:
    settings, boot = smk.params.validate, smk.params.bootstrap
    judged = [
        (policy, read_table(path, JUDGMENTS_GROUNDED)) for policy, path in zip(smk.params.policies, smk.input.grounded)
    ]
    answers = [read_table(path, GENERATIONS) for path in smk.input.answers]
    items = validation.validation_items(
        judged, answers, read_table(smk.input.questions, QUESTIONS), read_table(smk.input.splits, SPLITS),
        settings["reference"], settings["f1_threshold"], smk.params.scoring,
    )
    agreement = validation.agreement_table(items, boot["resamples"], settings["seed"], boot["confidence"])
    replay = validation.replay_table(items, settings["review_sizes"], settings["replays"], settings["seed"], "judge",
                                     boot["confidence"], policies=smk.params.policies)
    write_report(agreement, Path(smk.output.agreement), JUDGE_AGREEMENT, float_precision=4)
    write_report(replay, Path(smk.output.replay), PPI_REPLAY, float_precision=4)
    write_table(items, smk.output.judged, JUDGE_VALIDATION_ITEMS)
    verdict = validation.verdict_table(agreement, smk.params.scoring, settings["gate"], settings["reference"])
    write_report(verdict, Path(smk.output.verdict), JUDGE_VERDICT, float_precision=4)
    reference = validation.reference_comparisons(items, smk.params.policies, boot, settings["seed"])
    write_report(reference, Path(smk.output.reference), REFERENCE_COMPARISONS, float_precision=4)
    write_text_atomic(validation.report_text(smk.wildcards.dataset, agreement, replay, settings["reference"],
                                             smk.params.scoring), Path(smk.output.report))
    validation.validation_figure(items, replay, smk.output.figure,
                                 f"{smk.wildcards.dataset}: judge vs {settings['reference']} reference")


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
