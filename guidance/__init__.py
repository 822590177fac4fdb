"""Guidance laws (DG eq. 11, APF, none, forbidden-region fixtures) and force rendering.

Pure numpy, no I/O, nothing of ours but ``capture_trainer``. Import the laws from
:mod:`guidance.laws` and the rendering from :mod:`guidance.rendering`.
"""
