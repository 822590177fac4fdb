"""The ``capture-trainer`` command groups, one module each.

Every module exposes ``add_commands(subparsers)`` and imports nothing heavy at import
time: a handler imports the work it runs. :mod:`app.cli` lists the modules in
``COMMAND_MODULES``; a new command group is a new module here and one entry there.
"""
