"""The capture-trainer application: the ``capture-trainer`` command line
(:mod:`app.cli` and one module per command group in :mod:`app.commands`), the trainee's
trainer window and the experimenter's session window (:mod:`app.ui`). It sits on top of
the house (trials, analysis, haptics, guidance, robot, scenarios) and uses them; nothing
imports it.
"""
