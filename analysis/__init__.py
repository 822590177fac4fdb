"""Analysis of trial logs: metrics, statistics, figures and the HTML report.

Reads only the trial log format (:mod:`capture_trainer.trial_log`). Modules: ``trial``
(reading and validating one log), ``metrics`` (per-trial metrics), ``outcomes`` (how
each trial ended, logged or provisional), ``study`` (a directory of trials as one table,
exports), ``stats`` (summaries and paired tests, pooled and per scenario), ``figures``
(matplotlib on explicit Agg canvases) and ``report`` (self-contained HTML); the
``capture-trainer analyze`` command lives in ``app.commands.analysis``. Nothing heavy is
imported here.
"""
