"""Analysis of trial logs: metrics, statistics, figures and the HTML report.

Reads only the trial log format (:mod:`capture_trainer.trial_log`). Modules: ``trial``
(reading and validating one log), ``metrics`` (per-trial metrics), ``study`` (a
directory of trials as one table, exports), ``stats`` (summaries and paired tests),
``figures`` (matplotlib on explicit Agg canvases), ``report`` (self-contained HTML) and
``cli`` (``capture-trainer analyze``). Nothing heavy is imported here.
"""
