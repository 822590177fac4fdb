"""The interactive trainer: a pygame window in the main process, the servo loop in another.

Modules: :mod:`trials.ui.servo` (the servo process and its control channel),
:mod:`trials.ui.shared_input` (pointer input from the window to a device in the servo
process), :mod:`trials.ui.scene` (drawing one snapshot), :mod:`trials.ui.cards` (score
card and progress view), :mod:`trials.ui.window` (the trainee and experimenter flows),
:mod:`trials.ui.trainee_db` (trainee history), :mod:`trials.ui.session` (an
experimenter's protocol session for one participant), :mod:`trials.ui.pybullet_view`
(the optional PyBullet 3-D view). pygame and pybullet are imported only where used.
"""
